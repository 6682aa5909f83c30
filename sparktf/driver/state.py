"""The pure state of one attempt of a job: no sockets, no threads, no Spark.

Every liveness and failure rule lives here, as plain functions of the messages received and
the time, and is table-tested without a SparkContext (``tests/unit/test_job_state.py``):

* :meth:`JobState.apply` takes one control message (or a channel's opening or closing) and
  returns the messages to send in reply;
* :meth:`JobState.step` advances time-driven rules (liveness, training done, stop, finish) and
  returns the messages to send;
* :meth:`JobState.failure` says which failure, if any, ends the attempt now.

The runner (:mod:`sparktf.driver.runner`) owns the lock and carries out the actions.

A node's states::

    PENDING -> RUNNING -> DONE ----------> EXITED     (main_fn returned; waits for 'stop')
                  \\-----> SERVING -------/            (ps, or a worker in ctx.serve())

and the attempt's: LAUNCHING -> RUNNING -> STOPPING -> FINISHED, or FAILED from any of them.
"""

from __future__ import annotations

import collections
import enum
import heapq
import re
from dataclasses import dataclass, field
from typing import Any

from sparktf.common import messages, topology
from sparktf.common.procs import describe_exit
from sparktf.common.topology import NodeRole
from sparktf.driver import partition
from sparktf.errors import ClusterTimeoutError, NodeError, SparkJobError, SparkTFError

#: After a node reports an error, how long to wait for its exit (and last output lines) before
#: failing the job with what is known; the same wait lets the nodes' own reports of a failed
#: Spark job arrive before Spark's less precise text is used.
ERROR_SETTLE_SECS = 3.0
FLOW_EVERY = messages.FLOW_EVERY
#: A gap this long (seconds) between two steps of the monitor (which steps every 0.1 s) means
#: the driver was paused: what the nodes sent meanwhile is still unread.
PAUSED_SECS = 2.0


class Status(str, enum.Enum):
    """The job's state, as :attr:`sparktf.Cluster.status` reports it."""

    CREATED = "created"  # InputMode.SPARK: the nodes start with train() or inference()
    LAUNCHING = "launching"
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = "finished"
    FAILED = "failed"


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


#: A training node under MultiWorkerMirroredStrategy or SyncReplicasOptimizer that has used
#: under IDLE_CPU of a core for IDLE_SECS after another trainer's main_fn returned is named in
#: a warning: it may be waiting for that trainer's part of a step for ever
#: (see JobState._note_idle_collectives).
IDLE_SECS = 30.0
IDLE_CPU = 0.05


@dataclass(frozen=True)
class Limits:
    reservation_timeout: float = 120.0
    heartbeat_timeout: float | None = 30.0
    progress_timeout: float | None = None
    error_settle: float = ERROR_SETTLE_SECS
    #: A lock-step trainer idle this long after a peer's main_fn returned fails the job
    #: (None: it is only named, after IDLE_SECS).
    collective_idle_timeout: float | None = 300.0
    #: A gap this long between two steps means the driver itself was paused (None: not
    #: looked for; the runner, which steps every 0.1 s, sets PAUSED_SECS).
    paused_after: float | None = None


@dataclass(frozen=True)
class Send:
    """Send ``message`` on the ``channel`` ("node", "agent" or "task") of each node in ``to``."""

    to: tuple[str, ...]
    channel: str
    message: dict


