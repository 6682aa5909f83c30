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
"""
