"""The TensorFlow process of a node (:mod:`.process`; forked from its supervisor), the ``ctx``
handed to ``main_fn`` (:mod:`.context`), its data feed (:mod:`.feed`) and TensorBoard
(:mod:`.tensorboard`).

Runs in the node's own process, started by its supervisor. Imports tensorflow lazily, where a
method needs it; never pyspark (``tests/unit/test_preflight.py::test_layering`` checks).

Modules:

- ``__main__``: ``python -m sparktf.node PARENT_PID``: the node process (``process``)
- ``context``: The ``ctx`` handed to ``main_fn``: who this node is and what it can do
- ``feed/``: InputMode.SPARK inside the TF process: the data feed over this node's partition
- ``horovod_env``: A training node's Horovod environment, set before ``main_fn`` runs
- ``keras_progress``: The Keras callback behind ``ctx.keras_callback()``
- ``patches/``: Modules that change TensorFlow's behaviour in a node's process, on its import
- ``process``: The TensorFlow node process, forked from the node's supervisor
- ``reach``: Node side: can this node reach every other node's TensorFlow port?
- ``resume``: Resume from the latest checkpoint in one call, on a node
- ``runtime``: What a node's process owns besides ``main_fn``: its channel, events, threads
- ``synchronous``: Whether this node process trains in lock-step with its peers, sent with every heartbeat
- ``tensorboard``: TensorBoard on the chief: ``run(..., tensorboard=True)``
- ``tf1``: Helpers for classic TF1 between-graph code (``tf.compat.v1``) in a ``main_fn``
"""
