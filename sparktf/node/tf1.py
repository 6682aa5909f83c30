"""Helpers for classic TF1 between-graph code (``tf.compat.v1``) on sparktf nodes.

Runs in the TF process; imports tensorflow when called (:func:`install_defaults` does not).
"""

from __future__ import annotations

import inspect

from sparktf.node import imports

#: How often a session that waits for the chief checks whether it has initialized the model.
RECOVERY_WAIT_SECS = 1.0
SESSION_MANAGER = "tensorflow.python.training.session_manager"
SUPERVISOR = "tensorflow.python.training.supervisor"


def install_defaults() -> None:
    """In this node process, a ``tf.compat.v1.train.SessionManager`` created without
    ``recovery_wait_secs`` (as ``MonitoredTrainingSession`` creates it for a non-chief worker),
    and likewise the older ``tf.compat.v1.train.Supervisor`` (which passes its own default of
    30 s on), check every ``RECOVERY_WAIT_SECS`` instead of every 30 s whether the chief has
    initialized the variables: in the seeds' plain TF1 code, a worker whose session comes up a
    moment before the chief's otherwise idles for half a minute. A value given explicitly is
    kept. Applied when TensorFlow's modules are imported; nothing else changes."""
    imports.after_import(SESSION_MANAGER, lambda m: _shorter_recovery_wait(m, "SessionManager"))
    imports.after_import(SUPERVISOR, lambda m: _shorter_recovery_wait(m, "Supervisor"))


def _shorter_recovery_wait(module, cls: str) -> None:
    init = getattr(getattr(module, cls, None), "__init__", None)
    if init is not None:
        init = inspect.unwrap(init)  # Supervisor's is wrapped by a deprecation notice
    code, defaults = getattr(init, "__code__", None), getattr(init, "__defaults__", None)
    if code is None or not defaults:
        return
    positional = code.co_varnames[1:code.co_argcount]
    with_defaults = positional[len(positional) - len(defaults):]
    if "recovery_wait_secs" not in with_defaults:
        return  # another TensorFlow: leave it as it is
    i = with_defaults.index("recovery_wait_secs")
    if defaults[i] == 30:
        init.__defaults__ = defaults[:i] + (RECOVERY_WAIT_SECS,) + defaults[i + 1:]


def worker_session_creator(master: str = "", config=None, scaffold=None,
                           recovery_wait_secs: float = 1.0):
    """A ``tf.compat.v1.train.WorkerSessionCreator`` that checks every ``recovery_wait_secs``
    (TensorFlow's default: 30 s) whether the chief has initialized the variables.

    A non-chief ``MonitoredTrainingSession`` waits for the chief in steps of 30 s, so a worker
    that comes up a moment before the chief idles for half a minute. On sparktf nodes that
    default is 1 s already (:func:`install_defaults`); this creator sets it explicitly::

        creator = sparktf.node.tf1.worker_session_creator(master=server.target, config=config)
        with tf.compat.v1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            ...
    """
    import tensorflow as tf

    v1 = tf.compat.v1

    class _Creator(v1.train.WorkerSessionCreator):
        def _get_session_manager(self):
            if self._session_manager is None:
                self._session_manager = v1.train.SessionManager(
                    local_init_op=self._scaffold.local_init_op,
                    local_init_feed_dict=self._scaffold.local_init_feed_dict,
                    ready_op=self._scaffold.ready_op,
                    ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                    graph=v1.get_default_graph(), recovery_wait_secs=recovery_wait_secs)
            return self._session_manager

    return _Creator(scaffold=scaffold, master=master, config=config)
