"""The Spark barrier task: one per node, in a Spark Python worker on an executor.

:mod:`.barrier` is the function Spark runs (reserve the node's port, gather every address,
start the supervisor, feed it, wait), and :mod:`.supervisor` the small process (forked from
the task, or ``python -m sparktf.task.supervisor``) that owns the node's process tree.

Runs in the Spark Python worker (the supervisor in its own process). Imports pyspark only
inside the task; never tensorflow (``tests/unit/test_preflight.py::test_layering`` checks).

Modules:

- ``barrier``: The barrier task: what runs in each Spark barrier task to hold one node
- ``feeder``: The barrier task's feeder (InputMode.SPARK): its partition to the TF process
- ``feederror``: The barrier task's feed failure, shared by the feeder's modules
- ``frames``: A partition as feed frames (``common.feedwire``)
- ``readback``: Inference: the TF process's outputs read back while the partition is sent
- ``sparksocket``: The Spark worker's own data socket, handed to the TF process
- ``supervisor``: A node's supervisor, forked from the barrier task: it owns the TF process tree
"""
