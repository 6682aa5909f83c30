"""The pure state of one attempt of a job: its lifecycle, from the nodes' messages and the time
to the messages to send and the failure that ends it. No sockets, no threads, no Spark.

Every rule is a plain function of the messages received and the time, table-tested without a
SparkContext (``tests/unit/test_job_state.py``). :class:`JobState` composes the attempt's parts,
each in a module of its own: the nodes' records (:mod:`~sparktf.driver.job.records`), liveness
(:mod:`~sparktf.driver.job.liveness`), the feed's bound (:mod:`~sparktf.driver.job.feedbound`)
and the failures (:mod:`~sparktf.driver.job.failures`):

* :meth:`JobState.apply` takes one control message (or a channel's opening or closing) and
  returns the messages to send in reply;
* :meth:`JobState.step` advances time-driven rules (liveness, training done, stop, finish) and
  returns the messages to send;
* :meth:`JobState.failure` says which failure, if any, ends the attempt now.

The runner (:mod:`sparktf.driver.runner`) owns the lock and carries out the actions.

The attempt's states: LAUNCHING -> RUNNING -> STOPPING -> FINISHED, or FAILED from any of
them (a node's: :class:`~sparktf.driver.job.records.NodeState`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from sparktf.common import gpus, messages, topology
from sparktf.common.settings import default
from sparktf.common.topology import NodeRole
from sparktf.driver.job import failures, inplace, liveness
from sparktf.driver.job.failures import JobFailure
from sparktf.driver.job.feedbound import FeedBound
from sparktf.driver.job.limits import Limits
from sparktf.driver.job.records import (
    NodeRecord,
    NodeState,
    Progress,
    Send,
    new_records,
    progress_snapshot,
)
from sparktf.errors import SparkTFError

__all__ = ["JobState", "Limits", "NodeState", "Send", "Status"]

Handler = Callable[[NodeRecord, str, dict, float], "list[Send] | None"]


class Status(str, enum.Enum):
    """The job's state, as :attr:`sparktf.Cluster.status` reports it."""

    CREATED = "created"  # InputMode.SPARK: the nodes start with train() or inference()
    LAUNCHING = "launching"
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = "finished"
    FAILED = "failed"


#: How long a node and its supervisor must be silent to count as out of reach where
#: heartbeat_timeout is off (the driver's keepalive gives up on a silent peer about then).
OUT_OF_REACH_SECS = 30.0


