"""The driver side: ``sparktf.run`` and the :class:`Cluster` it returns.

Runs in the user's PySpark driver process. It may import pyspark, never tensorflow (a test
checks ``sys.modules``). The package is split by job:

* :mod:`~sparktf.driver.settings`: the one table of settings, resolved and checked once;
* :mod:`~sparktf.driver.state`: the pure job state (no sockets, no Spark): every liveness and
  failure rule, table-tested on its own;
* :mod:`~sparktf.driver.runner`: the threads and sockets that carry out the state's actions;
* :mod:`~sparktf.driver.stages`: the Spark barrier stages that hold the nodes, over the data
  that :mod:`~sparktf.driver.partition` gives one partition per node;
* :mod:`~sparktf.driver.control`: the control server the nodes report to;
* :mod:`~sparktf.driver.preflight`: the checks made before any stage starts;
* :mod:`~sparktf.driver.cluster`: the public API, ``run()`` and ``Cluster``.
"""