@dataclass
class NodeRecord:
    """The driver's record of one node (not the node itself)."""

    role: NodeRole
    state: NodeState = NodeState.PENDING
    host: str | None = None
    result: Any = None
    has_result: bool = False
    error: dict | None = None
    error_at: float | None = None
    exit: dict | None = None
    exit_at: float | None = None
    connected: bool = False  # its TF process's channel opened
    closed: bool = False  # ... and has ended: everything it sent has been applied
    lost: bool = False  # its supervisor's channel ended without an exit report
    started_at: float | None = None  # its hello: main_fn (or the server) starts
    last_beat: float | None = None
    progress: Progress = Progress()
    progress_at: float | None = None
    epoch: int | None = None  # the feed's epoch (0 first), InputMode.SPARK
    metrics: dict = field(default_factory=dict)  # the last ctx.report metrics
    epoch_rows: int | None = None  # rows the feed handed out in the current epoch
    done_at: float | None = None  # its main_fn returned
    first_rows: tuple[int, float] | None = None  # the first rows it reported, and when
    feed_secs: float | None = None  # its feed's own time from first batch asked to last fed
    rows_at: float | None = None  # when its rows fed last grew
    hung: str | None = None
    failed_at: float | None = None
    address: str | None = None  # host:port its barrier task reserved (the rendezvous)
    #: What trains it in lock-step with its peers, if anything: "MultiWorkerMirroredStrategy"
    #: or "SyncReplicasOptimizer" (the node says so in its heartbeats)
    collective: str | None = None
    cpu: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1024))
    idle_noted: bool = False  # named in an idle-collective warning
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=40))

    @property
    def name(self) -> str:
        return self.role.name

    @property
    def alive(self) -> bool:
        """Its process runs (has said hello, not exited, channel open)."""
        return self.connected and not self.closed and self.exit is None

    def mark_failed(self, now: float) -> None:
        self.failed_at = self.failed_at if self.failed_at is not None else now