class JobState:
    """One attempt: its nodes, the feed bound, and the rules that end it."""

    def __init__(
        self,
        roles: tuple[NodeRole, ...],
        limits: Limits,
        now: float,
        *,
        tail_lines: int = default("tail_lines"),
    ) -> None:
        self.roles = roles
        self.limits = limits
        self.launched_at = now
        self.nodes = new_records(roles, tail_lines)
        self.status = Status.LAUNCHING
        self.grace = 0.0
        self.training_done_at: float | None = None
        self.stop_sent = False
        self.job_ended_at: float | None = None
        #: What Spark said of the job holding the nodes, if it failed.
        self.job_failure: JobFailure | None = None
        self.outcome: SparkTFError | None = None
        self.rows_held_back = 0
        self.feed = FeedBound([r.name for r in roles if r.trains])
        self.tensorboard: dict | None = None
        #: When :meth:`step` last ran, and when it last found that the driver had not run
        #: for PAUSED_SECS: the liveness rules count silence from then at the earliest.
        self._stepped_at: float | None = None
        self.resumed_at = float("-inf")
        self.addresses_sent = False
        self._gpu_claims: dict[str, gpus.Claim] = {}
        self._notes: list[str] = []
        #: Failures that restarts in place absorbed, not yet taken by the runner
        self._restarted: list[SparkTFError] = []

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
        return {name: n.outcome.result for name, n in self.nodes.items() if n.outcome.has_result}

    @property
    def over(self) -> bool:
        return self.status in (Status.FINISHED, Status.FAILED)

    @property
    def rows_moved(self) -> int:
        """Rows moved between training nodes to equalize their shares."""
        return self.feed.rows_moved

    @property
    def job_error(self) -> str | None:
        """What Spark said of the job holding the nodes, if it failed."""
        return self.job_failure.text if self.job_failure is not None else None

    def progress_snapshot(self, now: float) -> dict[str, dict]:
        """How far each node is, as plain data (``Cluster.progress()``)."""
        return progress_snapshot(self.nodes.values(), now)

    def reserving(self) -> bool:
        """Whether the attempt waits for its barrier stage: no task of it has reached the
        driver yet (they all start at once, and each says hello first)."""
        return self.status is Status.LAUNCHING and all(n.host is None for n in self.nodes.values())

    def out_of_reach(self, now: float) -> list[str]:
        """Nodes whose host the driver no longer hears, without an exit report: a node that
        had started and since sent no heartbeat, while its supervisor sent nothing either, for
        ``heartbeat_timeout`` (or :data:`OUT_OF_REACH_SECS` where that is off), or whose
        supervisor's channel ended (the driver's keepalive): a partitioned or crashed host. Their Spark
        tasks end only when Spark declares their executors lost (minutes): a teardown does not
        wait for them (nor for their supervisors), and says so."""
        limit = self.limits.heartbeat_timeout or OUT_OF_REACH_SECS
        found = []
        for n in self.nodes.values():
            live = n.liveness
            if n.outcome.exit is not None:
                continue
            if live.lost:  # its supervisor's channel ended without an exit report (keepalive)
                found.append(n.name)
                continue
            if live.last_beat is None:  # never started: a slow start is no lost host
                continue
            heard = max(
                live.last_beat,
                live.supervisor_heard_at or live.last_beat,
                self.resumed_at,
            )
            if now - heard > limit:
                found.append(n.name)
        return found

    def take_notes(self) -> list[str]:
        """Warnings for the user decided since the last call (the runner logs them)."""
        notes, self._notes = self._notes, []
        return notes

    def take_restarted(self) -> list[SparkTFError]:
        """The failures of workers restarted in place since the last call, oldest first."""
        out, self._restarted = self._restarted, []
        return out

    def stale(self, node: str, incarnation: int) -> bool:
        """Whether a TF process of ``node`` is older than the restarts in place granted to it
        (:mod:`~sparktf.driver.job.inplace`): its hello is turned away (it must not run) and its
        channel's end changes nothing. The restarts granted, not the last hello, decide: a
        process that crashed before its hello was read is granted a restart at once, and its
        late hello must not pass for the new process's."""
        n = self.nodes.get(node)
        return n is not None and incarnation < n.inplace.restarts

    def incarnation(self, node: str) -> int:
        """Which TF process of ``node`` its record follows (0: the first)."""
        n = self.nodes.get(node)
        return n.inplace.incarnation if n is not None else 0

    # ----------------------------------------------------------------------------- events
    def apply(self, node: str, peer: str, message: dict, now: float) -> list[Send]:
        """One event from a node's connection: ``message`` is a catalogue message, or
        ``{"type": "closed"}`` when that connection ends. Returns the replies to send."""
        n = self.nodes.get(node)
        if n is None:
            return []
        if peer == messages.SUPERVISOR:
            n.liveness.supervisor_heard_at = now
        handler: Handler | None = getattr(self, f"_on_{message.get('type')}", None)
        if handler is None:
            return []
        return handler(n, peer, message, now) or []

    def _on_hello(self, n: NodeRecord, peer: str, msg: dict, now: float) -> list[Send]:
        live = n.liveness
        n.host = msg.get("host") or n.host
        if peer == messages.SUPERVISOR:
            live.supervised, n.inplace.restartable = True, bool(msg.get("restartable"))
        if peer != messages.NODE:
            return []
        live.connected, live.closed = True, False
        live.started_at = live.last_beat = now
        n.inplace.incarnation, n.inplace.restarting_at = msg.get("incarnation", 0), None
        if n.state is NodeState.PENDING:
            n.state = NodeState.RUNNING
        if self.registered and self.status is Status.LAUNCHING:
            self.status = Status.RUNNING
        out = self.feed.on_hello(n.name) if n.role.trains else []
        if self.training_done_at is not None:
            out.append(Send((n.name,), messages.NODE, messages.make("training_done")))
        return out

    def _on_address(self, n: NodeRecord, peer: str, msg: dict, now: float) -> list[Send]:
        """The rendezvous: once every task has sent its node's address, all of them, in rank
        order, to every task (instead of Spark's allGather, which polls once a second), with
        other GPUs for nodes that Spark gave a GPU another node of their host has
        (:func:`sparktf.common.gpus.deal`)."""
        if peer != messages.TASK or self.addresses_sent or n.host is None:
            return []
        n.address = topology.format_address(n.host, int(msg["port"]))
        if msg.get("gpus") is not None:
            self._gpu_claims[n.name] = (
                [tuple(g) for g in msg["gpus"]],
                [tuple(g) for g in msg.get("gpu_pool") or ()],
            )
        if any(m.address is None for m in self.nodes.values()):
            return []
        self.addresses_sent = True
        names = list(self.nodes)
        dealt = gpus.deal(
            [topology.split_address(self.nodes[m].address or "")[0] for m in names],
            [self._gpu_claims.get(m) for m in names],
            names,
        )
        self._notes += dealt.warnings
        extra = {"gpus": {names[r]: g for r, g in dealt.gpus.items()}} if dealt.gpus else {}
        addresses = [m.address for m in self.nodes.values()]
        return [
            Send(
                tuple(self.nodes),
                messages.TASK,
                messages.make("addresses", addresses=addresses, **extra),
            )
        ]

    def _on_log(self, n: NodeRecord, peer: str, msg: dict, now: float) -> None:
        n.tail.append(msg["line"])

    def _on_heartbeat(self, n: NodeRecord, peer: str, msg: dict, now: float) -> None:
        fed = n.feed
        n.liveness.last_beat = now
        progress = Progress(msg.get("step"), msg.get("rows"))
        rows = msg.get("rows")
        if rows and (fed.progress.rows or 0) != rows:
            if fed.first_rows is None:
                fed.first_rows = (rows, now)
            fed.rows_at = now
        if progress != fed.progress:
            fed.progress, fed.progress_at = progress, now
        if msg.get("metrics"):
            fed.metrics = dict(msg["metrics"])
        if msg.get("epoch") is not None:
            fed.epoch, fed.epoch_rows = msg["epoch"], msg.get("epoch_rows")
        if msg.get("feed_secs"):
            fed.feed_secs = msg["feed_secs"]
        if msg.get("cpu") is not None:
            n.liveness.cpu.append((now, msg["cpu"]))  # (when, the process's CPU seconds so far)
        if msg.get("collective"):
            n.liveness.collective = msg["collective"]  # what trains it in lock-step (a name)

    def _on_state(self, n: NodeRecord, peer: str, msg: dict, now: float) -> list[Send]:
        if msg.get("state") == "serving" and n.state is NodeState.RUNNING:
            n.state = NodeState.SERVING
            if self.stop_sent:
                return [Send((n.name,), messages.NODE, messages.make("stop"))]
        return []

    def _on_done(self, n: NodeRecord, peer: str, msg: dict, now: float) -> list[Send]:
        outcome = n.outcome
        try:
            outcome.result = messages.result_value(msg)
        except messages.ResultUnreadable as exc:
            if outcome.error is None:
                outcome.error, outcome.error_at = (
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
        outcome.has_result, outcome.done_at = True, now
        out = []
        if n.state in (NodeState.RUNNING, NodeState.SERVING):
            n.state = NodeState.DONE
            if self.stop_sent:
                out.append(Send((n.name,), messages.NODE, messages.make("stop")))
        out += self.feed.on_done(n.name)  # a finished node's share has ended too
        self._check_unread_feeds(now)
        return out

    def _on_error(self, n: NodeRecord, peer: str, msg: dict, now: float) -> None:
        out = n.outcome
        if out.error is None:
            out.error, out.error_at = msg, now
        elif failures.is_symptom(out.error) and not failures.is_symptom(msg):
            out.error = msg  # the cause, from the node's other side (its task, or the node)
        n.mark_failed(now)

    def _on_exit(self, n: NodeRecord, peer: str, msg: dict, now: float) -> None:
        n.outcome.exit, n.outcome.exit_at, n.state = msg, now, NodeState.EXITED
        if msg["code"] != 0:
            n.mark_failed(now)

    def _on_closed(self, n: NodeRecord, peer: str, msg: dict, now: float) -> list[Send]:
        live = n.liveness
        if peer == messages.NODE:
            incarnation = msg.get("incarnation", 0)
            if self.stale(n.name, incarnation) or incarnation != n.inplace.incarnation:
                return []  # an older process of a node restarted in place, or one turned away
            live.closed = True
            if n.inplace.restart_wanted is not None:
                return self._restart_in_place(n, now)
        elif peer == messages.SUPERVISOR:
            live.supervised = False
            if n.outcome.exit is None:
                live.lost = True
                n.mark_failed(now)
        return []

    def _on_restart(self, n: NodeRecord, peer: str, msg: dict, now: float) -> list[Send]:
        """A worker's supervisor asks to start its failed TF process again in place: yes
        (once the old process's channel has ended) or why not (:mod:`.inplace`)."""
        why = inplace.refusal(n, self.limits, self._ending, self._lockstep())
        if why is not None:
            return [inplace.resume(n, self.limits, why)]
        n.inplace.restart_wanted = msg
        if n.liveness.closed or not n.liveness.connected:
            return self._restart_in_place(n, now)
        return []

    @property
    def _ending(self) -> bool:
        """The attempt is stopping or has failed: no worker restarts in place any more."""
        return self.over or self.stop_sent or self.outcome is not None

    def _lockstep(self) -> str | None:
        """Which trainer reported that it trains in lock-step with its peers, and under what
        (its heartbeats' ``collective``), if one did: then no worker restarts in place."""
        for n in self.trainers:
            if n.liveness.collective:
                return f"{n.name} trains in lock-step under {n.liveness.collective}"
        return None

    def _may_restart(self, n: NodeRecord) -> bool:
        """Whether ``n``'s failed process would be restarted in place if its supervisor
        asked now (:func:`~sparktf.driver.job.inplace.may_kill`)."""
        return inplace.may_kill(n, self.limits, self._ending, self._lockstep())

    def _restart_in_place(self, n: NodeRecord, now: float) -> list[Send]:
        self._restarted.append(inplace.restart(n, now))
        return [inplace.resume(n, self.limits, None)]

    def _on_feed_progress(self, n: NodeRecord, peer: str, msg: dict, now: float) -> list[Send]:
        sends = self.feed.on_report(n.name, msg, now)
        self._check_unread_feeds(now)
        return sends

    def _check_unread_feeds(self, now: float) -> None:
        """Under equalization every training node's feed sets the bound: one whose main_fn
        returned without opening its feed would keep the others waiting for its rows until
        their feed_timeout. Fail it now, saying what to change."""
        waiting = [
            m.name for m in self.trainers if self.feed.reported(m.name) and not m.outcome.has_result
        ]
        if not waiting:
            return
        for n in self.trainers:
            if n.outcome.has_result and not self.feed.reported(n.name) and n.outcome.error is None:
                n.outcome.error, n.outcome.error_at = failures.unread_feed(waiting), now
                n.mark_failed(now)

    def _on_feed_done(self, n: NodeRecord, peer: str, msg: dict, now: float) -> None:
        self.rows_held_back += msg.get("held_back", 0)

    def _on_tensorboard(self, n: NodeRecord, peer: str, msg: dict, now: float) -> None:
        self.tensorboard = msg

    def job_ended(self, error: str | None, now: float) -> None:
        """The Spark job holding the nodes ended (``error``: what Spark said, if it failed)."""
        self.job_ended_at = now
        self.job_failure = JobFailure.read(error) if error is not None else None

    def upstream_busy(self, now: float) -> None:
        """The attempt's Spark job still computes what its barrier stage reads (the user's
        maps and shuffles, the deal-out): the reservation clock counts from ``now`` on, so
        that ``reservation_timeout`` counts only from the barrier stage's submission."""
        if self.reserving():
            self.launched_at = now

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
        killing = liveness.check_liveness(
            self.nodes.values(), self.limits, now, self.resumed_at, self._may_restart
        )
        inplace.check_killing(self.nodes.values(), self.limits, now, self.resumed_at)
        inplace.check_restarting(self.nodes.values(), self.limits, now, self.resumed_at)
        failure = self.failure(now)
        if failure is not None:
            self.fail(failure)
            return []
        self._notes += liveness.idle_collectives(self.trainers, self.limits, now)
        out: list[Send] = [inplace.kill(n) for n in killing]  # to restart them in place
        out += self._training_done(now)
        out += self._stop(now)
        if self._finished(now):
            self.status = Status.FINISHED
        return [s for s in out if s.to]

    def _training_done(self, now: float) -> list[Send]:
        """Once every chief and worker is done (or serving): training_done to every live node."""
        if (
            self.training_done_at is None
            and self.registered
            and all(
                n.state in (NodeState.DONE, NodeState.SERVING)
                or (n.state is NodeState.EXITED and n.outcome.has_result)
                for n in self.trainers
            )
        ):
            self.training_done_at = now
            self.status = Status.STOPPING
            return [
                Send(self._names(lambda n: n.alive), messages.NODE, messages.make("training_done"))
            ]
        return []

    def _stop(self, now: float) -> list[Send]:
        """``grace`` after training is done: stop to the nodes that serve or are done."""
        if (
            self.training_done_at is not None
            and not self.stop_sent
            and now >= self.training_done_at + self.grace
        ):
            self.stop_sent = True
            # A parameter server whose server is not up yet is stopped too: it has nothing
            # to finish, and its process leaves without completing TensorFlow's import.
            return [
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
            ]
        return []

    def _names(self, predicate: Callable[[NodeRecord], bool]) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes.values() if predicate(n))

    def _finished(self, now: float) -> bool:
        """Every node exited cleanly and every message it sent was applied (its result
        cannot race its process's exit), and the Spark job ended without error."""
        settle = self.limits.error_settle
        return (
            self.job_ended_at is not None
            and self.job_failure is None
            and all(
                n.outcome.exit is not None
                and n.outcome.exit["code"] == 0
                and n.outcome.has_result
                and (
                    n.liveness.closed
                    or (n.outcome.exit_at is not None and now - n.outcome.exit_at >= settle)
                )
                for n in self.nodes.values()
            )
        )

    # ---------------------------------------------------------------------------- failure
    def failure(self, now: float) -> SparkTFError | None:
        """The failure that ends this attempt now, if any (the first node to fail is blamed,
        the others are listed)."""
        if self.outcome is not None:
            return self.outcome
        if self.job_failure is not None and self.job_failure.cancelled:
            # The user's cancel ends every node (over Connect their channels just end): it
            # is the cause, and no node's failure is (nor a reason to restart)
            return failures.job_error(self.job_failure)
        running = self.job_ended_at is None
        failed = [
            n
            for n in self.nodes.values()
            if failures.node_failed(n, now, self.limits, running, self._may_restart(n))
        ]
        if failed:
            failed.sort(
                key=lambda n: n.outcome.failed_at if n.outcome.failed_at is not None else now
            )
            others = [n.name for n in failed[1:]] + [
                n.name for n in self.nodes.values() if n.liveness.lost and n not in failed
            ]
            note = failures.peers_heard(failed[0], self.nodes)
            return failures.node_error(failed[0], others, self.job_failure, note)
        # A job that ended before any of its barrier tasks started failed computing the
        # data (the user's maps, a shuffle): no node has a cause on its way.
        settled = self.job_ended_at is not None and (
            now - self.job_ended_at >= self.limits.error_settle or self.reserving()
        )
        if settled and self.job_failure is not None:
            return failures.job_error(self.job_failure)
        if settled and not self._finished(now):
            missing = self._names(
                lambda n: n.outcome.exit is None and not self._exit_on_its_way(n, now)
            )
            if missing:
                return failures.exits_unreported(missing)
        pending = self._names(lambda n: n.state is NodeState.PENDING)
        limit = self.limits.reservation_timeout
        if pending and now - max(self.launched_at, self.resumed_at) > limit:
            lost = {
                n.name: n.host
                for n in self.nodes.values()
                if n.name in pending
                and n.address is not None
                and n.host is not None
                and (
                    n.liveness.lost
                    or (n.liveness.supervisor_heard_at is None and not n.liveness.supervised)
                )
            }  # reached the rendezvous, then nothing heard of its supervisor (or its end)
            return failures.reservation_timeout(
                pending, limit, lost if self.addresses_sent else None
            )
        return None

    def _exit_on_its_way(self, n: NodeRecord, now: float) -> bool:
        """Whether ``n``'s exit report may still be on its way after the Spark job ended: its
        supervisor's channel is open and delivered a message within ``error_settle``. The
        report follows the node's output on that channel; under heavy output the driver may
        still be reading megabytes of lines (socket buffers hold them) long after the
        supervisor, its barrier task and the job have ended. A channel silent that long has
        nothing more on its way."""
        live = n.liveness
        heard = live.supervisor_heard_at
        return live.supervised and heard is not None and now - heard < self.limits.error_settle

    def fail(self, failure: SparkTFError) -> None:
        """End this attempt with ``failure`` (the first one stays)."""
        if self.outcome is None:
            self.outcome = failure
        self.status = Status.FAILED
