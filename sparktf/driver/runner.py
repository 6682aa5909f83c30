"""Carries out a job's attempts: the control server, the Spark job, the monitor thread.

The rules are in :class:`~sparktf.driver.job.state.JobState`; this module owns the one lock,
applies events to the state under it, and performs the resulting actions (sends, Spark calls,
process starts) outside it. Every exception on its threads becomes the job's failure: none may
end a thread silently and leave a caller waiting.

Restarts: when an attempt fails with restarts left, the monitor stops that attempt's nodes,
waits for its Spark job, builds the next attempt (a new control server and secret, its stage)
before taking it, and starts it only if nobody aborted the job in the meantime.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sparktf.common import messages, protocol
from sparktf.common.settings import Settings
from sparktf.common.topology import NodeRole
from sparktf.driver import credentials, sparkjobs, sparkside
from sparktf.driver.attempt import Attempt, send_quietly
from sparktf.driver.builder import AttemptBuilder, StageFactory
from sparktf.driver.console import Console
from sparktf.driver.history import JobHistory
from sparktf.driver.job import failures
from sparktf.driver.job.limits import Limits
from sparktf.driver.job.records import Send
from sparktf.driver.job.state import JobState, Status
from sparktf.driver.launch import CallFeed, JobPlan
from sparktf.driver.progress import Reporter
from sparktf.errors import ClusterStateError, NodeError, ReservationTimeoutError, SparkTFError

log = logging.getLogger(__name__)

#: Seconds between the monitor's looks at the state when nothing happens (the rules that
#: depend on time: heartbeats, progress, grace periods). An event that can change the outcome
#: (a node's state, its exit, the Spark job's end) wakes it at once.
TICK = 0.1
#: How often (seconds) the monitor asks Spark whether the data's stages still run while an
#: attempt waits for its barrier stage.
UPSTREAM_POLL = 0.5
#: Messages that never decide anything by themselves: they do not wake the monitor.
_QUIET = frozenset({"log", "heartbeat"})
#: How long a teardown waits for a cancelled Spark job to end.
JOB_END_TIMEOUT = 60.0


class Runner:
    """Runs one job: attempt after attempt until it finishes, fails or is aborted."""

    def __init__(
        self,
        sc,
        roles: tuple[NodeRole, ...],
        job_id: str,
        settings: Settings,
        conf: dict[str, str],
    ) -> None:
        """``settings``: the job's, resolved and frozen (its limits, restarts, console and
        history come from them); ``conf``: the context's Spark settings, read once by run()."""
        self.sc = sc
        self._conf = conf  # the context's settings, read once by run()
        self.roles = roles
        self.base_id = job_id
        self._builder: AttemptBuilder | None = None  # set by start()
        self.settings = settings
        self._limits = Limits.of(settings)
        self._max_restarts = settings.max_restarts
        self.console = Console(settings.log_to_driver, settings.tf_startup_logs)
        # None: no progress shown
        self._progress_interval = settings.progress_interval if settings.progress else None
        self._reporter: Reporter | None = None
        self._tail_lines = settings.tail_lines
        #: What the driver keeps of the nodes' output: log files, metrics, their scalars.
        self.history = JobHistory(
            settings.node_log_dir,
            settings.log_dir,
            job_id,
            settings.tf_startup_logs,
            settings.node_log_max_bytes,
            settings.node_log_keep_jobs,
        )
        self._cond = threading.Condition()
        self._wake = threading.Event()  # set by every event that may change the outcome
        self._current: Attempt | None = None
        self._monitor: threading.Thread | None = None
        self._closed = False
        self._spark_jobs = sparkjobs.Canceller(sc)
        #: The job's final failure (None while it runs, or when it finished).
        self.failure: SparkTFError | None = None
        #: Set once nothing may start any more: an abort, or the final outcome.
        self.aborted = False
        # Set by the finalizer that stops the nodes when the interpreter exits (or the runner
        # is collected) with the job still running: what then fails is that stop's own doing.
        self._exiting = threading.Event()
        #: The failures that made the cluster restart, oldest first.
        self.failures: list[SparkTFError] = []
        #: A secure cluster's delegation tokens, relayed to the nodes as Spark renews them.
        self._tokens = credentials.TokenRelay(sc)

    # ----------------------------------------------------------------------------- public
    @property
    def state(self) -> JobState | None:
        return self._current.state if self._current else None

    @property
    def attempt(self) -> int:
        return self._current.number if self._current else 0

    @property
    def job_id(self) -> str:
        return self._current.job_id if self._current else self.base_id

    @property
    def status(self) -> Status:
        if self.failure is not None:
            return Status.FAILED
        if self._current is None:
            return Status.CREATED
        status = self._current.state.status
        return Status.LAUNCHING if status is Status.FAILED else status  # a restart is coming

    def start(self, plan: JobPlan, call: CallFeed, stage_factory: StageFactory) -> None:
        """Open attempt 0 and start it, and the monitor that follows (and restarts) it."""
        self._builder = AttemptBuilder(
            self.sc,
            self._conf,
            self.roles,
            self.base_id,
            self._limits,
            self._tail_lines,
            plan,
            call,
            stage_factory,
        )
        self._tokens.poll()  # (read now: every node hears them as it connects)
        attempt = self._open(0)
        with self._cond:
            if self.aborted:
                attempt.close()
                raise self.failure or ClusterStateError("the cluster was aborted")
            self._take(attempt)
        # The monitor starts the restarts' jobs: like the first, they run with the caller's
        # Spark properties (its job group: a notebook's cancel reaches them too).
        self._monitor = sparkside.thread(self.sc, self._monitor_loop, f"{self.base_id}-monitor")
        self._monitor.start()
        if self._progress_interval is not None:
            self._reporter = Reporter(
                self.progress, self._progress_interval, out=self.console
            ).start()

    def progress(self) -> dict[str, dict]:
        """How far each node of the current attempt is, as plain data."""
        with self._cond:
            attempt = self._current
            return attempt.state.progress_snapshot(time.monotonic()) if attempt else {}

    def wait(self, predicate: Callable[[JobState], bool], deadline: float | None) -> bool:
        """Wait until ``predicate(state)``, the job's failure, or ``deadline`` (False)."""
        with self._cond:
            while self.failure is None and not (self._current and predicate(self._current.state)):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(0.2 if remaining is None else min(0.2, remaining))
            return True

    def set_grace(self, seconds: float) -> None:
        with self._cond:
            if self._current is not None:
                self._current.state.grace = seconds

    def abort(self, failure: SparkTFError) -> None:
        """End the job with ``failure`` unless it already ended; no attempt starts after."""
        with self._cond:
            self.aborted = True
            finished = (
                self.failure is None
                and self._current is not None
                and self._current.state.status is Status.FINISHED
            )
            if not finished:
                self._set_failure(failure)
            attempt = self._current
        if attempt is not None and not finished:
            self._stop_nodes(attempt)

    def teardown(self, timeout: float = JOB_END_TIMEOUT) -> None:
        """Wait for the Spark job to end (cancelling it again while it runs, if the job was
        aborted), then close the control server. Idempotent; never raises."""
        with self._cond:
            attempt = self._current
        if attempt is not None:
            stopping = self.aborted or self.failure is not None
            self._wait_job(attempt, timeout, cancel=stopping)
            attempt.wait_supervisors(self._cond, attempt.launch.stop_grace + 10.0)
        with self._cond:
            self.aborted = True
            if self._closed:
                return
            self._closed = True
            attempt = self._current
        if self._reporter is not None:
            self._reporter.stop(summary=True)
        if attempt is not None:
            attempt.close()
        self.history.close()

    # ------------------------------------------------------------------- events (handler)
    def on_connect(
        self, number: int, node: str, peer: str, chan: protocol.Channel, hello: dict
    ) -> None:
        with self._cond:
            attempt = self._current
            if attempt is not None and attempt.number != number:
                attempt = None  # an earlier attempt's connection
            if (
                attempt is not None
                and peer == messages.NODE
                and attempt.state.stale(node, hello.get("incarnation", 0))
            ):
                attempt = None  # a TF process restarted in place since: it must not run
            if attempt is not None:
                attempt.channels[(node, peer)] = chan
            replies = attempt.state.apply(node, peer, hello, time.monotonic()) if attempt else []
            self._wake.set()
            # aborted (a final failure sets it too), or this attempt failed: a restart is coming
            stop_it = self.aborted or (
                attempt is not None and attempt.state.status is Status.FAILED
            )
        if attempt is None or (stop_it and peer in (messages.NODE, messages.TASK)):
            chan.close()  # an earlier attempt's, or one that must not run: it exits
            return
        if stop_it and peer == messages.SUPERVISOR:
            send_quietly(chan, messages.make("abort"))
        attempt.perform(replies)
        if peer == messages.NODE and self._tokens.tokens is not None:
            send_quietly(chan, _tokens_message(attempt, self._tokens.tokens))

    def on_message(self, number: int, node: str, peer: str, message: dict) -> None:
        if message.get("type") == "log":
            self._on_log(number, node, message)
            return
        with self._cond:
            attempt = self._current
            if attempt is None or attempt.number != number:
                return
            replies = attempt.state.apply(node, peer, message, time.monotonic())
            if message.get("type") not in _QUIET:
                self._wake.set()
            if message.get("type") == "tensorboard":
                self._cond.notify_all()
        attempt.perform(replies)
        if message.get("type") == "tensorboard":
            self.console.tensorboard(self.job_id, node, message)
        if message.get("reports"):
            self.history.record(number, node, message["reports"])

    def on_disconnect(self, number: int, node: str, peer: str, incarnation: int = 0) -> None:
        with self._cond:
            attempt = self._current
            if attempt is None or attempt.number != number:
                return
            if peer == messages.NODE and attempt.state.stale(node, incarnation):
                return  # a process turned away, or one restarted in place since: nothing
            if peer != messages.NODE or incarnation == attempt.state.incarnation(node):
                attempt.channels.pop((node, peer), None)
            replies = attempt.state.apply(
                node, peer, {"type": "closed", "incarnation": incarnation}, time.monotonic()
            )
            self._wake.set()
            self._cond.notify_all()
        attempt.perform(replies)  # a worker restarted in place: its supervisor hears so

    def _on_log(self, number: int, node: str, message: dict) -> None:
        self.history.write(number, node, message["line"])  # (an earlier attempt's too)
        with self._cond:
            attempt = self._current
            if attempt is None or attempt.number != number:
                return
            attempt.state.apply(node, messages.SUPERVISOR, message, time.monotonic())
        self.console.node_line(node, message["stream"], message["line"])

    # ------------------------------------------------------------------------- attempts
    def _open(self, number: int) -> Attempt:
        """Build attempt ``number`` without starting it (:class:`AttemptBuilder`)."""
        if self._builder is None:
            raise ClusterStateError("the cluster was not started: start() opens its attempts")
        return self._builder.build(number, self, self._exiting)

    def _take(self, attempt: Attempt) -> None:
        """Make ``attempt`` current and start its Spark job (lock held, not aborted)."""
        self._current = attempt
        attempt.state.launched_at = attempt.started_at = time.monotonic()
        attempt.thread = sparkside.thread(
            self.sc, lambda: self._run_job(attempt), f"{attempt.job_id}-spark"
        )
        attempt.thread.start()
        self._cond.notify_all()

    def _run_job(self, attempt: Attempt) -> None:
        error = sparkjobs.run_tagged(
            self.sc, attempt.job_id, attempt.stage, lambda: self.aborted, attempt.description
        )
        with self._cond:
            attempt.state.job_ended(error, time.monotonic())
            self._wake.set()
            self._cond.notify_all()

    def _monitor_loop(self) -> None:
        try:
            next_poll = 0.0
            while True:
                self._wake.clear()  # an event after this is seen by this step or wakes the next
                with self._cond:
                    attempt = self._current  # set before the monitor starts, never unset
                    if self.failure is not None or self._closed or attempt is None:
                        return
                    state = attempt.state
                    actions = state.step(time.monotonic())
                    notes = state.take_notes()
                    self.failures += state.take_restarted()  # absorbed by restarts in place
                    outcome = state.outcome if state.status is Status.FAILED else None
                    finished = state.status is Status.FINISHED
                    reserving = state.reserving()
                    self._cond.notify_all()  # waiters see the step's changes at once
                for note in notes:
                    log.warning("sparktf: %s", note)
                attempt.perform(actions)
                if finished:
                    return
                if outcome is None:
                    self._relay_tokens(attempt)
                    if reserving and time.monotonic() >= next_poll:
                        next_poll = time.monotonic() + UPSTREAM_POLL
                        self._note_upstream(attempt)
                    self._wake.wait(TICK)
                    continue
                outcome = shown_outcome(self.sc, outcome, attempt, self.history)
                with self._cond:
                    restart = self._may_restart(outcome)
                    if not restart:
                        self._set_failure(outcome)
                self._stop_nodes(attempt)
                if not restart:
                    return
                self._restart(attempt, outcome)
        except BaseException as exc:
            log.exception("sparktf: the monitor of %s failed", self.base_id)
            self.abort(SparkTFError(f"sparktf's monitor failed: {type(exc).__name__}: {exc}"))

    def _relay_tokens(self, attempt: Attempt) -> None:
        """New delegation tokens on the driver (Spark renewed them): to every node."""
        fresh = self._tokens.poll()
        if fresh is not None:
            names = tuple(role.name for role in self.roles)
            attempt.perform([Send(names, messages.NODE, _tokens_message(attempt, fresh))])

    def _note_upstream(self, attempt: Attempt) -> None:
        """While no task of ``attempt``'s barrier stage has started, the stages of its Spark
        job that run before it (the data's own maps and shuffles, adaptive execution's, the
        deal-out) do not count against ``reservation_timeout``; nor does the time before
        Spark shows any job of it (PySpark pickling and planning), up to one more
        ``reservation_timeout``. Asked of Spark outside the lock."""
        seen = attempt.barrier_stages
        running = sparkjobs.stages_before_barrier(self.sc, attempt.job_id, seen)
        planning = (
            running is None
            and time.monotonic() - attempt.started_at < self._limits.reservation_timeout
        )
        if running or planning:
            with self._cond:
                attempt.state.upstream_busy(time.monotonic())

    def _may_restart(self, failure: SparkTFError) -> bool:
        return (
            failures.restartable(failure)  # not a user's cancel, nor slots never had
            and not self.aborted
            and not self._exiting.is_set()
            and self.attempt < self._max_restarts
            and self._builder is not None
            and self._builder.call.train_mode is not False
        )  # inference is not restarted

    def _restart(self, old: Attempt, failure: SparkTFError) -> None:
        """Launch the whole cluster again; any error on the way is the job's failure."""
        message = (
            f"restarting every node, attempt {old.number + 1} of {self._max_restarts} "
            f"restarts, after: {str(failure).splitlines()[0]}"
        )
        # Shown once: on the console, and at INFO in the log (a WARNING would be printed a
        # second time by Python's last-resort handler where the user configured no logging).
        log.info("sparktf: %s: %s", self.base_id, message)
        self.console.print("sparktf", "stderr", message)
        self._wait_job(old, JOB_END_TIMEOUT, cancel=True)
        old.close()
        try:
            new = self._open(old.number + 1)
        except BaseException as exc:
            self.abort(
                SparkTFError(
                    f"the restart after {failure.__class__.__name__} failed: "
                    f"{type(exc).__name__}: {exc}"
                )
            )
            return
        with self._cond:
            if not self.aborted:
                self.failures.append(failure)
                self._take(new)
                return
        new.close()  # aborted while it was being built: it never starts

    def _set_failure(self, failure: SparkTFError) -> None:
        """Record the job's final failure (lock held); the first one stays."""
        if self.failure is None:
            self.failure = failure
            if not self._exiting.is_set():  # not the nodes' loss that the exit itself caused
                log.warning(
                    "sparktf: %s failed (%s); stopping every node",
                    self.base_id,
                    str(failure).splitlines()[0],
                )
        self.aborted = True
        if self._current is not None:
            self._current.state.fail(failure)
        self._wake.set()
        self._cond.notify_all()

    # --------------------------------------------------------------------------- actions
    def _stop_nodes(self, attempt: Attempt) -> None:
        """Tell every supervisor of ``attempt`` to stop its tree, and cancel its Spark job."""
        attempt.abort_supervisors()
        self._spark_jobs.cancel(attempt.job_id)

    def _wait_job(self, attempt: Attempt, timeout: float, cancel: bool) -> None:
        """Wait for ``attempt``'s Spark job to end (cancelling it again while it runs, if
        ``cancel``), and for its tasks unless it succeeded."""
        if attempt.thread is not None:
            state = attempt.state
            succeeded = state.job_ended_at is not None and state.job_failure is None
            self._spark_jobs.wait(
                attempt.thread,
                attempt.job_id,
                timeout,
                cancel,
                succeeded,
                lambda: self._out_of_reach(attempt),
            )

    def _out_of_reach(self, attempt: Attempt) -> int:
        """How many of ``attempt``'s nodes are out of reach now (:meth:`JobState.out_of_reach`)."""
        with self._cond:
            return len(attempt.state.out_of_reach(time.monotonic()))


