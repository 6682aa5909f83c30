"""The Spark barrier task: one per node, in a Spark Python worker on an executor.

:mod:`.barrier` is the function Spark runs (reserve the node's port, gather every address,
start the supervisor, feed it, wait), and :mod:`.supervisor` the small process (forked from
the task, or ``python -m sparktf.task.supervisor``) that owns the node's process tree.

Runs in the Spark Python worker (the supervisor in its own process). Imports pyspark only
inside the task; never tensorflow (``tests/unit/test_preflight.py::test_layering`` checks).
"""
