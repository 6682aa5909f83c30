"""What the driver keeps of each node of an attempt (its record), the messages it sends them,
and the progress data read from those records.

Pure: no sockets, no threads, no Spark (the rules that change records are in
:mod:`~sparktf.driver.job.state` and the modules it composes).

A :class:`NodeRecord` keeps only who and where the node is (``role``, ``state``, ``host``,
``address``, its output's ``tail``); the rest lives in one sub-record per rule that owns it,
named after that rule's module:

* ``n.liveness`` (:class:`Liveness`), owned by :mod:`~sparktf.driver.job.liveness`: whether
  its process runs and is heard (channels, heartbeats, CPU, lock-step collective) and what
  liveness concluded (``hung``, ``killing_at``/``silent``, ``idle_noted``). The message
  handlers of :mod:`~sparktf.driver.job.state` record what the channels say; the in-place
  rules declare it hung when a kill or restart does not complete, and forget the silence of
  a process they replace.
* ``n.feed`` (:class:`FeedRecord`), owned by the progress rules (:func:`progress_snapshot`,
  :func:`rows_per_second`; ``progress_timeout`` in liveness): step, rows, epoch, feed timing
  and metrics, written only by the heartbeat handler of :mod:`~sparktf.driver.job.state`.
* ``n.inplace`` (:class:`RestartRecord`), owned by :mod:`~sparktf.driver.job.inplace`: the
  restarts in place granted, the process the record follows (``incarnation``), a pending
  request, and whether its supervisor restarts it (its hello says so).
* ``n.outcome`` (:class:`Outcome`), owned by :mod:`~sparktf.driver.job.state` and read by
  :mod:`~sparktf.driver.job.failures`: result, error report, exit, and when it counted as
  failed (:meth:`NodeRecord.mark_failed`, which every rule that declares a failure calls);
  a restart in place forgets the failed process's error and exit.

A node's states::

    PENDING -> RUNNING -> DONE ----------> EXITED     (main_fn returned; waits for 'stop')
                  \\-----> SERVING -------/            (ps, or a worker in ctx.serve())
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparktf.common.settings import default
from sparktf.common.topology import NodeRole


class NodeState(str, enum.Enum):
    PENDING = "pending"  # its TF process has not said hello yet
    RUNNING = "running"  # its main_fn runs
    SERVING = "serving"  # it only serves its TF server until 'stop' (ps, ctx.serve())
    DONE = "done"  # main_fn returned; the process (and any TF server in it) waits for 'stop'
    EXITED = "exited"  # the supervisor reported the process's exit


@dataclass(frozen=True)
class Progress:
    """How far a node is: the step it reported (``ctx.report_progress``) and rows fed."""

    step: int | None = None
    rows: int | None = None


@dataclass(frozen=True)
class Send:
    """Send ``message`` on the ``channel`` ("node", "agent" or "task") of each node in ``to``."""

    to: tuple[str, ...]
    channel: str
    message: dict


def _tail(lines: int = default("tail_lines")) -> collections.deque:
    return collections.deque(maxlen=lines)


@dataclass
class Liveness:
    """Whether a node's process runs and is heard: its channels, its heartbeats, and what the
    liveness rules (:mod:`~sparktf.driver.job.liveness`) concluded of its silence."""

    connected: bool = False  # its TF process's channel opened
    closed: bool = False  # ... and has ended: everything it sent has been applied
    lost: bool = False  # its supervisor's channel ended without an exit report
    started_at: float | None = None  # its hello: main_fn (or the server) starts
    last_beat: float | None = None
    supervised: bool = False  # its supervisor's channel is open
    #: When its supervisor's channel last delivered a message (a line of output, its exit):
    #: an exit report comes behind every line before it, however many are still being read
    supervisor_heard_at: float | None = None
    hung: str | None = None  # why it was declared hung (silent, no progress, idle)
    #: Silent past heartbeat_timeout, it is being restarted in place: when its supervisor was
    #: told to kill its TF process, and what the driver had heard (no heartbeat for ...)
    killing_at: float | None = None
    silent: str | None = None
    #: What trains it in lock-step with its peers, if anything: "MultiWorkerMirroredStrategy"
    #: or "SyncReplicasOptimizer" (the node says so in its heartbeats)
    collective: str | None = None
    #: (when, its process's CPU seconds so far), from its heartbeats
    cpu: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1024))
    idle_noted: bool = False  # named in an idle-collective warning


@dataclass
class FeedRecord:
    """How far a node is, as its heartbeats say: its step, the rows its feed handed out, its
    feed's epoch and timing, its last metrics."""

    progress: Progress = Progress()
    progress_at: float | None = None  # when its progress last changed
    epoch: int | None = None  # the feed's epoch (0 first), InputMode.SPARK
    epoch_rows: int | None = None  # rows the feed handed out in the current epoch
    first_rows: tuple[int, float] | None = None  # the first rows it reported, and when
    feed_secs: float | None = None  # its feed's own time from first batch asked to last fed
    rows_at: float | None = None  # when its rows fed last grew
    metrics: dict = field(default_factory=dict)  # the last ctx.report metrics


