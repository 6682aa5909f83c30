"""Workers restarted in place: the rules by which the driver lets a worker's supervisor start
its failed TF process again, with the same TF_CONFIG and port, while the rest of the cluster
runs on (``spark.sparktf.workerRestarts``).

Models with parameter servers go on without a worker: TF2's ``ClusterCoordinator`` re-runs
the lost worker's closures on the others and takes the worker back once it answers at the
same address again; a TF1 asynchronous between-graph worker (``MonitoredTrainingSession``)
joins the running cluster again from the variables on the ps. Synchronous models
(MultiWorkerMirroredStrategy, ``SyncReplicasOptimizer``) wait for the lost peer's part of a
step: for them the whole cluster restarts (``max_restarts``).

The exchange: the supervisor sends ``restart`` (the exit code, the last lines); the driver
answers ``resume`` with ``go`` or the reason why not. A yes waits until the old process's
channel has ended, so that everything it sent (its error report, its last heartbeat) counts
against the old process, not the new one; the new process says hello with its
``incarnation``, and a late hello of an older one is turned away.

A worker whose TF process is stopped or frozen (SIGSTOP, a hang that stops its heartbeats)
exits by itself never: once it is silent past ``heartbeat_timeout`` the driver tells its
supervisor to ``kill`` it (:func:`may_kill`, :func:`kill`), and the exchange above follows
from its exit. A supervisor that does not ask for the restart within ``kill_wait``
(``stop_grace`` + 10 s; it is frozen too, say) gets its worker declared hung as before
(:func:`check_killing`).

Pure functions of a node's record, the limits and the time: no sockets, no threads, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable

from sparktf.common import messages
from sparktf.driver.job import failures
from sparktf.driver.job.limits import KILL_WAIT_SECS, Limits
from sparktf.driver.job.records import NodeRecord, NodeState, Send
from sparktf.errors import NodeError


def refusal(n: NodeRecord, limits: Limits, ending: bool, lockstep: str | None = None) -> str | None:
    """Why ``n``'s failed process may not start again in place (None: it may); ``ending``:
    the attempt is stopping or has failed; ``lockstep``: which trainer reported that it
    trains in lock-step (``SyncReplicasOptimizer``, MultiWorkerMirroredStrategy), if one did:
    its peers would wait for ever for the lost worker's part of a step, so the whole cluster
    restarts instead (``max_restarts``)."""
    limit = limits.worker_restarts
    if n.role.job != "worker":
        return "only workers are restarted in place"
    if limit <= 0:
        return "spark.sparktf.workerRestarts is 0"
    restarts = n.inplace.restarts
    if restarts >= limit:
        return (
            f"it was restarted in place {restarts} time{'s' if restarts > 1 else ''} "
            f"already (spark.sparktf.workerRestarts={limit})"
        )
    if n.outcome.has_result:
        return "its main_fn had returned"
    if n.liveness.hung or n.liveness.lost:
        return "it was declared dead"
    if ending:
        return "the job is ending"
    if lockstep is not None:
        return (
            f"{lockstep}: its peers would wait for ever for the lost worker's part of a "
            "step, so the whole cluster restarts instead (max_restarts); set "
            "spark.sparktf.workerRestarts=0 for such a job"
        )
    return None


def restart(n: NodeRecord, now: float) -> NodeError:
    """Forget ``n``'s failed process (its error, exit, channel) and count the restart; returns
    the failure it absorbed, as it would have failed the job (``restarted_in_place`` set)."""
    live, out = n.liveness, n.outcome
    wanted, n.inplace.restart_wanted = n.inplace.restart_wanted or {}, None
    out.exit = {"code": wanted.get("code", 1), "tail": list(n.tail)}
    failure = failures.node_error(n, [])
    failure.restarted_in_place = True  # type: ignore[attr-defined]
    n.inplace.restarts += 1
    live.killing_at = live.silent = None
    out.error = out.exit = None
    out.error_at = out.failed_at = out.exit_at = None
    live.connected = live.closed = False
    n.state, n.inplace.restarting_at, live.last_beat = NodeState.RUNNING, now, now
    return failure


def resume(n: NodeRecord, limits: Limits, why: str | None) -> Send:
    """The answer to ``n``'s supervisor: go (``why`` None) or not, and why."""
    message = messages.make(
        "resume", go=why is None, count=n.inplace.restarts, limit=limits.worker_restarts, why=why
    )
    return Send((n.name,), messages.SUPERVISOR, message)


def check_restarting(
    nodes: Iterable[NodeRecord], limits: Limits, now: float, resumed_at: float
) -> None:
    """A worker restarted in place whose new process has not connected within
    ``reservation_timeout`` is declared hung."""
    limit = limits.reservation_timeout
    for n in nodes:
        if n.inplace.restarting_at is None or n.liveness.hung:
            continue
        if now - max(n.inplace.restarting_at, resumed_at) > limit:
            n.liveness.hung = (
                "was restarted in place, but its new TF process did not connect within "
                f"reservation_timeout={limit:g}s"
            )
            n.mark_failed(now)


def may_kill(n: NodeRecord, limits: Limits, ending: bool, lockstep: str | None = None) -> bool:
    """Whether ``n``, silent past ``heartbeat_timeout``, is killed by its supervisor to
    restart in place rather than declared hung: a worker that may restart in place
    (:func:`refusal`) whose supervisor's channel is open and whose supervisor said it
    restarts it (a worker fed by InputMode.SPARK is not: its feed cannot be replayed)."""
    return (
        n.liveness.supervised
        and n.inplace.restartable
        and refusal(n, limits, ending, lockstep) is None
    )


def kill(n: NodeRecord) -> Send:
    """Tell ``n``'s supervisor to kill its silent TF process: its exit then asks for the
    restart in place. The message names the process (its incarnation): a supervisor that has
    started a newer one since leaves that one alone."""
    message = messages.make("kill", why=n.liveness.silent or "", incarnation=n.inplace.incarnation)
    return Send((n.name,), messages.SUPERVISOR, message)


def check_killing(
    nodes: Iterable[NodeRecord], limits: Limits, now: float, resumed_at: float
) -> None:
    """A silent worker whose supervisor, told to kill its TF process, has not had it
    restarted in place within ``kill_wait`` is declared hung: the supervisor (its task, its
    executor) is stopped or frozen too."""
    limit = limits.kill_wait
    for n in nodes:
        live = n.liveness
        if live.killing_at is None or live.hung:
            continue
        if now - max(live.killing_at, resumed_at) > limit:
            live.hung = (
                f"{live.silent}: its process is stopped, frozen or starved, and its supervisor, "
                "told to kill it to restart it in place, did not have it restarted within "
                f"{limit:g}s (spark.sparktf.stopGrace + {KILL_WAIT_SECS:g}s): its supervisor, Spark task "
                "or executor is stopped or frozen too"
            )
            n.mark_failed(now)
