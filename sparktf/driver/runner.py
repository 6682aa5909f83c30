"""Carries out a job's attempts: the control server, the Spark job, the monitor thread.

The rules are in :class:`~sparktf.driver.state.JobState`; this module owns the one lock, applies
events to the state under it, and performs the resulting actions (sends, Spark calls, process
starts) outside it. Every exception on its threads becomes the job's failure: none may end a
thread silently and leave a caller waiting.

Restarts: when an attempt fails with restarts left, the monitor stops that attempt's nodes,
waits for its Spark job, builds the next attempt (a new control server and secret, its stage)
before taking it, and starts it only if nobody aborted the job in the meantime.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparktf.common import logfilter, messages, protocol
from sparktf.common.spec import LaunchSpec
from sparktf.common.topology import NodeRole
from sparktf.driver.control import ControlServer
from sparktf.driver.limits import Limits
from sparktf.driver.progress import Reporter
from sparktf.driver.records import Send
from sparktf.driver.state import JobState, Status
from sparktf.errors import (
    ClusterStateError,
    ClusterTimeoutError,
    NodeError,
    SparkJobError,
    SparkTFError,
)

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

StageFactory = Callable[[LaunchSpec], Callable[[], Any]]


@dataclass
class _Attempt:
    """What one launch of the cluster owns besides its state."""

    number: int
    job_id: str
    server: ControlServer
    launch: LaunchSpec
    stage: Callable[[], Any]
    state: JobState
    channels: dict  # (node, role) -> Channel
    thread: threading.Thread | None = None
    finalizer: Any = None
    #: When its Spark job's thread started (monotonic).
    started_at: float = 0.0
    #: Stage id -> whether it is a barrier stage, as Spark's status store showed it.
    barrier_stages: dict = dataclasses.field(default_factory=dict)


class _PrintTo:
    """The reporter's lines go through the runner's print lock (no torn lines with the
    nodes' output)."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    def write(self, text: str) -> None:
        with self._runner._print_lock:
            sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


class Runner:
    """Runs one job: attempt after attempt until it finishes, fails or is aborted."""

    def __init__(
        self,
        sc,
        roles: tuple[NodeRole, ...],
        job_id: str,
        limits: Limits,
        *,
        max_restarts: int,
        log_to_driver: bool,
        tail_lines: int,
        conf: dict[str, str],
        tf_startup_logs: bool = False,
        progress_interval: float | None = None,
    ) -> None:
        self.sc = sc
        self._conf = conf  # the context's settings, read once by run()
        self.roles = roles
        self.base_id = job_id
        self._launch: LaunchSpec | None = None  # set by start()
        self._limits = limits
        self._max_restarts = max_restarts
        self._log_to_driver = log_to_driver
        self._tf_startup_logs = tf_startup_logs
        self._progress_interval = progress_interval  # None: no progress shown
        self._reporter: Reporter | None = None
        self._tail_lines = tail_lines
        self._cond = threading.Condition()
        self._wake = threading.Event()  # set by every event that may change the outcome
        self._print_lock = threading.Lock()
        self._current: _Attempt | None = None
        self._monitor: threading.Thread | None = None
        self._stage_factory: StageFactory | None = None
        self._closed = False
        self._cancelled_jobs: set[int] = set()  # Spark job ids cancelled once (_cancel)
        #: The job's final failure (None while it runs, or when it finished).
        self.failure: SparkTFError | None = None
        #: Set once nothing may start any more: an abort, or the final outcome.
        self.aborted = False
        # Set by the finalizer that stops the nodes when the interpreter exits (or the runner
        # is collected) with the job still running: what then fails is that stop's own doing.
        self._exiting = threading.Event()
        #: The failures that made the cluster restart, oldest first.
        self.failures: list[SparkTFError] = []

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
    def server(self) -> ControlServer | None:
        """The current attempt's control server (where its nodes reach the driver)."""
        return self._current.server if self._current else None

    @property
    def attempt_launch(self) -> LaunchSpec | None:
        """The current attempt's launch spec (its secret, its driver address)."""
        return self._current.launch if self._current else None

    @property
    def status(self) -> Status:
        if self.failure is not None:
            return Status.FAILED
        if self._current is None:
            return Status.CREATED
        status = self._current.state.status
        return Status.LAUNCHING if status is Status.FAILED else status  # a restart is coming

    def start(self, launch: LaunchSpec, stage_factory: StageFactory) -> None:
        """Open attempt 0 and start it, and the monitor that follows (and restarts) it."""
        self._launch = launch
        self._stage_factory = stage_factory
        attempt = self._open(0)
        with self._cond:
            if self.aborted:
                self._close_attempt(attempt)
                raise self.failure or ClusterStateError("the cluster was aborted")
            self._take(attempt)
        from pyspark import InheritableThread

        # The monitor starts the restarts' jobs: like the first, they run with the caller's
        # Spark properties (its job group: a notebook's cancel reaches them too).
        self._monitor = InheritableThread(
            target=self._monitor_loop, daemon=True, name=f"{self.base_id}-monitor"
        )
        self._monitor.start()
        if self._progress_interval is not None:
            self._reporter = Reporter(
                self.progress, self._progress_interval, out=_PrintTo(self)
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
            self._wait_supervisors(attempt, self._launch.stop_grace + 10.0)
        with self._cond:
            self.aborted = True
            if self._closed:
                return
            self._closed = True
            attempt = self._current
        if self._reporter is not None:
            self._reporter.stop(summary=True)
        if attempt is not None:
            attempt.server.close()
            attempt.finalizer.detach()

    # ------------------------------------------------------------------- events (handler)
    def on_connect(self, number: int, node: str, role: str, chan, hello: dict) -> None:
        with self._cond:
            attempt = self._current
            current = attempt is not None and attempt.number == number
            if current:
                attempt.channels[(node, role)] = chan
            replies = attempt.state.apply(node, role, hello, time.monotonic()) if current else []
            self._wake.set()
            # aborted (a final failure sets it too), or this attempt failed: a restart is coming
            stop_it = self.aborted or (current and attempt.state.status is Status.FAILED)
        if not current or (stop_it and role in (messages.NODE, messages.TASK)):
            chan.close()  # an earlier attempt's, or one that must not run: it exits
            return
        if stop_it and role == messages.AGENT:
            self._send_quietly(chan, messages.make("abort"))
        self._perform(attempt, replies)

    def on_message(self, number: int, node: str, role: str, message: dict) -> None:
        if message.get("type") == "log":
            self._on_log(number, node, message)
            return
        with self._cond:
            attempt = self._current
            if attempt is None or attempt.number != number:
                return
            replies = attempt.state.apply(node, role, message, time.monotonic())
            if message.get("type") not in _QUIET:
                self._wake.set()
            if message.get("type") == "tensorboard":
                self._cond.notify_all()
        self._perform(attempt, replies)
        if message.get("type") == "tensorboard":
            self._announce_tensorboard(node, message)

    def on_disconnect(self, number: int, node: str, role: str) -> None:
        with self._cond:
            attempt = self._current
            if attempt is None or attempt.number != number:
                return
            attempt.channels.pop((node, role), None)
            attempt.state.apply(node, role, {"type": "closed"}, time.monotonic())
            self._wake.set()
            self._cond.notify_all()

    def _on_log(self, number: int, node: str, message: dict) -> None:
        with self._cond:
            attempt = self._current
            if attempt is None or attempt.number != number:
                return
            attempt.state.apply(node, messages.AGENT, message, time.monotonic())
        if self._log_to_driver and (
            self._tf_startup_logs or not logfilter.is_startup_chatter(message["line"])
        ):
            self.print(node, message["stream"], message["line"])

    def print(self, node: str, stream: str, line: str) -> None:
        out = sys.stdout if stream == "stdout" else sys.stderr
        with self._print_lock:
            try:
                out.write(f"[{node}] {line}\n")
                out.flush()
            except (OSError, ValueError):
                pass  # a closed console must not fail the job

    def _announce_tensorboard(self, node: str, msg: dict) -> None:
        if msg.get("url"):
            log.warning(
                "sparktf: TensorBoard for %s at %s (log dir %s on %s)",
                self.job_id,
                msg["url"],
                msg["log_dir"],
                node,
            )
            self.print("sparktf", "stdout", f"TensorBoard at {msg['url']}")
        else:
            self.print("sparktf", "stderr", msg.get("error") or "TensorBoard failed")

    # ------------------------------------------------------------------------- attempts
    def _open(self, number: int) -> _Attempt:
        """Build attempt ``number`` without starting it: a control server with a fresh secret
        (an earlier attempt's processes cannot reach it), its launch spec and its stage."""
        job_id = self.base_id if number == 0 else f"{self.base_id}-{number}"
        advertise = self._conf.get("spark.driver.host")
        secret = protocol.new_secret()
        server = ControlServer(
            self._conf.get("spark.driver.bindAddress", advertise),
            advertise,
            secret,
            _AttemptHandler(self, number),
        )
        try:
            launch = dataclasses.replace(
                self._launch,
                job_id=job_id,
                secret=secret,
                driver_address=server.address,
                attempt=number,
            )
            stage = self._stage_factory(launch)
        except BaseException:
            server.close()
            raise
        state = JobState(self.roles, self._limits, time.monotonic(), tail_lines=self._tail_lines)
        attempt = _Attempt(number, job_id, server, launch, stage, state, {})
        # Whatever happens to the cluster object, the nodes do not outlive the interpreter.
        attempt.finalizer = weakref.finalize(
            self, _abort_quietly, self.sc, job_id, server, self._exiting
        )
        return attempt

    def _take(self, attempt: _Attempt) -> None:
        """Make ``attempt`` current and start its Spark job (lock held, not aborted)."""
        from pyspark import InheritableThread

        self._current = attempt
        attempt.state.launched_at = attempt.started_at = time.monotonic()
        attempt.thread = InheritableThread(
            target=self._run_job, args=(attempt,), daemon=True, name=f"{attempt.job_id}-spark"
        )
        attempt.thread.start()
        self._cond.notify_all()

    def _run_job(self, attempt: _Attempt) -> None:
        error = None
        try:
            # The job runs in the caller's job group, if it has one (inherited with its
            # other properties), so that cancelling that group (a notebook's cancel of the
            # cell) cancels the cluster too; sparktf finds and cancels it by its own tag.
            self.sc.addJobTag(attempt.job_id)
            self.sc.setInterruptOnCancel(True)
            self.sc.setLocalProperty(
                "spark.job.description", f"sparktf TensorFlow cluster {attempt.job_id}"
            )
            if not self.aborted:
                attempt.stage()
        except BaseException as exc:
            error = spark_error_text(exc)
        with self._cond:
            attempt.state.job_ended(error, time.monotonic())
            self._wake.set()
            self._cond.notify_all()

    def _close_attempt(self, attempt: _Attempt) -> None:
        attempt.server.close()
        attempt.finalizer.detach()

    def _monitor_loop(self) -> None:
        try:
            next_poll = 0.0
            while True:
                self._wake.clear()  # an event after this is seen by this step or wakes the next
                with self._cond:
                    if self.failure is not None or self._closed:
                        return
                    attempt = self._current
                    state = attempt.state
                    actions = state.step(time.monotonic())
                    notes = state.take_notes()
                    outcome = state.outcome if state.status is Status.FAILED else None
                    finished = state.status is Status.FINISHED
                    reserving = state.reserving()
                    self._cond.notify_all()  # waiters see the step's changes at once
                for note in notes:
                    log.warning("sparktf: %s", note)
                self._perform(attempt, actions)
                if finished:
                    return
                if outcome is None:
                    if reserving and time.monotonic() >= next_poll:
                        next_poll = time.monotonic() + UPSTREAM_POLL
                        self._note_upstream(attempt)
                    self._wake.wait(TICK)
                    continue
                if isinstance(outcome, ClusterTimeoutError) and RESERVATION in str(outcome):
                    note = _unlaunched_note(self.sc, attempt.job_id, state)
                    if note:
                        outcome = ClusterTimeoutError(f"{outcome}. {note}")
                if _spark_stopped(self.sc):
                    outcome = ClusterStateError(
                        "the SparkContext was stopped while the cluster ran; every node was "
                        "stopped. Stop it only after shutdown()"
                    )
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

    def _note_upstream(self, attempt: _Attempt) -> None:
        """While no task of ``attempt``'s barrier stage has started, the stages of its Spark
        job that run before it (the data's own maps and shuffles, adaptive execution's, the
        deal-out) do not count against ``reservation_timeout``; nor does the time before
        Spark shows any job of it (PySpark pickling and planning), up to one more
        ``reservation_timeout``. Asked of Spark outside the lock."""
        seen = attempt.barrier_stages
        running = _stages_before_barrier(self.sc, attempt.job_id, seen)
        planning = (
            running is None
            and time.monotonic() - attempt.started_at < self._limits.reservation_timeout
        )
        if running or planning:
            with self._cond:
                attempt.state.upstream_busy(time.monotonic())

    def _may_restart(self, failure: SparkTFError) -> bool:
        return (
            isinstance(failure, (NodeError, SparkJobError))
            and not self.aborted
            and not getattr(failure, "cancelled", False)  # a user's cancel: no restart
            and not self._exiting.is_set()
            and self.attempt < self._max_restarts
            and self._launch.train_mode is not False
        )  # inference is not restarted

    def _restart(self, old: _Attempt, failure: SparkTFError) -> None:
        """Launch the whole cluster again; any error on the way is the job's failure."""
        message = (
            f"restarting every node, attempt {old.number + 1} of {self._max_restarts} "
            f"restarts, after: {str(failure).splitlines()[0]}"
        )
        log.warning("sparktf: %s: %s", self.base_id, message)
        self.print("sparktf", "stderr", message)
        self._wait_job(old, JOB_END_TIMEOUT, cancel=True)
        self._close_attempt(old)
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
        self._close_attempt(new)  # aborted while it was being built: it never starts

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
    def _perform(self, attempt: _Attempt, actions: list[Send]) -> None:
        for action in actions:
            for node in action.to:
                chan = attempt.channels.get((node, action.channel))
                if chan is not None:
                    self._send_quietly(chan, action.message)

    @staticmethod
    def _send_quietly(chan, message: dict) -> None:
        try:
            chan.send(message)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            # The peer is gone. What it sent last (a node's error report) may still wait in
            # our receive buffer: its reader reads that, then the end, which tells the state.
            pass
        except OSError:
            chan.close()  # frozen with a full buffer (the send timed out): cut it off

    def _stop_nodes(self, attempt: _Attempt) -> None:
        """Tell every supervisor of ``attempt`` to stop its tree, and cancel its Spark job."""
        agents = [
            chan for (node, role), chan in list(attempt.channels.items()) if role == messages.AGENT
        ]
        for chan in agents:
            self._send_quietly(chan, messages.make("abort"))
        self._cancel(attempt.job_id)

    def _cancel(self, job_id: str) -> None:
        """Cancel the running jobs tagged ``job_id``, each once. A job that has ended, was already
        cancelled, or is not yet submitted (the callers cancel again while they wait for it)
        is left alone: Spark would answer with a warning that it "failed to cancel" the
        group."""
        running = _running_jobs(self.sc, job_id)
        if running is not None:
            if not running - self._cancelled_jobs:  # (the tracker lags: still "running")
                return
            self._cancelled_jobs |= running
        try:
            self.sc.cancelJobsWithTag(job_id)
        except Exception as exc:
            log.info("sparktf: could not cancel %s: %s", job_id, exc)

    def _wait_supervisors(self, attempt: _Attempt, timeout: float) -> None:
        """Wait until every supervisor of ``attempt`` has ended (its channel closed): a
        cancelled Spark job ends before its tasks have stopped their processes."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while any(role == messages.AGENT for _, role in attempt.channels):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning(
                        "sparktf: supervisors of %s still running after %.0fs: %s",
                        attempt.job_id,
                        timeout,
                        sorted(attempt.channels),
                    )
                    return
                self._cond.wait(min(0.1, remaining))

    def _wait_job(self, attempt: _Attempt, timeout: float, cancel: bool) -> None:
        """Wait for ``attempt``'s Spark job to end; cancel it again while it runs (a job
        submitted just after a cancel would otherwise run on)."""
        thread = attempt.thread
        if thread is None:
            return
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            if cancel:
                self._cancel(attempt.job_id)
            thread.join(0.5)
        if thread.is_alive():
            log.warning(
                "sparktf: the Spark job of %s did not end within %.0fs", attempt.job_id, timeout
            )
            return
        if (
            not cancel
            and attempt.state.job_ended_at is not None
            and attempt.state.job_failure is None
        ):
            return  # it succeeded: every task of it has ended (no status calls: ~17 ms)
        # A cancelled job ends before its tasks do; the tasks stop their nodes as they end.
        while _active_tasks(self.sc, attempt.job_id) and time.monotonic() < deadline:
            time.sleep(0.1)


class _AttemptHandler:
    """The control server's handler for one attempt: events carry the attempt's number, and
    an exception in handling one (a bug) becomes the job's failure instead of a dropped
    connection."""

    def __init__(self, runner: Runner, number: int) -> None:
        self._runner = runner
        self._number = number

    def _guard(self, call, *args) -> None:
        try:
            call(self._number, *args)
        except Exception as exc:
            log.exception("sparktf: handling a control message failed")
            self._runner.abort(
                SparkTFError(f"sparktf's control handler failed: {type(exc).__name__}: {exc}")
            )

    def on_connect(self, node: str, role: str, chan, hello: dict) -> None:
        self._guard(self._runner.on_connect, node, role, chan, hello)

    def on_message(self, node: str, role: str, message: dict) -> None:
        self._guard(self._runner.on_message, node, role, message)

    def on_security_error(self, node: str, role: str, exc: SparkTFError) -> None:
        """A frame from ``node`` failed its MAC: the job fails with that error, and no restart
        starts after it (a forger would only be given another secret to attack)."""
        self._runner.abort(exc)

    def on_disconnect(self, node: str, role: str) -> None:
        self._guard(self._runner.on_disconnect, node, role)


#: Words of the reservation timeout's error (see JobState.failure).
RESERVATION = "did not start within reservation_timeout"


def _unlaunched_note(sc, tag: str, state: JobState) -> str | None:
    """Why no node started, where no Spark task of the attempt ever reached the driver (Spark
    never launched its barrier stage): the other jobs that held the task slots (None if a task
    did start, or Spark cannot be asked)."""
    from sparktf.driver import preflight

    if any(n.host is not None for n in state.nodes.values()):
        return None  # its tasks launched: they are slow or stuck, not unscheduled
    try:
        tracker = sc.statusTracker()
        ours = set(jobs_tagged(sc, tag))
        others = [j for j in tracker.getActiveJobsIds() if j not in ours]
        names = []
        for job in others[:3]:
            info = tracker.getJobInfo(job)
            stage = tracker.getStageInfo(info.stageIds[-1]) if info and info.stageIds else None
            name = stage.name if stage else ""
            if name.startswith("copy_local_properties at "):  # pyspark's InheritableThread
                name = "started from a thread: another sparktf cluster?"
            names.append(f"job {job}" + (f" ({name})" if name else ""))
        slots = preflight.current_slots(sc)
    except Exception:
        return None
    nodes = len(state.nodes)
    text = (
        f"No Spark task of the cluster ever started: Spark never launched its barrier "
        f"stage, which needs {nodes} free task slots at once (the executors have {slots})"
    )
    if others:
        text += (
            f", while {len(others)} other job(s) held slots: {', '.join(names)}; wait for "
            "them to end (a sparktf cluster's ends with its shutdown()), or ask for fewer "
            "nodes"
        )
    return text


def jobs_tagged(sc, tag: str) -> list[int]:
    """The ids of the jobs Spark's status tracker knows with job tag ``tag``."""
    return list(sc._jsc.sc().statusTracker().getJobIdsForTag(tag))


def _running_jobs(sc, tag: str) -> set[int] | None:
    """The jobs tagged ``tag`` that Spark's status tracker has not seen end (None: it
    cannot be asked)."""
    try:
        tracker = sc.statusTracker()
        running = set()
        for job in jobs_tagged(sc, tag):
            info = tracker.getJobInfo(job)
            if info is None or info.status not in ("SUCCEEDED", "FAILED"):
                running.add(job)
        return running
    except Exception:
        return None


def _active_tasks(sc, tag: str) -> int:
    """Tasks of the jobs tagged ``tag`` still running (0 once the SparkContext is gone)."""
    try:
        tracker = sc.statusTracker()
        active = 0
        for job in jobs_tagged(sc, tag):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                stage_info = tracker.getStageInfo(stage)
                active += stage_info.numActiveTasks if stage_info else 0
        return active
    except Exception:
        return 0


def _stages_before_barrier(sc, tag: str, barrier: dict[int, bool]) -> bool | None:
    """Whether a stage of the jobs tagged ``tag`` runs that is not a barrier stage (None if
    Spark shows no job of it yet). ``barrier`` caches, by stage id, whether it is one: the
    RDD graph Spark keeps for its UI marks barrier RDDs."""
    try:
        tracker = sc.statusTracker()
        jobs = jobs_tagged(sc, tag)
        if not jobs:
            return None
        active = set(tracker.getActiveStageIds())
        store = sc._jsc.sc().statusStore()
        for job in jobs:
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                if stage not in active:
                    continue
                if stage not in barrier:
                    barrier[stage] = _has_barrier_rdd(
                        store.operationGraphForStage(stage).rootCluster()
                    )
                if not barrier[stage]:
                    return True
        return False
    except Exception:
        return False


def _has_barrier_rdd(cluster) -> bool:
    nodes, clusters = cluster.childNodes(), cluster.childClusters()
    return any(nodes.apply(i).barrier() for i in range(nodes.size())) or any(
        _has_barrier_rdd(clusters.apply(i)) for i in range(clusters.size())
    )


def _spark_stopped(sc) -> bool:
    jsc = getattr(sc, "_jsc", None)
    if jsc is None:
        return True
    try:
        return bool(jsc.sc().isStopped())
    except Exception:
        return True


def _abort_quietly(sc, job_id: str, server: ControlServer, exiting: threading.Event) -> None:
    exiting.set()
    try:
        sc.cancelJobsWithTag(job_id)
    except Exception:
        pass
    server.close()


#: A line of a Spark job's failure that says it was cancelled: what precedes Spark's words.
_CANCELLED = re.compile(
    r"^[:\s]*(?:org\.apache\.spark\.SparkException:\s*)?"
    r"(?:\[SPARK_JOB_CANCELLED\]\s*)?(?=Job \d+ cancelled)"
)


def spark_error_text(exc: BaseException) -> str:
    """The few lines of a Spark job failure worth reading (the nodes' own reports, which name
    them, arrive over the control channel; this is for what only Spark knows)."""
    lines = [ln.strip().removeprefix(": ") for ln in str(exc).splitlines()]  # py4j's ": "
    keep = [
        ln
        for ln in lines
        if ln
        and not ln.startswith(("at ", "...", "File ", "^"))
        and ("Exception" in ln or "Error" in ln or "sparktf" in ln or "ExecutorLostFailure" in ln)
    ]
    cancelled = [_CANCELLED.sub("", ln) for ln in keep if _CANCELLED.match(ln)]
    if cancelled:  # Spark's own words, without its class name, error class and SQL state
        return re.sub(r"\s*SQLSTATE: \w+$", "", cancelled[0])
    text = "\n  ".join(keep[:6] or lines[:6] or [type(exc).__name__])
    if "BarrierJobUnsupportedRDDChainException" in str(exc):
        text += (
            "\n  The data's lineage (union, coalesce, zip...) cannot feed a barrier stage "
            "directly: call train() without rebalance=False so sparktf reshuffles it."
        )
    return text