@dataclass
class RestartRecord:
    """A worker's TF process started again in place (:mod:`~sparktf.driver.job.inplace`)."""

    restarts: int = 0  # its TF process was started again in place this many times
    incarnation: int = 0  # which of its TF processes the record follows (0: the first)
    #: Its supervisor's restart request, waiting for the old process's channel to end
    restart_wanted: dict | None = None
    restarting_at: float | None = None  # restarted in place; the new process has not said hello
    #: Its supervisor starts its failed TF process again in place when the driver says yes
    #: (a worker without a data feed, workerRestarts above 0): its hello says so
    restartable: bool = False


@dataclass
class Outcome:
    """How a node's run ended: its result, its error report, its process's exit, and when it
    counted as failed (:mod:`~sparktf.driver.job.state` and
    :mod:`~sparktf.driver.job.failures`)."""

    result: Any = None
    has_result: bool = False
    error: dict | None = None
    error_at: float | None = None
    exit: dict | None = None
    exit_at: float | None = None
    done_at: float | None = None  # its main_fn returned
    failed_at: float | None = None


@dataclass
class NodeRecord:
    """The driver's record of one node (not the node itself): who and where it is, and the
    sub-records each rule keeps (see the module docstring)."""

    role: NodeRole
    state: NodeState = NodeState.PENDING
    host: str | None = None
    address: str | None = None  # host:port its barrier task reserved (the rendezvous)
    tail: collections.deque = field(default_factory=_tail)  # its last lines of output
    liveness: Liveness = field(default_factory=Liveness)
    feed: FeedRecord = field(default_factory=FeedRecord)
    inplace: RestartRecord = field(default_factory=RestartRecord)
    outcome: Outcome = field(default_factory=Outcome)

    @property
    def name(self) -> str:
        return self.role.name

    @property
    def alive(self) -> bool:
        """Its process runs (has said hello, not exited, channel open)."""
        live = self.liveness
        return live.connected and not live.closed and self.outcome.exit is None

    def mark_failed(self, now: float) -> None:
        out = self.outcome
        out.failed_at = out.failed_at if out.failed_at is not None else now


def new_records(roles: Iterable[NodeRole], tail_lines: int) -> dict[str, NodeRecord]:
    """A fresh record per node, by name in rank order, keeping ``tail_lines`` of output."""
    return {r.name: NodeRecord(r, tail=_tail(tail_lines)) for r in roles}


#: The shortest time a rate is taken over: a few rows handed out in microseconds would read
#: as millions of rows a second. Between heartbeats (a second apart, their arrival jittered):
MIN_RATE_SECS = 1.0
#: Over the feed's own timing (the node's clock, first batch asked for to last handed out):
MIN_FEED_RATE_SECS = 0.05


def rows_per_second(n: NodeRecord) -> float | None:
    """Rows fed per second: as the node's feed timed it (from the first batch asked for to the
    last handed out; from :data:`MIN_FEED_RATE_SECS`), or between its first and last heartbeat
    with rows (from :data:`MIN_RATE_SECS`); None before."""
    fed = n.feed
    rows = fed.progress.rows
    if rows and fed.feed_secs and fed.feed_secs >= MIN_FEED_RATE_SECS:
        return rows / fed.feed_secs
    if rows and fed.first_rows is not None and fed.rows_at:
        secs = fed.rows_at - fed.first_rows[1]
        if secs >= MIN_RATE_SECS:
            return (rows - fed.first_rows[0]) / secs
    return None


def progress_snapshot(nodes: Iterable[NodeRecord], now: float) -> dict[str, dict]:
    """How far each node is, as plain data (``Cluster.progress()``)."""
    out = {}
    for n in nodes:
        fed, started = n.feed, n.liveness.started_at
        ended = n.outcome.done_at or n.outcome.exit_at or n.outcome.failed_at or now
        out[n.name] = {
            "state": n.state.value,
            "step": fed.progress.step,
            "rows": fed.progress.rows,
            "epoch": None if fed.epoch is None else fed.epoch + 1,
            "epoch_rows": fed.epoch_rows,
            "rows_per_s": rows_per_second(n),
            "metrics": dict(fed.metrics),
            "restarts": n.inplace.restarts,
            "seconds": None if started is None else ended - started,
        }
    return out
