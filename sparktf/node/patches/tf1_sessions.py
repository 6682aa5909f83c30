"""TF1 sessions' defaults (``tf.compat.v1``) shortened where the seeds' plain between-graph code
would otherwise idle, and ``SyncReplicasOptimizer`` marked as synchronous training.

Runs in the TF process; never imports tensorflow itself (the patches run when it is imported).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from sparktf.node import synchronous
from sparktf.node.patches import on_import

#: How often a session that waits for the chief checks whether it has initialized the model.
RECOVERY_WAIT_SECS = 1.0
#: How long closing a monitored session (or stopping a Supervisor) waits for its threads
#: before its session's close cancels what they are still running; TensorFlow's default: 120 s.
STOP_GRACE_SECS = 3.0
SESSION_MANAGER = "tensorflow.python.training.session_manager"
SUPERVISOR = "tensorflow.python.training.supervisor"
MONITORED_SESSION = "tensorflow.python.training.monitored_session"
SYNC_REPLICAS = "tensorflow.python.training.sync_replicas_optimizer"


def install_defaults() -> None:
    """Two of TensorFlow's TF1 session defaults, changed in this node process where the seeds'
    plain TF1 code would otherwise idle; a value given explicitly is kept, and the patches are
    applied when TensorFlow's modules are imported:

    * a ``tf.compat.v1.train.SessionManager`` created without ``recovery_wait_secs`` (as
      ``MonitoredTrainingSession`` creates it for a non-chief worker), and likewise the older
      ``tf.compat.v1.train.Supervisor`` (which passes its own default of 30 s on), check every
      ``RECOVERY_WAIT_SECS`` instead of every 30 s whether the chief has initialized the
      variables: a worker whose session comes up a moment before the chief's otherwise idles
      for half a minute;
    * ``MonitoredTrainingSession``, ``MonitoredSession`` and ``SingularMonitoredSession``
      (``stop_grace_period_secs``) and ``Supervisor`` (``stop_grace_secs``) give their threads
      ``STOP_GRACE_SECS`` instead of 120 s to stop when the session closes. A thread that
      checks its coordinator stops at once either way; one blocked in a step is cancelled by
      the session's close after the grace. ``SyncReplicasOptimizer``'s chief queue runner is
      such a thread: it waits on the parameter server for the next step's gradients, which
      never come once the replicas have stopped, so the chief idled two minutes at its end.
    """
    on_import.after_import(
        SESSION_MANAGER,
        lambda m: _shorter(
            _init(m, "SessionManager"), "recovery_wait_secs", 30, RECOVERY_WAIT_SECS
        ),
    )
    on_import.after_import(SUPERVISOR, _supervisor)
    on_import.after_import(MONITORED_SESSION, _monitored_sessions)
    on_import.after_import(SYNC_REPLICAS, _sync_replicas)


def _sync_replicas(module) -> None:
    """A ``SyncReplicasOptimizer`` built in this process makes it a synchronous trainer
    (:mod:`sparktf.node.synchronous`); nothing else changes."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def __init__(self, *args, **kwargs):
            synchronous.mark("SyncReplicasOptimizer")
            return original(self, *args, **kwargs)

        return __init__

    on_import.wrap(getattr(module, "SyncReplicasOptimizer", None), "__init__", make)


def _supervisor(module) -> None:
    init = _init(module, "Supervisor")
    _shorter(init, "recovery_wait_secs", 30, RECOVERY_WAIT_SECS)
    _shorter(init, "stop_grace_secs", 120, STOP_GRACE_SECS)


def _monitored_sessions(module) -> None:
    for func in (
        getattr(module, "MonitoredTrainingSession", None),
        _init(module, "MonitoredSession"),
        _init(module, "SingularMonitoredSession"),
    ):
        _shorter(func, "stop_grace_period_secs", 120, STOP_GRACE_SECS)


def _init(module, cls: str):
    init = getattr(getattr(module, cls, None), "__init__", None)
    return None if init is None else inspect.unwrap(init)  # Supervisor's: a deprecation wrapper


def _shorter(func, name: str, default: float, value: float) -> None:
    """``func``'s default for its argument ``name`` becomes ``value`` if it is ``default``
    (another TensorFlow, with other arguments or defaults, is left as it is)."""
    code, defaults = getattr(func, "__code__", None), getattr(func, "__defaults__", None)
    if code is None:
        return
    kwdefaults = getattr(func, "__kwdefaults__", None) or {}
    if kwdefaults.get(name) == default:
        func.__kwdefaults__ = {**kwdefaults, name: value}
        return
    positional = code.co_varnames[: code.co_argcount]
    with_defaults = positional[len(positional) - len(defaults or ()) :]
    i = with_defaults.index(name) if name in with_defaults else None
    if i is not None and defaults and defaults[i] == default:
        func.__defaults__ = defaults[:i] + (value,) + defaults[i + 1 :]
