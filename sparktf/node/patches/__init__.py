"""Patches: modules that change TensorFlow's behaviour in a node's process, each applied when
TensorFlow imports the module it changes (:mod:`~sparktf.node.patches.on_import`), so that
plain TensorFlow programs neither hang nor idle on sparktf.

- :mod:`~sparktf.node.patches.mwms`: MultiWorkerMirroredStrategy beside parameter servers;
- :mod:`~sparktf.node.patches.tf1_sessions`: TF1 sessions check for the chief every 1 s, not 30, and
  close within 3 s;
- :mod:`~sparktf.node.patches.join`: ``server.join()`` serves until training is over;
- :mod:`~sparktf.node.patches.checkpoints`: an evaluator's ``checkpoints_iterator`` ends after
  training;
- :mod:`~sparktf.node.patches.evaluator`: connections to every task leave out the evaluator.

Runs in the TF process; never imports tensorflow itself.

Modules:

- ``checkpoints``: An evaluator's ``tf.train.checkpoints_iterator`` ends once training is over
- ``evaluator``: The evaluator in TF_CONFIG, apart from the connections training makes
- ``join``: ``server.join()`` in a ``main_fn``: serve until training is over
- ``mwms``: MultiWorkerMirroredStrategy in a cluster that also has parameter servers
- ``on_import``: Run a function on a module as soon as it is imported in this (node) process
- ``tf1_sessions``: TF1 sessions' defaults (``tf.compat.v1``), shortened where between-graph code idles
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparktf.node.patches import checkpoints, evaluator, join, mwms, tf1_sessions

if TYPE_CHECKING:
    from sparktf.common.spec import NodeSpec
    from sparktf.node.runtime import NodeRuntime


def install(spec: NodeSpec, runtime: NodeRuntime) -> None:
    """Every patch a chief, worker or evaluator gets, before its ``main_fn`` runs."""
    mwms.install()
    tf1_sessions.install_defaults()
    join.install(runtime)
    if spec.role.job == "evaluator":
        checkpoints.install(runtime)
    else:
        evaluator.install(spec.cluster_spec, spec.role.job)
