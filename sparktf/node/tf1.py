"""Helpers for classic TF1 between-graph code (``tf.compat.v1``) in a ``main_fn``.

What sparktf changes in TF1 sessions by itself is in :mod:`sparktf.node.patches.tf1_sessions`.
Runs in the TF process; imports tensorflow when called.
"""

from __future__ import annotations

from typing import Any


def worker_session_creator(
    master: str = "", config: Any = None, scaffold: Any = None, recovery_wait_secs: float = 1.0
) -> Any:
    """A ``tf.compat.v1.train.WorkerSessionCreator`` that checks every ``recovery_wait_secs``
    (TensorFlow's default: 30 s) whether the chief has initialized the variables.

    A non-chief ``MonitoredTrainingSession`` waits for the chief in steps of 30 s, so a worker
    that comes up a moment before the chief idles for half a minute. On sparktf nodes that
    default is 1 s already (:func:`sparktf.node.patches.tf1_sessions.install_defaults`); this creator
    sets it explicitly::

        creator = sparktf.node.tf1.worker_session_creator(master=server.target, config=config)
        with tf.compat.v1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            ...
    """
    import tensorflow as tf

    v1 = tf.compat.v1
    base: Any = v1.train.WorkerSessionCreator  # tensorflow has no stubs: mypy cannot see it

    class _Creator(base):
        _session_manager: Any  # set by WorkerSessionCreator.__init__ (None until first use)

        def _get_session_manager(self):
            if self._session_manager is None:
                self._session_manager = v1.train.SessionManager(
                    local_init_op=self._scaffold.local_init_op,
                    local_init_feed_dict=self._scaffold.local_init_feed_dict,
                    ready_op=self._scaffold.ready_op,
                    ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                    graph=v1.get_default_graph(),
                    recovery_wait_secs=recovery_wait_secs,
                )
            return self._session_manager

    return _Creator(scaffold=scaffold, master=master, config=config)
