"""The driver's pure job core: the rules of one attempt, table-tested on their own.

It imports no Spark (no pyspark, and nothing of :mod:`sparktf.driver` outside this package;
``tests/unit/test_import_layers.py`` checks it), no sockets, no threads.

Modules:

- ``failures``: Which failure ends an attempt, as a typed error
- ``feedbound``: The feed bound as the driver keeps it, from every training node's reports
- ``inplace``: Workers restarted in place: when a worker's supervisor may start it again
- ``limits``: The time limits of one attempt (``Limits``)
- ``liveness``: When a live node counts as hung: silent, or without progress, too long
- ``records``: What the driver keeps of each node of an attempt, and what it sends them
- ``state``: The pure state of one attempt: its lifecycle, from the nodes' messages and the time
"""
