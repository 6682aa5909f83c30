"""The TensorFlow process of a node (:mod:`.process`; forked from its supervisor), the ``ctx``
handed to ``main_fn`` (:mod:`.context`), its data feed (:mod:`.feed`) and TensorBoard
(:mod:`.tensorboard`).

Runs in the node's own process, started by its supervisor. Imports tensorflow lazily, where a
method needs it; never pyspark (``tests/unit/test_preflight.py::test_layering`` checks).
"""