class JobState:
    """One attempt: its nodes, the feed bound, and the rules that end it."""

    def __init__(
        self, roles: tuple[NodeRole, ...], limits: Limits, now: float, *, tail_lines: int = 40
    ) -> None:
        self.roles = roles
        self.limits = limits
        self.launched_at = now
        self.nodes = {
            r.name: NodeRecord(r, tail=collections.deque(maxlen=tail_lines)) for r in roles
        }
        self.status = Status.LAUNCHING
        self.grace = 0.0
        self.training_done_at: float | None = None
        self.stop_sent = False
        self.job_ended_at: float | None = None
        self.job_error: str | None = None
        self.outcome: SparkTFError | None = None
        self.rows_held_back = 0
        self.rows_moved = 0  # rows moved between training nodes to equalize their shares
        self.tensorboard: dict | None = None
        self._feed_progress: dict[str, tuple[int, bool]] = {}
        # the last bound sent: (rows, final, whether some training node's share has ended)
        self._bound_sent: tuple[int, bool, bool] | None = None
        #: Per training node: the fewest rows another training node has reported, as sent.
        self._others_sent: dict[str, int] = {}
        #: When :meth:`step` last ran, and when it last found that the driver had not run
        #: for PAUSED_SECS: the liveness rules count silence from then at the earliest.
        self._stepped_at: float | None = None
        self.resumed_at = float("-inf")
        #: When each training node was last sent its bound (for :meth:`_say_rows_flow`).
        self._bound_at: dict[str, float] = {}
        self._exchange: dict[str, str] = {}  # training node -> where it takes moved rows
        self._feed_stopped: set[str] = set()  # shares ended early: terminate(), main_fn done
        self._moves: dict[str, dict] = {}  # node -> its part of the plan sent with the bound
        self.addresses_sent = False
        self._notes: list[str] = []

    # ---------------------------------------------------------------------------- queries
    @property
    def trainers(self) -> list[NodeRecord]:
        return [n for n in self.nodes.values() if n.role.trains]

    @property
    def registered(self) -> bool:
        """Every node's process has started (or already ended)."""
        return all(n.state is not NodeState.PENDING for n in self.nodes.values())

    @property
    def results(self) -> dict[str, Any]:
        return {name: n.result for name, n in self.nodes.items() if n.has_result}

    @property
    def over(self) -> bool:
        return self.status in (Status.FINISHED, Status.FAILED)

    # ----------------------------------------------------------------------------- events
    def apply(self, node: str, role: str, message: dict, now: float) -> list[Send]:
        """One event from a node's connection: ``message`` is a catalogue message, or
        ``{"type": "closed"}`` when that connection ends. Returns the replies to send."""
        n = self.nodes.get(node)
        if n is None:
            return []
        kind = message.get("type")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is None:
            return []
        return handler(n, role, message, now) or []

    def _on_hello(self, n: NodeRecord, role: str, msg: dict, now: float) -> list[Send]:
        n.host = msg.get("host") or n.host
        if role != messages.NODE:
            return []
        n.connected, n.started_at, n.last_beat = True, now, now
        if n.state is NodeState.PENDING:
            n.state = NodeState.RUNNING
        if self.registered and self.status is Status.LAUNCHING:
            self.status = Status.RUNNING
        out = []
        if self._bound_sent is not None and n.role.trains:
            # A bound broadcast before this node connected (a share that ended at once,
            # e.g. empty data) would otherwise never reach it: nothing changes it again.
            out.append(self._bound_message((n.name,)))
        if self.training_done_at is not None:
            out.append(Send((n.name,), messages.NODE, messages.make("training_done")))
        return out

    def _on_address(self, n: NodeRecord, role: str, msg: dict, now: float) -> list[Send]:
        """The rendezvous: once every task has sent its node's address, all of them, in rank
        order, to every task (instead of Spark's allGather, which polls once a second)."""
        if role != messages.TASK or self.addresses_sent or n.host is None:
            return []
        n.address = topology.format_address(n.host, int(msg["port"]))
        if any(m.address is None for m in self.nodes.values()):
            return []
        self.addresses_sent = True
        return [
            Send(
                tuple(self.nodes),
                messages.TASK,
                messages.make("addresses", addresses=[m.address for m in self.nodes.values()]),
            )
        ]

    def _on_log(self, n: NodeRecord, role: str, msg: dict, now: float) -> None:
        n.tail.append(msg["line"])

    def _on_heartbeat(self, n: NodeRecord, role: str, msg: dict, now: float) -> None:
        n.last_beat = now
        progress = Progress(msg.get("step"), msg.get("rows"))
        rows = msg.get("rows")
        if rows and (n.progress.rows or 0) != rows:
            if n.first_rows is None:
                n.first_rows = (rows, now)
            n.rows_at = now
        if progress != n.progress:
            n.progress, n.progress_at = progress, now
        if msg.get("metrics"):
            n.metrics = dict(msg["metrics"])
        if msg.get("epoch") is not None:
            n.epoch, n.epoch_rows = msg["epoch"], msg.get("epoch_rows")
        if msg.get("feed_secs"):
            n.feed_secs = msg["feed_secs"]
        if msg.get("cpu") is not None:
            n.cpu.append((now, msg["cpu"]))  # (when, the process's CPU seconds so far)
        if msg.get("collective"):
            n.collective = msg["collective"]  # what trains it in lock-step (a name)

    def progress_snapshot(self, now: float) -> dict[str, dict]:
        """How far each node is, as plain data (``Cluster.progress()``)."""
        out = {}
        for n in self.nodes.values():
            rows = n.progress.rows
            # Rows fed per second: as the node's feed timed it (from the first batch asked for
            # to the last handed out), or between its first and last heartbeat with rows.
            rate = None
            if rows and n.feed_secs:
                rate = rows / n.feed_secs
            elif rows and n.first_rows is not None and n.rows_at and n.rows_at > n.first_rows[1]:
                rate = (rows - n.first_rows[0]) / (n.rows_at - n.first_rows[1])
            out[n.name] = {
                "state": n.state.value,
                "step": n.progress.step,
                "rows": rows,
                "epoch": None if n.epoch is None else n.epoch + 1,
                "epoch_rows": n.epoch_rows,
                "rows_per_s": rate,
                "metrics": dict(n.metrics),
                "seconds": None
                if n.started_at is None
                else (n.done_at or n.exit_at or n.failed_at or now) - n.started_at,
            }
        return out

    def _on_state(self, n: NodeRecord, role: str, msg: dict, now: float) -> list[Send]:
        if msg.get("state") == "serving" and n.state is NodeState.RUNNING:
            n.state = NodeState.SERVING
            if self.stop_sent:
                return [Send((n.name,), messages.NODE, messages.make("stop"))]
        return []

    def _on_done(self, n: NodeRecord, role: str, msg: dict, now: float) -> list[Send]:
        try:
            n.result = messages.result_value(msg)
        except messages.ResultUnreadable as exc:
            if n.error is None:
                n.error, n.error_at = (
                    messages.make(
                        "error",
                        where="result",
                        exc_type="TypeError",
                        message=str(exc),
                        traceback="",
                    ),
                    now,
                )
            return []
        n.has_result, n.done_at = True, now
        out = []
        if n.state in (NodeState.RUNNING, NodeState.SERVING):
            n.state = NodeState.DONE
            if self.stop_sent:
                out.append(Send((n.name,), messages.NODE, messages.make("stop")))
        if n.name in self._feed_progress:  # a finished node's share has ended too
            self._feed_progress[n.name] = (self._feed_progress[n.name][0], True)
            self._feed_stopped.add(n.name)  # ... and can take no moved rows
            out += self._broadcast_bound()
        self._check_unread_feeds(now)
        return out

    def _on_error(self, n: NodeRecord, role: str, msg: dict, now: float) -> None:
        if n.error is None:
            n.error, n.error_at = msg, now
        elif _symptom(n.error) and not _symptom(msg):
            n.error = msg  # the cause, from the node's other side (its task, or the node)
        n.mark_failed(now)

    def _on_exit(self, n: NodeRecord, role: str, msg: dict, now: float) -> None:
        n.exit, n.exit_at, n.state = msg, now, NodeState.EXITED
        if msg["code"] != 0:
            n.mark_failed(now)

    def _on_closed(self, n: NodeRecord, role: str, msg: dict, now: float) -> None:
        if role == messages.NODE:
            n.closed = True
        elif role == messages.AGENT and n.exit is None:
            n.lost = True
            n.mark_failed(now)

    def _on_feed_progress(self, n: NodeRecord, role: str, msg: dict, now: float) -> list[Send]:
        flowed = msg["received"] > self._feed_progress.get(n.name, (0, False))[0]
        self._feed_progress[n.name] = (msg["received"], msg["ended"])
        if msg.get("exchange"):
            self._exchange[n.name] = msg["exchange"]
        if msg.get("stopped"):
            self._feed_stopped.add(n.name)
        self._check_unread_feeds(now)
        sends = self._broadcast_bound()
        if flowed and not (self._bound_sent and self._bound_sent[1]):
            sends += self._say_rows_flow(sends, now)
        for send in sends:
            for name in send.to:
                self._bound_at[name] = now
        return sends

    def _say_rows_flow(self, sends: list[Send], now: float) -> list[Send]:
        """Rows still flow to some node: every other training node that has heard nothing of
        the feeds for FLOW_EVERY seconds hears its bound again, unchanged, so that its
        ``feed_timeout`` (an idle timeout) does not run out while it waits for that share."""
        told = {name for send in sends for name in send.to}
        return [
            self._bound_message((m.name,))
            for m in self.trainers
            if m.name not in told
            and m.name in self._bound_at
            and now - self._bound_at[m.name] >= FLOW_EVERY
        ]

    def _check_unread_feeds(self, now: float) -> None:
        """Under equalization every training node's feed sets the bound: one whose main_fn
        returned without opening its feed would keep the others waiting for its rows until
        their feed_timeout. Fail it now, saying what to change."""
        waiting = [
            m.name for m in self.trainers if m.name in self._feed_progress and not m.has_result
        ]
        if not waiting:
            return
        for n in self.trainers:
            if n.has_result and n.name not in self._feed_progress and n.error is None:
                n.error, n.error_at = (
                    messages.make(
                        "error",
                        where="feed",
                        exc_type="FeedError",
                        traceback="",
                        message=f"main_fn returned without reading its data feed, while "
                        f"{', '.join(waiting)} {'waits' if len(waiting) == 1 else 'wait'} for its "
                        "rows: with equalize (the default "
                        "without parameter servers) every training node's share sets how many "
                        "rows each may take. Read the feed on every training node (ctx."
                        "get_data_feed() until should_stop()), or pass equalize=False to "
                        "cluster.train()",
                    ),
                    now,
                )
                n.mark_failed(now)

    def _on_feed_done(self, n: NodeRecord, role: str, msg: dict, now: float) -> None:
        self.rows_held_back += msg.get("held_back", 0)

    def _on_tensorboard(self, n: NodeRecord, role: str, msg: dict, now: float) -> None:
        self.tensorboard = msg

    def job_ended(self, error: str | None, now: float) -> None:
        """The Spark job holding the nodes ended (``error``: what Spark said, if it failed)."""
        self.job_ended_at, self.job_error = now, error

    # ------------------------------------------------------------------------- feed bound
    def _bound_message(self, to: tuple[str, ...]) -> Send:
        bound, final, peers_ended = self._bound_sent
        extra = {"ended": True} if peers_ended else {}
        if len(to) == 1 and self._moves.get(to[0]):
            extra.update(self._moves[to[0]])
        if len(to) == 1 and not final and to[0] in self._others_sent:
            extra["others"] = self._others_sent[to[0]]
        return Send(
            to, messages.NODE, messages.make("feed_bound", bound=bound, final=final, **extra)
        )

    def _broadcast_bound(self) -> list[Send]:
        """How many rows every training node may hand out (see :mod:`sparktf.node.feed`)."""
        if self._bound_sent is not None and self._bound_sent[1]:
            return []  # final: the epoch's length (and any plan to move rows) is settled
        trainers = [n.name for n in self.trainers]
        progress = [self._feed_progress.get(name, (0, False)) for name in trainers]
        ended = [rows for rows, done in progress if done]
        bound = (min(p[0] for p in progress), False, bool(ended))
        if self._exchange and not self._feed_stopped:
            # Shares fed as they are, each node able to take rows: final once every share has
            # ended. Unequal beyond what holding back would tolerate: move the surplus.
            if len(ended) == len(trainers) and all(t in self._exchange for t in trainers):
                if not partition.tolerable(ended):
                    return self._send_moves(trainers, *partition.moves(ended))
                bound = (min(ended), True, True)
        # Final as soon as every unfinished share already has as many rows as the smallest
        # finished one: it can only grow, so that smallest count is the epoch's length.
        elif ended and all(done or rows >= min(ended) for rows, done in progress):
            bound = (min(ended), True, True)
        # Each node also hears the fewest rows any other node has reported: with its own
        # count, fresh, that bounds it without waiting for its own reports to come back.
        # (the fewest of all, or for the node that has it, the next fewest: two smallest)
        others = {}
        if not bound[1] and len(trainers) > 1:
            (low, low_at), (second, _) = heapq.nsmallest(
                2, ((p[0], i) for i, p in enumerate(progress))
            )
            others = {name: second if i == low_at else low for i, name in enumerate(trainers)}
        # A node hears a change of its own others, of final or ended, and, where it has no
        # others (a single training node), of the bound: the bound's value alone moving (a
        # node's report coming back to it) changes nothing a node with others decides.
        prev = self._bound_sent
        to = [
            name
            for name in trainers
            if prev is None
            or bound[1:] != prev[1:]
            or others.get(name) != self._others_sent.get(name)
            or (name not in others and bound != prev)
        ]
        self._bound_sent, self._others_sent = bound, others
        return [self._bound_message((name,)) for name in to]

    def _send_moves(self, trainers: list[str], target: int, moves) -> list[Send]:
        """The final bound with each node's part of the plan: whom it gives its last rows to
        (and where that node takes them), or from whom it takes rows, in order."""
        for giver, taker, rows in moves:
            g, t = trainers[giver], trainers[taker]
            self._moves.setdefault(g, {"give": []})["give"].append([t, self._exchange[t], rows])
            self._moves.setdefault(t, {"take": []})["take"].append([g, rows])
        self._bound_sent = (target, True, True)
        self.rows_moved = sum(rows for _, _, rows in moves)
        return [self._bound_message((name,)) for name in trainers]

    # ------------------------------------------------------------------------------- time
    def step(self, now: float) -> list[Send]:
        """Apply the rules that depend on time; returns the messages to send."""
        if self.over:
            return []
        paused = self.limits.paused_after
        if paused and self._stepped_at is not None and now - self._stepped_at > paused:
            # The driver itself did not run (Ctrl-Z then fg, a VM pause, a long GIL hold):
            # the nodes' messages wait in its sockets. Silence is counted from now on.
            self.resumed_at = now
        self._stepped_at = now
        self._check_liveness(now)
        failure = self.failure(now)
        if failure is not None:
            self.fail(failure)
            return []
        self._note_idle_collectives(now)
        out: list[Send] = []
        if (
            self.training_done_at is None
            and self.registered
            and all(
                n.state in (NodeState.DONE, NodeState.SERVING)
                or (n.state is NodeState.EXITED and n.has_result)
                for n in self.trainers
            )
        ):
            self.training_done_at = now
            self.status = Status.STOPPING
            out.append(
                Send(self._names(lambda n: n.alive), messages.NODE, messages.make("training_done"))
            )
        if (
            self.training_done_at is not None
            and not self.stop_sent
            and now >= self.training_done_at + self.grace
        ):
            self.stop_sent = True
            # A parameter server whose server is not up yet is stopped too: it has nothing
            # to finish, and its process leaves without completing TensorFlow's import.
            out.append(
                Send(
                    self._names(
                        lambda n: (
                            n.state in (NodeState.SERVING, NodeState.DONE)
                            or (n.state is NodeState.RUNNING and n.role.job == "ps")
                        )
                    ),
                    messages.NODE,
                    messages.make("stop"),
                )
            )
        if self._finished(now):
            self.status = Status.FINISHED
        return [s for s in out if s.to]

    def _names(self, predicate) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes.values() if predicate(n))

    def _finished(self, now: float) -> bool:
        """Every node exited cleanly and every message it sent was applied (its result
        cannot race its process's exit), and the Spark job ended without error."""
        settle = self.limits.error_settle
        return (
            self.job_ended_at is not None
            and self.job_error is None
            and all(
                n.exit is not None
                and n.exit["code"] == 0
                and n.has_result
                and (n.closed or now - n.exit_at >= settle)
                for n in self.nodes.values()
            )
        )

    def reserving(self) -> bool:
        """Whether the attempt waits for its barrier stage: no task of it has reached the
        driver yet (they all start at once, and each says hello first)."""
        return self.status is Status.LAUNCHING and all(n.host is None for n in self.nodes.values())

    def upstream_busy(self, now: float) -> None:
        """The attempt's Spark job still computes what its barrier stage reads (the user's
        maps and shuffles, the deal-out): the reservation clock counts from ``now`` on, so
        that ``reservation_timeout`` counts only from the barrier stage's submission."""
        if self.reserving():
            self.launched_at = now

    def take_notes(self) -> list[str]:
        """Warnings for the user decided since the last call (the runner logs them)."""
        notes, self._notes = self._notes, []
        return notes

    def _note_idle_collectives(self, now: float) -> None:
        """Name a trainer that trains in lock-step (MultiWorkerMirroredStrategy,
        SyncReplicasOptimizer) and has been idle (its process under IDLE_CPU of a core) for
        IDLE_SECS since another trainer's main_fn returned; fail it once it has been idle so
        for ``collective_idle_timeout``. Its all-reduce (or gradient aggregation) may wait for
        that trainer, which took fewer steps, for ever: every node's process stays up after
        its main_fn (peers may need its server), so TensorFlow sees no peer go. Idle is not
        proof at first (a chief may wait on storage): a warning, once a node, then the
        failure, which says what to change."""
        returned = [m for m in self.trainers if m.done_at is not None]
        if not returned:
            return
        first = min(m.done_at for m in returned)
        limit = self.limits.collective_idle_timeout
        names = ", ".join(m.name for m in returned)
        for n in self.trainers:
            if (
                not n.collective
                or n.done_at is not None
                or not n.alive
                or n.hung
                or n.state is not NodeState.RUNNING
                or not n.cpu
            ):
                continue
            if not n.idle_noted and _idle_for(n.cpu, now, IDLE_SECS, first):
                n.idle_noted = True
                self._notes.append(
                    f"{n.name} has used under {IDLE_CPU:.0%} of a core for {IDLE_SECS:.0f}s "
                    f"since the main_fn of {names} returned. {_uneven_steps(n)} If "
                    f"{n.name} is waiting for something else (storage, say), ignore this; "
                    f"it fails the job after collective_idle_timeout={limit or 0:g}s "
                    "(spark.sparktf.collectiveIdleTimeout; 0: only this warning)"
                )
            elif limit and _idle_for(n.cpu, now, limit, first):
                n.hung = (
                    f"idle (under {IDLE_CPU:.0%} of a core) for {limit:g}s "
                    f"(collective_idle_timeout) since the main_fn of {names} returned. "
                    f"{_uneven_steps(n)} Raise spark.sparktf.collectiveIdleTimeout (0: "
                    "off) if it was waiting for something else"
                )
                n.mark_failed(now)

    def _check_liveness(self, now: float) -> None:
        """Declare hung the live nodes that went silent, or stopped making progress."""
        hb, pt = self.limits.heartbeat_timeout, self.limits.progress_timeout
        for n in self.nodes.values():
            if not n.alive or n.hung:
                continue
            heard = max(n.last_beat, self.resumed_at)
            if hb and now - heard > hb:
                n.hung = (
                    f"sent no heartbeat for {now - heard:.1f}s (heartbeat_timeout="
                    f"{hb:g}s) while {n.state.value}: its process is stopped, frozen or "
                    "starved"
                )
            elif pt and n.state is NodeState.RUNNING and n.role.job != "ps":
                since = max(
                    n.progress_at if n.progress_at is not None else n.started_at, self.resumed_at
                )
                if now - since > pt:
                    where = (
                        f"still at step {n.progress.step}, {n.progress.rows} rows fed"
                        if n.progress_at is not None
                        else "no progress reported since its main_fn started"
                    )
                    n.hung = (
                        f"made no progress for {now - since:.1f}s (progress_timeout="
                        f"{pt:g}s; {where}): it is alive but hung"
                    )
            if n.hung:
                n.mark_failed(now)

    # ---------------------------------------------------------------------------- failure
    def failure(self, now: float) -> SparkTFError | None:
        """The failure that ends this attempt now, if any (the first node to fail is blamed,
        the others are listed)."""
        if self.outcome is not None:
            return self.outcome
        failed = [n for n in self.nodes.values() if self._node_failed(n, now)]
        if failed:
            failed.sort(key=lambda n: n.failed_at if n.failed_at is not None else now)
            others = [n.name for n in failed[1:]] + [
                n.name for n in self.nodes.values() if n.lost and n not in failed
            ]
            return node_error(failed[0], others, self.job_error)
        # A job that ended before any of its barrier tasks started failed computing the
        # data (the user's maps, a shuffle): no node has a cause on its way.
        settled = self.job_ended_at is not None and (
            now - self.job_ended_at >= self.limits.error_settle or self.reserving()
        )
        if settled and self.job_error is not None:
            if re.match(r"Job \d+ cancelled", self.job_error):  # by someone else than sparktf
                return SparkJobError(
                    "the Spark job holding the TensorFlow nodes was cancelled (cancelJobGroup, "
                    "cancelJobsWithTag, cancelAllJobs or the Spark UI's kill); every node was "
                    "stopped:\n  " + self.job_error,
                    cancelled=True,
                )
            return SparkJobError(
                "the Spark job holding the TensorFlow nodes failed:\n  " + self.job_error
            )
        if settled and not self._finished(now):
            missing = self._names(lambda n: n.exit is None)
            if missing:
                return SparkJobError(
                    f"the Spark job ended but nodes {list(missing)} never "
                    "reported their exit; see the executor logs"
                )
        pending = self._names(lambda n: n.state is NodeState.PENDING)
        if (
            pending
            and now - max(self.launched_at, self.resumed_at) > self.limits.reservation_timeout
        ):
            return ClusterTimeoutError(
                f"nodes {list(pending)} did not start within reservation_timeout="
                f"{self.limits.reservation_timeout:g}s; check the executor logs, or raise "
                "spark.sparktf.reservationTimeout"
            )
        return None

    def _node_failed(self, n: NodeRecord, now: float) -> bool:
        if (
            n.lost
            and self.job_ended_at is None
            and n.failed_at is not None
            and now - n.failed_at < self.limits.error_settle
        ):
            return False  # its executor may be lost: Spark's job error says why, at once
        if n.lost or n.hung:
            return True
        if (
            n.error is not None
            and _symptom(n.error)
            and now - n.error_at < self.limits.error_settle
        ):
            return False  # a broken connection: its cause may still be on its way
        if n.exit is not None and n.exit["code"] != 0:
            # An exit with an error code (not a signal) usually follows the node's own error
            # report, which comes on the node's channel, not the supervisor's: wait for that
            # channel's end (or the settle time) so the report, not the bare code, is the reason.
            # Also before the channel has been read at all: a main_fn that fails at once
            # exits before the driver has read the connection that carries its hello and error.
            return (
                n.error is not None
                or n.exit["code"] < 0
                or n.closed
                or now - n.exit_at >= self.limits.error_settle
            )
        if n.error is not None:
            return n.exit is not None or now - n.error_at >= self.limits.error_settle
        if n.exit is not None and not n.has_result:
            # Exited cleanly: its last messages may still be in flight on its own channel.
            if n.closed or now - n.exit_at >= self.limits.error_settle:
                n.mark_failed(now)
                return True
        return False

    def fail(self, failure: SparkTFError) -> None:
        """End this attempt with ``failure`` (the first one stays)."""
        if self.outcome is None:
            self.outcome = failure
        self.status = Status.FAILED