def _tokens_message(attempt: Attempt, tokens: bytes) -> dict:
    """The ``tokens`` message: delegation tokens are bearer credentials, and the control
    channel's frames are authenticated, not encrypted; they go sealed under the attempt's
    secret (:func:`sparktf.common.protocol.seal_payload`)."""
    sealed = protocol.seal_payload(attempt.launch.secret, messages.TOKENS_PURPOSE, tokens)
    return messages.make("tokens", data=sealed)


def shown_outcome(
    sc: Any, outcome: SparkTFError, attempt: Attempt, history: JobHistory
) -> SparkTFError:
    """``outcome``, the failure that ends ``attempt``, with what Spark and the driver's files
    add to it (asks Spark: call it outside the runner's lock)."""
    if isinstance(outcome, ReservationTimeoutError):
        hosts = [n.host for n in attempt.state.nodes.values()]
        why = sparkjobs.unlaunched_note(sc, attempt.job_id, hosts)
        if why:
            outcome = ReservationTimeoutError(f"{outcome}. {why}", outcome.restartable)
    if isinstance(outcome, NodeError):
        outcome = history.shown(outcome, attempt.number)
    if sparkjobs.spark_stopped(sc):
        why, by_user = sparkjobs.why_stopped(sc)
        if isinstance(outcome, NodeError) and not by_user:  # (a user's stop makes its own)
            why += f". Before that: {outcome}"
        outcome = ClusterStateError(why)
    return outcome
