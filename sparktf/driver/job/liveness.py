"""When a live node counts as hung: silent past ``heartbeat_timeout``, without progress past
``progress_timeout``, or idle in a lock-step collective after a peer's ``main_fn`` returned.

Pure functions of the nodes' records, the limits and the time: no sockets, no threads, no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from sparktf.driver.job.limits import Limits
from sparktf.driver.job.records import NodeRecord, NodeState

#: A training node under MultiWorkerMirroredStrategy or SyncReplicasOptimizer that has used
#: under IDLE_CPU of a core for IDLE_SECS after another trainer's main_fn returned is named in
#: a warning: it may be waiting for that trainer's part of a step for ever
#: (see :func:`idle_collectives`).
IDLE_SECS = 30.0
IDLE_CPU = 0.05


def check_liveness(
    nodes: Iterable[NodeRecord],
    limits: Limits,
    now: float,
    resumed_at: float,
    kill_in_place: Callable[[NodeRecord], bool] = lambda n: False,
) -> list[NodeRecord]:
    """Declare hung the live nodes that went silent, or stopped making progress (silence
    counts from ``resumed_at`` at the earliest: the driver itself was paused until then).

    A silent node for which ``kill_in_place`` says yes (a worker that may restart in place,
    :func:`~sparktf.driver.job.inplace.may_kill`) is not declared hung: its ``killing_at`` and
    ``silent`` are set, and it is returned, for its supervisor to be told to kill its TF
    process; liveness leaves it alone from then on."""
    hb, pt = limits.heartbeat_timeout, limits.progress_timeout
    killing = []
    for n in nodes:
        live = n.liveness
        if not n.alive or live.hung or live.killing_at is not None:
            continue
        heard = max(live.last_beat if live.last_beat is not None else now, resumed_at)
        if hb and now - heard > hb:
            silent = f"sent no heartbeat for {now - heard:.1f}s (heartbeat_timeout={hb:g}s)"
            if kill_in_place(n):
                live.killing_at, live.silent = now, silent
                killing.append(n)
                continue
            live.hung = f"{silent} while {n.state.value}: its process is stopped, frozen or starved"
        elif pt and n.state is NodeState.RUNNING and n.role.job != "ps":
            started = n.feed.progress_at if n.feed.progress_at is not None else live.started_at
            since = max(started if started is not None else now, resumed_at)
            if now - since > pt:
                where = (
                    f"still at step {n.feed.progress.step}, {n.feed.progress.rows} rows fed"
                    if n.feed.progress_at is not None
                    else "no progress reported since its main_fn started"
                )
                live.hung = (
                    f"made no progress for {now - since:.1f}s (progress_timeout="
                    f"{pt:g}s; {where}): it is alive but hung"
                )
        if live.hung:
            n.mark_failed(now)
    return killing


def idle_collectives(trainers: Sequence[NodeRecord], limits: Limits, now: float) -> list[str]:
    """Name a trainer that trains in lock-step (MultiWorkerMirroredStrategy,
    SyncReplicasOptimizer) and has been idle (its process under IDLE_CPU of a core) for
    IDLE_SECS since another trainer's main_fn returned; fail it once it has been idle so for
    ``collective_idle_timeout``. Its all-reduce (or gradient aggregation) may wait for that
    trainer, which took fewer steps, for ever: every node's process stays up after its main_fn
    (peers may need its server), so TensorFlow sees no peer go. Idle is not proof at first (a
    chief may wait on storage): a warning, once a node, then the failure, which says what to
    change. Returns the warnings."""
    returned = [m.outcome.done_at for m in trainers if m.outcome.done_at is not None]
    if not returned:
        return []
    first = min(returned)
    limit = limits.collective_idle_timeout
    names = ", ".join(m.name for m in trainers if m.outcome.done_at is not None)
    notes = []
    for n in trainers:
        live = n.liveness
        if (
            not live.collective
            or n.outcome.done_at is not None
            or not n.alive
            or live.hung
            or n.state is not NodeState.RUNNING
            or not live.cpu
        ):
            continue
        if not live.idle_noted and _idle_for(live.cpu, now, IDLE_SECS, first):
            live.idle_noted = True
            notes.append(
                f"{n.name} has used under {IDLE_CPU:.0%} of a core for {IDLE_SECS:.0f}s "
                f"since the main_fn of {names} returned. {_uneven_steps(n)} If "
                f"{n.name} is waiting for something else (storage, say), ignore this; "
                f"it fails the job after collective_idle_timeout={limit or 0:g}s "
                "(spark.sparktf.collectiveIdleTimeout; 0: only this warning)"
            )
        elif limit and _idle_for(live.cpu, now, limit, first):
            live.hung = (
                f"idle (under {IDLE_CPU:.0%} of a core) for {limit:g}s "
                f"(collective_idle_timeout) since the main_fn of {names} returned. "
                f"{_uneven_steps(n)} Raise spark.sparktf.collectiveIdleTimeout (0: "
                "off) if it was waiting for something else"
            )
            n.mark_failed(now)
    return notes


def _idle_for(
    samples: Sequence[tuple[float, float]], now: float, seconds: float, since: float
) -> bool:
    """Whether CPU ``samples`` ((when, CPU seconds), oldest first) show under IDLE_CPU of a
    core over the last ``seconds``, all of it after ``since``."""
    start = next(((t, c) for t, c in reversed(samples) if t <= now - seconds), None)
    if start is None or start[0] < since:
        return False
    (t0, c0), (t1, c1) = start, samples[-1]
    return t1 - t0 >= seconds and (c1 - c0) / (t1 - t0) < IDLE_CPU


def _uneven_steps(n: NodeRecord) -> str:
    return (
        f"Under {n.liveness.collective} a node that waits for a peer's part of a step (an "
        "all-reduce, aggregated gradients) after that peer's main_fn has returned waits "
        "for ever: every chief and worker must run the same number of steps (the same "
        "epochs, steps_per_epoch and batches per epoch) and the same collective calls "
        "(saving a distributed Keras model is one: every node saves, not the chief alone; "
        "the others to a temporary directory)."
    )