def _idle_for(samples, now: float, seconds: float, since: float) -> bool:
    """Whether CPU ``samples`` ((when, CPU seconds), oldest first) show under IDLE_CPU of a
    core over the last ``seconds``, all of it after ``since``."""
    start = next(((t, c) for t, c in reversed(samples) if t <= now - seconds), None)
    if start is None or start[0] < since:
        return False
    (t0, c0), (t1, c1) = start, samples[-1]
    return t1 - t0 >= seconds and (c1 - c0) / (t1 - t0) < IDLE_CPU


def _uneven_steps(n: NodeRecord) -> str:
    return (
        f"Under {n.collective} a node that waits for a peer's part of a step (an "
        "all-reduce, aggregated gradients) after that peer's main_fn has returned waits "
        "for ever: every chief and worker must run the same number of steps (the same "
        "epochs, steps_per_epoch and batches per epoch)."
    )


def executor_lost_reason(job_error: str | None) -> str | None:
    """What Spark says of an executor lost under a task of the job (``ExecutorLostFailure
    (...) Reason: ...``: on YARN, say, "Container killed by YARN for exceeding physical memory
    limits ... Consider boosting spark.executor.memoryOverhead")."""
    if not job_error:
        return None
    found = re.search(r"ExecutorLostFailure \(([^)]*)\)\s*(?:Reason:\s*(.*))?", job_error)
    if not found:
        return None
    return (found.group(2) or found.group(1)).strip().rstrip(".") or None


