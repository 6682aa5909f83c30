"""The driver's pure job core: the rules of one attempt, table-tested on their own.

It imports no Spark (no pyspark, and nothing of :mod:`sparktf.driver` outside this package;
``tests/unit/test_import_layers.py`` checks it), no sockets, no threads:

* :mod:`~sparktf.driver.job.state`: an attempt's lifecycle, composing the rest;
* :mod:`~sparktf.driver.job.records`: what the driver keeps of each node, progress data;
* :mod:`~sparktf.driver.job.limits`: an attempt's time limits;
* :mod:`~sparktf.driver.job.liveness`: when a live node counts as hung;
* :mod:`~sparktf.driver.job.feedbound`: the feed bound, and the plan to move rows to equalize;
* :mod:`~sparktf.driver.job.failures`: which failure ends an attempt, typed;
* :mod:`~sparktf.driver.job.inplace`: workers restarted in place.
"""
