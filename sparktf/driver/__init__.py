"""The driver side: ``sparktf.run`` and the :class:`Cluster` it returns.

Runs in the user's PySpark driver process. It may import pyspark, never tensorflow (a test
checks ``sys.modules``). The package is split by job, one idea a module:

* the settings are :mod:`~sparktf.common.settings` (the one table, and every default,
  resolved and checked once), shared with the other sides;
* the pure job core, :mod:`~sparktf.driver.job` (no sockets, no Spark), table-tested on its
  own: an attempt's lifecycle (:mod:`~sparktf.driver.job.state`), composing the rest;
* :mod:`~sparktf.driver.runner`: the threads that carry out the state's actions, attempt after
  attempt (:mod:`~sparktf.driver.attempt`: what one attempt owns;
  :mod:`~sparktf.driver.builder`: how each is built), with
  :mod:`~sparktf.driver.sparkjobs` (Spark's jobs: tracking, cancelling, their failures' text),
  :mod:`~sparktf.driver.history` (what the driver keeps of the nodes' output: log files,
  metrics, TensorBoard scalars) and :mod:`~sparktf.driver.console` (the nodes' lines on the
  driver);
* :mod:`~sparktf.driver.stages`: the Spark barrier stages that hold the nodes, over the data
  that :mod:`~sparktf.driver.partition` gives one partition per node;
* :mod:`~sparktf.driver.control`: the control server the nodes report to;
* :mod:`~sparktf.driver.preflight`: the checks made before any stage starts;
* :mod:`~sparktf.driver.sparkfacts`: what the driver learns from Spark at run time (its
  settings, task slots, the session's kind, what it knows of Hadoop);
* :mod:`~sparktf.driver.cluster`: the public API, ``run()`` and ``Cluster``, with
  :mod:`~sparktf.driver.launch` (what a job's settings become: its launch spec)
  and :mod:`~sparktf.driver.arguments` (what its calls accept); its waits stop every node on
  an error.

Modules:

- ``arguments``: What a Cluster's calls (``train``, ``inference``, ``shutdown``) accept, checked
- ``attempt``: One attempt of a job: what one launch of the whole cluster owns
- ``builder``: Builds a job's attempts, none started: each with a control server and a fresh secret
- ``cluster``: The public API on the driver: ``sparktf.run`` and the :class:`Cluster` it returns
- ``console``: The driver's console: the nodes' lines tagged ``[worker:1]``, sparktf's notices
- ``control``: The driver's control and log server: one per attempt, one connection per node process
- ``credentials``: A secure cluster's delegation tokens, relayed from the driver to the job's TF processes
- ``history``: What a job leaves on the driver: every node's output as a file, its metrics
- ``job/``: The driver's pure job core: the rules of one attempt, table-tested on their own
- ``launch``: What a job's settings become on the driver: its ``LaunchSpec``
- ``layout``: How many partitions the data of ``train()`` has, and whether it is fed as it is
- ``partition``: Driver side of InputMode.SPARK: give each node its partition of an RDD or a DataFrame
- ``preflight``: Checks made before any barrier stage starts; each problem says what to change
- ``progress``: Progress on the driver: how far each node is, as a live bar or as plain log lines
- ``runner``: Carries out a job's attempts: the control server, the Spark job, the monitor thread
- ``scalars``: The nodes' ``ctx.report`` metrics as TensorBoard scalars, written on the driver
- ``sparkfacts``: What the driver learns from Spark at run time: settings, slots, GPUs, Hadoop
- ``sparkjobs``: Spark's jobs as the driver sees them: tracking, cancelling, their failures' text
- ``sparkside``: The Spark side of a cluster on a Spark Connect session (``ConnectContext``)
- ``stages``: The Spark barrier stages that hold the nodes: one task per node, one partition each
- ``warmup``: ``sparktf.warm_up``: the executors' Python worker daemons started in the background
- ``yarnmemory``: Whether a YARN executor's container leaves its TensorFlow nodes the memory they need
"""