#: Exceptions that only say the other end of a node's connection went away.
SYMPTOMS = ("BrokenPipeError", "ConnectionResetError", "ConnectionAbortedError")


def _symptom(error: dict) -> bool:
    """Whether an error report only says that the node's other side went away (its barrier
    task, or its TF process): the other side's own report, if it sends one, is the cause."""
    return error.get("exc_type") in SYMPTOMS or (
        error.get("exc_type") == "FeedError"
        and str(error.get("message", "")).startswith("the data feed from Spark broke")
    )


def node_error(n: NodeRecord, others: list[str], job_error: str | None = None) -> NodeError:
    """The typed error for a failed node, with its reason and the tail of its output (and,
    for a node lost with its executor, why Spark says the executor was lost)."""
    tail = list(n.exit["tail"]) if n.exit and n.exit.get("tail") else list(n.tail)
    if n.error is not None:
        where = {
            "result": "its return value",
            "feed": "its data feed",
            "log_dir": "copying its log_dir to HDFS",
            "task": "its Spark barrier task failed",
            "control": "its control channel refused a frame that failed its MAC",
            "exit": f"main_fn called sys.exit({n.error.get('code')})",
        }.get(n.error.get("where"), "main_fn raised")
        return NodeError(
            n.name,
            n.host,
            where,
            exc_type=n.error["exc_type"],
            exc_message=n.error["message"],
            traceback_text=n.error["traceback"],
            output_tail=tail,
            others=others,
        )
    if n.hung:
        reason = n.hung
    elif n.lost:
        reason = (
            "lost contact with the node: its executor, Spark task or supervisor died "
            "(see that executor's logs)"
        )
        lost = executor_lost_reason(job_error)
        if lost:
            reason = f"lost with its executor: {lost}"
            if "memory" in lost and "memoryOverhead" not in lost:
                reason += (
                    ". The TensorFlow process counts against the container's memory: "
                    "raise spark.executor.memoryOverhead"
                )
    elif n.exit["code"] != 0:
        reason = f"its TensorFlow process {describe_exit(n.exit['code'])}"
    elif not n.connected:
        reason = "its TensorFlow process exited before it connected to the driver"
    else:
        reason = (
            "its TensorFlow process exited without reporting main_fn's result (did "
            "main_fn call os._exit?)"
        )
    return NodeError(n.name, n.host, reason, output_tail=tail, others=others)
