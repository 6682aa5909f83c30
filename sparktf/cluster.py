"""The driver side: ``sparktf.run`` and the :class:`Cluster` it returns.

The driver never imports tensorflow. It owns the control server, the Spark job that holds the
nodes (one barrier stage, run from a background thread under a job group of its own), and the
job's state machine::

    launching -> running -> stopping -> finished
         \\           \\         \\
          `-----------`---------`--> failed     (a node failed, a timeout, Spark failed)

A monitor thread reacts to the nodes' messages: when every chief/worker ``main_fn`` has
returned it tells the nodes that training is done and stops the parameter servers and serving
workers; when any node fails it aborts every node and cancels the Spark job.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import importlib.util
import logging
import re
import sys
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from sparktf import preflight, protocol, topology
from sparktf.control import ControlServer
from sparktf.errors import (ClusterStateError, ClusterTimeoutError, ConfigError, NodeError,
                            SparkJobError, SparkTFError)
from sparktf.executor import node_task
from sparktf.feed import FeedConfig
from sparktf.procs import describe_exit
from sparktf.spec import LaunchSpec
from sparktf.topology import NodeRole

log = logging.getLogger(__name__)

#: How long after a node reports an error the driver waits for its exit and last output lines.
ERROR_SETTLE_SECS = 3.0


class InputMode(enum.Enum):
    """Where the nodes' data comes from."""

    #: The nodes read their own data (files, HDFS, tf.data).
    TENSORFLOW = "tensorflow"
    #: Spark feeds RDD or DataFrame partitions to the chief and workers: ``cluster.train(data)``.
    SPARK = "spark"


class Status(str, enum.Enum):
    CREATED = "created"  # InputMode.SPARK: the nodes start with train() or inference()
    LAUNCHING = "launching"
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = "finished"
    FAILED = "failed"


@dataclass
class _Node:
    role: NodeRole
    host: str | None = None
    state: str = "pending"  # pending -> running -> (serving) -> done
    value: Any = None
    error: dict | None = None
    error_at: float | None = None
    exit: dict | None = None
    lost: bool = False
    failed_at: float | None = None  # when the driver first saw this node fail
    last_beat: float | None = None  # when its last heartbeat (or hello) arrived
    progress: tuple = (None, None)  # (step, rows fed) from its heartbeats
    progress_at: float | None = None  # when that last changed
    hung: str | None = None  # why the driver declared it hung
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=40))
    chans: dict = field(default_factory=dict)  # "node"/"agent" -> Channel


def _setting(sc, name: str, value: Any, default: Any, cast: Callable = float) -> Any:
    """Argument, else ``spark.sparktf.<name>`` from the Spark conf, else the default."""
    if value is not None:
        return value
    conf_value = sc.getConf().get(f"spark.sparktf.{name}", None)
    if conf_value is None:
        return default
    if cast is bool:
        return conf_value.strip().lower() in ("1", "true", "yes")
    return cast(conf_value)


class Cluster:
    """A running TensorFlow cluster on Spark; returned by :func:`sparktf.run`."""

    def __init__(self, sc, roles: tuple[NodeRole, ...], payload: bytes, *,
                 reservation_timeout: float, log_to_driver: bool, tail_lines: int,
                 stop_grace: float, env: dict[str, str] | None = None,
                 input_mode: InputMode = InputMode.TENSORFLOW, tensorboard: bool = False,
                 log_dir: str | None = None, max_restarts: int = 0,
                 heartbeat_timeout: float | None = 30.0,
                 progress_timeout: float | None = None) -> None:
        self.sc = sc
        self.roles = roles
        self.input_mode = input_mode
        self._base_id = f"sparktf-{uuid.uuid4().hex[:12]}"
        self.status = Status.CREATED
        #: The launch of the whole cluster this is (0 first; ``ctx.attempt`` on the nodes).
        self.attempt = 0
        self.max_restarts = max_restarts
        #: The failures that made the cluster restart, oldest first.
        self.failures: list[SparkTFError] = []
        self._restart_pending: SparkTFError | None = None
        self._stage_factory: Callable[[], Callable[[], Any]] | None = None
        self._tail_lines = tail_lines
        self._heartbeat_timeout = heartbeat_timeout
        self._progress_timeout = progress_timeout
        self._cond = threading.Condition()
        self._failure: SparkTFError | None = None
        self._grace = 0.0
        self._log_to_driver = log_to_driver
        self._print_lock = threading.Lock()
        self._reservation_timeout = reservation_timeout
        self._closed = False
        self._reset_attempt_state()
        self._open_attempt(LaunchSpec(
            job_id=self._base_id, roles=roles, driver_address=("", 0), secret=b"",
            payload=payload, tail_lines=tail_lines,
            stop_grace=stop_grace, env=tuple(sorted((env or {}).items())),
            tensorboard=tensorboard, log_dir=log_dir,
            heartbeat_interval=min(1.0, (heartbeat_timeout or 3.0) / 3)))

    def _reset_attempt_state(self) -> None:
        """What one launch of the cluster owns: node states, results, feed progress."""
        #: InputMode.SPARK: rows held back so that synchronous workers take equal steps.
        self.rows_held_back = 0
        self._feed_progress: dict[str, tuple[int, bool]] = {}
        self._bound_sent: tuple[int, bool] | None = None
        self.results: dict[str, Any] = {}
        self._nodes = {r.name: _Node(r, tail=collections.deque(maxlen=self._tail_lines))
                       for r in self.roles}
        self._training_done_at: float | None = None
        self._stop_sent = False
        self._job_done = False
        self._job_done_at = 0.0
        self._job_error: BaseException | None = None
        self._tensorboard: dict | None = None

    def _open_attempt(self, launch: LaunchSpec) -> None:
        """A control server with a fresh secret for this attempt, and its launch spec: the
        processes of an earlier attempt cannot reach the new one."""
        self.job_id = self._base_id if self.attempt == 0 else f"{self._base_id}-{self.attempt}"
        conf = self.sc.getConf()
        advertise = conf.get("spark.driver.host")
        secret = protocol.new_secret()
        self._server = ControlServer(conf.get("spark.driver.bindAddress", advertise), advertise,
                                     secret, _AttemptHandler(self, self.attempt))
        self._launch = dataclasses.replace(launch, job_id=self.job_id, secret=secret,
                                           driver_address=self._server.address,
                                           attempt=self.attempt)
        # Whatever happens to this object, the nodes do not outlive the driver's interpreter.
        self._finalizer = weakref.finalize(self, _abort_quietly, self.sc, self.job_id,
                                           self._server)

    # ----------------------------------------------------------------- control server callbacks
    def on_connect(self, node: str, role: str, chan: protocol.Channel, hello: dict) -> None:
        with self._cond:
            n = self._nodes.get(node)
            if n is None:
                chan.close()
                return
            if role == "task":
                return  # a barrier task reporting an error: it only sends that
            n.chans[role] = chan
            n.host = hello.get("host")
            if role == "node":
                n.last_beat = time.monotonic()
            if role == "node" and n.state == "pending":
                n.state = "running"
            bound = self._bound_sent
            if bound is not None and role == "node" and n.role.trains:
                # A bound broadcast before this node connected (a share that ended at once,
                # e.g. empty data) would otherwise never reach it: nothing changes it again.
                self._send(n, "node", {"type": "feed_bound", "bound": bound[0],
                                       "final": bound[1]})
            self._cond.notify_all()
        if self._stop_sent and role == "node":
            self._send(n, "node", {"type": "stop"})

    def on_message(self, node: str, role: str, msg: dict) -> None:
        kind = msg.get("type")
        n = self._nodes[node]
        if kind == "log":
            n.tail.append(msg["line"])
            if self._log_to_driver:
                self._print(node, msg["stream"], msg["line"])
            return
        if kind == "heartbeat":
            now = time.monotonic()
            progress = (msg.get("step"), msg.get("rows"))
            with self._cond:
                n.last_beat = now
                if progress != n.progress:
                    n.progress, n.progress_at = progress, now
            return
        with self._cond:
            if kind == "feed_progress":
                self._feed_progress[node] = (msg["received"], msg["ended"])
                self._broadcast_bound()
            elif kind == "tensorboard":
                self._tensorboard = msg
                if msg.get("url"):
                    log.warning("sparktf: TensorBoard for %s at %s (log dir %s on %s)",
                                self.job_id, msg["url"], msg["log_dir"], node)
                    self._print("sparktf", "stdout", f"TensorBoard at {msg['url']}")
                else:
                    self._print("sparktf", "stderr", msg.get("error", "TensorBoard failed"))
            elif kind == "feed_done":
                self.rows_held_back += msg.get("held_back", 0)
            elif kind == "state" and msg.get("state") == "serving":
                n.state = "serving"
            elif kind == "done":
                n.state, n.value = "done", msg.get("value")
                self.results[node] = n.value
                if node in self._feed_progress:  # a finished node's share has ended too
                    self._feed_progress[node] = (self._feed_progress[node][0], True)
                    self._broadcast_bound()
            elif kind == "error":
                n.error, n.error_at = msg, time.monotonic()
                n.failed_at = n.failed_at or n.error_at
            elif kind == "exit":
                n.exit = msg
                if msg["code"] != 0:
                    n.failed_at = n.failed_at or time.monotonic()
            self._cond.notify_all()

    def on_disconnect(self, node: str, role: str) -> None:
        with self._cond:
            n = self._nodes[node]
            if role == "task":
                return
            n.chans.pop(role, None)
            if role == "agent" and n.exit is None:
                n.lost = True
                n.failed_at = n.failed_at or time.monotonic()
            self._cond.notify_all()

    def _broadcast_bound(self) -> None:
        """Tell the training nodes how many rows every one of them has (lock held)."""
        trainers = [r.name for r in self.roles if r.trains]
        progress = [self._feed_progress.get(name, (0, False)) for name in trainers]
        ended = [rows for rows, done in progress if done]
        bound = (min(p[0] for p in progress), False)
        # Final as soon as every unfinished share already has as many rows as the smallest
        # finished one: it can only grow, so that smallest count is the epoch's length.
        if ended and all(done or rows >= min(ended) for rows, done in progress):
            bound = (min(ended), True)
        if bound != self._bound_sent:
            self._bound_sent = bound
            for name in trainers:
                self._send(self._nodes[name], "node",
                           {"type": "feed_bound", "bound": bound[0], "final": bound[1]})

    def _print(self, node: str, stream: str, line: str) -> None:
        out = sys.stdout if stream == "stdout" else sys.stderr
        with self._print_lock:
            out.write(f"[{node}] {line}\n")
            out.flush()

    def _send(self, n: _Node, role: str, msg: dict) -> None:
        chan = n.chans.get(role)
        if chan is not None:
            try:
                chan.send(msg)
            except OSError:
                pass

    # ------------------------------------------------------------------------------ lifecycle
    def _start(self, stage: Callable[[], Any] | None = None) -> None:
        """Run the barrier stage (default: one empty partition per node) in the background,
        and the monitor that follows the nodes (and restarts them, if allowed)."""
        self._start_job(stage)
        self._monitor = threading.Thread(target=self._monitor_loop, name=f"{self.job_id}-monitor",
                                         daemon=True)
        self._monitor.start()

    def _start_job(self, stage: Callable[[], Any] | None) -> None:
        from pyspark import InheritableThread

        self._stage = stage or self._empty_stage
        self.status = Status.LAUNCHING
        self._job_thread = InheritableThread(target=self._run_spark_job, args=(self.attempt,),
                                             name=f"{self.job_id}-spark", daemon=True)
        self._job_thread.start()

    def _empty_stage(self, task: Callable[[Iterator], Iterator] | None = None) -> None:
        """A barrier stage of one empty partition per node."""
        n = len(self.roles)
        task = task or node_task(self._launch)
        self.sc.parallelize(range(n), n).barrier().mapPartitions(task).collect()

    def _run_spark_job(self, attempt: int) -> None:
        error = None
        try:
            self.sc.setJobGroup(self.job_id, f"sparktf TensorFlow cluster {self.job_id}",
                                interruptOnCancel=True)
            self._stage()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            error = exc
        finally:
            with self._cond:
                if attempt == self.attempt:  # not a late end of an attempt given up on
                    self._job_error = error
                    self._job_done, self._job_done_at = True, time.monotonic()
                self._cond.notify_all()

    def _monitor_loop(self) -> None:
        with self._cond:
            while self.status not in (Status.FINISHED, Status.FAILED):
                if self._restart_pending is not None:
                    self._restart()
                    continue
                self._step()
                self._cond.wait(0.1)

    def _restart(self) -> None:
        """Launch the whole cluster again after a failure (lock held; released while the
        failed attempt's Spark job ends)."""
        failure, self._restart_pending = self._restart_pending, None
        old_thread, old_server, old_finalizer = self._job_thread, self._server, self._finalizer
        self._cond.release()
        try:
            old_thread.join(60)
            old_server.close()
            old_finalizer.detach()
        finally:
            self._cond.acquire()
        self.failures.append(failure)
        self.attempt += 1
        self._reset_attempt_state()
        self._open_attempt(self._launch)
        message = (f"restarting every node, attempt {self.attempt} of {self.max_restarts} "
                   f"restarts, after: {str(failure).splitlines()[0]}")
        log.warning("sparktf: %s: %s", self.job_id, message)
        self._print("sparktf", "stderr", message)
        stage = self._stage_factory() if self._stage_factory is not None else None
        self._start_job(stage)

    def _step(self) -> None:
        """Advance the state machine; called with the lock held."""
        if self._failure is None:
            failure = self._find_failure()
            if failure is not None:
                self._fail(failure, restartable=True)
                return
        trainers = [n for n in self._nodes.values() if n.role.trains]
        if self._training_done_at is None and all(n.state in ("done", "serving") for n in trainers):
            self._training_done_at = time.monotonic()
            self.status = Status.STOPPING
            for n in self._nodes.values():
                self._send(n, "node", {"type": "training_done"})
        if (self._training_done_at is not None and not self._stop_sent
                and time.monotonic() >= self._training_done_at + self._grace):
            self._stop_sent = True
            for n in self._nodes.values():
                if n.state != "done":
                    self._send(n, "node", {"type": "stop"})
        if self._job_done and all(n.exit is not None for n in self._nodes.values()) \
                and self._failure is None:
            self.status = Status.FINISHED
            self._cond.notify_all()

    def _check_liveness(self, now: float) -> None:
        """Declare hung the running nodes that went silent, or stopped making progress."""
        for n in self._nodes.values():
            if n.state != "running" or "node" not in n.chans or n.hung or n.exit is not None:
                continue  # done, serving (ps), not yet started, or already ended
            if (self._heartbeat_timeout and n.last_beat is not None
                    and now - n.last_beat > self._heartbeat_timeout):
                n.hung = (f"sent no heartbeat for {now - n.last_beat:.1f}s (heartbeat_timeout="
                          f"{self._heartbeat_timeout:g}s): its process is stopped, frozen or "
                          "starved")
            elif (self._progress_timeout and n.progress_at is not None
                  and n.progress != (None, None) and n.progress != (None, 0)
                  and now - n.progress_at > self._progress_timeout):
                step, rows = n.progress
                n.hung = (f"made no progress for {now - n.progress_at:.1f}s (progress_timeout="
                          f"{self._progress_timeout:g}s; still at step {step}, {rows} rows fed): "
                          "it is alive but hung")
            if n.hung:
                n.failed_at = n.failed_at or now

    def _spark_stopped(self) -> bool:
        jsc = getattr(self.sc, "_jsc", None)
        if jsc is None:
            return True
        try:
            return bool(jsc.sc().isStopped())
        except Exception:  # noqa: BLE001 - the gateway is going away with it
            return True

    def _find_failure(self) -> SparkTFError | None:
        failure = self._find_node_or_job_failure()
        if failure is not None and self._spark_stopped():
            return ClusterStateError("the SparkContext was stopped while the cluster ran; every "
                                     "node was stopped. Stop it only after shutdown()")
        return failure

    def _find_node_or_job_failure(self) -> SparkTFError | None:
        now = time.monotonic()
        self._check_liveness(now)
        failed = []
        for n in self._nodes.values():
            exited_badly = n.exit is not None and n.exit["code"] != 0
            settled_error = n.error is not None and (n.exit is not None or n.lost or
                                                     now - n.error_at >= ERROR_SETTLE_SECS)
            if exited_badly or settled_error or n.lost or n.hung:
                failed.append(n)
        if failed:
            failed.sort(key=lambda f: f.failed_at or now)  # blame the first to fail
            return self._node_error(failed[0], [f.role.name for f in failed[1:]])
        if self._job_done and self._job_error is not None:
            if now - self._job_done_at < ERROR_SETTLE_SECS:
                return None  # the nodes' own reports say more than Spark's; let them arrive
            return SparkJobError(_spark_error_text(self._job_error, self.roles))
        if (self._job_done and now - self._job_done_at >= ERROR_SETTLE_SECS
                and any(n.exit is None for n in self._nodes.values())):
            missing = [n.role.name for n in self._nodes.values() if n.exit is None]
            return SparkJobError(f"the Spark job ended but nodes {missing} never reported their "
                                 "exit; see the executor logs")
        return None

    def _node_error(self, n: _Node, others: list[str]) -> NodeError:
        tail = list(n.exit["tail"]) if n.exit and n.exit.get("tail") else list(n.tail)
        if n.error is not None:
            where = {"result": "its return value", "feed": "its data feed"}.get(
                n.error.get("where"), "main_fn raised")
            return NodeError(n.role.name, n.host, where, exc_type=n.error["exc_type"],
                             exc_message=n.error["message"], traceback_text=n.error["traceback"],
                             output_tail=tail, others=others)
        if n.hung:
            reason = n.hung
        elif n.lost:
            reason = ("lost contact with the node: its executor, Spark task or supervisor died "
                      "(see that executor's logs)")
        else:
            reason = f"its TensorFlow process {describe_exit(n.exit['code'])}"
        return NodeError(n.role.name, n.host, reason, output_tail=tail, others=others)

    def _fail(self, failure: SparkTFError, restartable: bool = False) -> None:
        """Record the first failure and take every node down (lock held); with restarts
        left and a node or Spark failure, the monitor launches the cluster again."""
        if (restartable and isinstance(failure, (NodeError, SparkJobError))
                and self._failure is None and self.attempt < self.max_restarts
                and self._launch.train_mode is not False):  # inference is not restarted
            if self._restart_pending is None:
                self._restart_pending = failure
                self._abort_attempt()
            self._cond.notify_all()
            return
        if self._failure is None:
            self._failure = failure
            log.warning("sparktf: %s failed (%s); stopping every node", self.job_id,
                        str(failure).splitlines()[0])
        self.status = Status.FAILED
        self._abort_attempt()
        self._cond.notify_all()

    def _abort_attempt(self) -> None:
        """Tell every node's supervisor to stop its tree, and cancel the Spark job (lock held)."""
        for n in self._nodes.values():
            self._send(n, "agent", {"type": "abort"})
        self._cancel_job()

    def _cancel_job(self) -> None:
        """Cancel this attempt's Spark job; a stopped SparkContext has none left to cancel."""
        try:
            self.sc.cancelJobGroup(self.job_id)
        except Exception as exc:  # noqa: BLE001 - e.g. the SparkContext was stopped
            log.info("sparktf: could not cancel %s: %s", self.job_id, exc)

    def _wait(self, predicate: Callable[[], bool], deadline: float | None) -> bool:
        """Wait (lock held) until predicate or failure; False on deadline."""
        while not predicate() and self._failure is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._cond.wait(0.2 if remaining is None else min(0.2, remaining))
        return True

    def _wait_registered(self) -> None:
        deadline = time.monotonic() + self._reservation_timeout
        with self._cond:
            ok = self._wait(lambda: all("node" in n.chans or n.state != "pending"
                                        for n in self._nodes.values()), deadline)
            if self._failure is None and ok:
                if self.status is Status.LAUNCHING:
                    self.status = Status.RUNNING
                return
            if not ok:
                missing = [n.role.name for n in self._nodes.values() if n.state == "pending"]
                self._fail(ClusterTimeoutError(
                    f"nodes {missing} did not start within reservation_timeout="
                    f"{self._reservation_timeout:g}s; check the executor logs, or raise "
                    "spark.sparktf.reservationTimeout"))
        self._teardown()
        raise self._failure

    def _teardown(self, timeout: float = 60.0) -> None:
        """Wait for the Spark job to end, then close the control server (idempotent)."""
        job_thread = getattr(self, "_job_thread", None)
        if job_thread is not None:
            job_thread.join(timeout)
        if job_thread is not None and job_thread.is_alive():
            log.warning("sparktf: the Spark job of %s did not end within %.0fs", self.job_id,
                        timeout)
        if not self._closed:
            self._closed = True
            self._server.close()
            self._finalizer.detach()

    # -------------------------------------------------------------------------------- public
    def tensorboard_url(self, timeout: float = 0) -> str | None:
        """The chief's TensorBoard URL (``run(..., tensorboard=True)``), once it answers.

        Waits up to ``timeout`` seconds for it; ``None`` if it is not (yet) up, was not asked
        for, or failed to start (the reason is printed on the driver). TensorBoard runs while
        the chief's node does, and is stopped with it.
        """
        chief = self._nodes[topology.chief_role(self.roles).name]
        deadline = time.monotonic() + max(0.0, float(timeout))
        with self._cond:
            self._wait(lambda: self._tensorboard is not None or chief.exit is not None
                       or not self._launch.tensorboard, deadline)
            if self._tensorboard is None or chief.exit is not None:
                return None
            return self._tensorboard.get("url")

    @property
    def cluster_spec(self) -> dict[str, list[str]]:
        """Job name to node hosts, as the nodes reported them (ports in ``results`` context)."""
        with self._cond:
            spec: dict[str, list[str]] = {}
            for role in self.roles:
                spec.setdefault(role.job, []).append(self._nodes[role.name].host or "?")
            return spec

    def shutdown(self, grace_secs: float = 0, timeout: float | None = None) -> Any:
        """Wait for the job to end, stop what is left, and return the chief's return value.

        Parameters
        ----------
        grace_secs : float
            Seconds the parameter servers and serving workers stay up after the last
            chief/worker ``main_fn`` returns (when called before that happens).
        timeout : float or None
            Give up after this many seconds: stop every node and raise
            :class:`~sparktf.errors.ClusterTimeoutError`. ``None`` waits as long as it takes.

        Raises
        ------
        NodeError
            A node's ``main_fn`` raised or its process died; names the node and its output.
        """
        if not isinstance(grace_secs, (int, float)) or grace_secs < 0:
            raise ConfigError(f"grace_secs must be a number >= 0, got {grace_secs!r}")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ConfigError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.status is Status.CREATED:  # InputMode.SPARK, never given data
            self.status = Status.FINISHED
            self._teardown()
            return None
        try:
            with self._cond:
                self._grace = float(grace_secs)
                done = self._wait(lambda: self.status is Status.FINISHED, deadline)
                if not done:
                    running = [n.role.name for n in self._nodes.values() if n.exit is None]
                    self._fail(ClusterTimeoutError(
                        f"shutdown(timeout={timeout}) expired with nodes {running} still "
                        "running; every node was stopped"))
        except KeyboardInterrupt:
            with self._cond:
                self._fail(ClusterStateError("interrupted (KeyboardInterrupt); every node was "
                                             "stopped"))
            self._teardown()
            raise
        self._teardown()
        if self._failure is not None:
            raise self._failure
        return self.results.get(topology.chief_role(self.roles).name)

    def train(self, data, num_epochs: int = 1, feed_timeout: float = 600, *,
              shuffle: bool = False, equalize: bool | None = None,
              rebalance: bool | None = None) -> None:
        """Start the nodes over ``data`` and feed it to the chief and workers; InputMode.SPARK.

        Returns when every chief/worker ``main_fn`` has returned (the parameter servers are being
        stopped); :meth:`shutdown` then returns the chief's value.

        Parameters
        ----------
        data : pyspark.RDD or pyspark.sql.DataFrame
            RDD elements reach ``feed.next_batch`` as they are; a DataFrame's columns as numpy
            arrays (Arrow from end to end).
        num_epochs : int
            Passes over the data. Spark computes the data once; each node keeps its share in a
            spool file in its private directory and reads later epochs from there.
        feed_timeout : float
            Seconds without progress (no data taken, none arriving) before the feed fails.
        shuffle : bool
            Shuffle each node's share (batch order and rows) between epochs.
        equalize : bool, optional
            Give every training node the same number of rows per epoch, so that synchronous
            strategies (MultiWorkerMirroredStrategy) take equal steps and never hang. Default:
            on when there is no parameter server and more than one training node. The rows it
            holds back are counted in :attr:`rows_held_back`.
        rebalance : bool, optional
            Deal rows out evenly over a shuffle. Default: when equalizing, or when the data's
            partitions do not already match the nodes one to one.
        """
        self._require_data_mode("train")
        trainers = sum(r.trains for r in self.roles)
        equalize = (trainers > 1 and not any(r.job == "ps" for r in self.roles)
                    if equalize is None else equalize)
        problems = _feed_problems(data, num_epochs, feed_timeout, shuffle, equalize, rebalance)
        if problems:
            raise ConfigError.from_problems(problems)
        config = FeedConfig(num_epochs=num_epochs, feed_timeout=float(feed_timeout),
                            shuffle=shuffle, equalize=equalize,
                            spool_max_bytes=_setting(self.sc, "spoolMaxBytes", None, None, int))
        self._launch = dataclasses.replace(self._launch, train_mode=True, feed=config)
        self._stage_factory = lambda: self._data_stage(data, rebalance, equalize)
        self._start(self._stage_factory())
        self._wait_registered()
        with self._cond:
            self._wait(lambda: self._training_done_at is not None, None)
            failure = self._failure
        if failure is not None:
            self._teardown()
            raise failure
        if self.rows_held_back:
            log.info("sparktf: %d rows were held back so that every worker took the same "
                     "number of steps", self.rows_held_back)

    def inference(self, data, output_schema: str = "prediction double",
                  feed_timeout: float = 600):
        """Run ``main_fn`` over ``data`` with ``train_mode=False``; one output per input row.

        Each node reads its rows with ``ctx.get_data_feed(train_mode=False)`` and returns one
        output per row with ``feed.batch_results``. Returns an RDD (RDD input) or a DataFrame
        with ``output_schema`` (DataFrame input) in input order, persisted (memory and disk)
        so that it outlives the nodes. Every node of an inference cluster gets data: start it
        without parameter servers or an evaluator.
        """
        self._require_data_mode("inference")
        problems = _feed_problems(data, 1, feed_timeout, False, False, None)
        if any(r.job in ("ps", "evaluator") for r in self.roles):
            problems.append("an inference cluster has no parameter servers or evaluator: "
                            "start it with num_ps=0 and eval_node=False")
        if not isinstance(output_schema, str) or not output_schema.strip():
            problems.append(f"output_schema must be a DDL string such as 'prediction double', "
                            f"got {output_schema!r}")
        if problems:
            raise ConfigError.from_problems(problems)
        config = FeedConfig(num_epochs=1, feed_timeout=float(feed_timeout))
        self._launch = dataclasses.replace(self._launch, train_mode=False, feed=config)
        stage, output = self._inference_stage(data, output_schema)
        self._start(stage)
        self._wait_registered()
        with self._cond:
            self._wait(lambda: self.status is Status.FINISHED, None)
        self._teardown()
        if self._failure is not None:
            raise self._failure
        return output

    def _inference_stage(self, data, output_schema: str):
        from pyspark import RDD, StorageLevel

        from sparktf import partition

        n = len(self.roles)
        if isinstance(data, RDD):
            ordered = data if data.getNumPartitions() == n else partition.rdd_in_order(data, n)
            raw = partition.raw_pickled_batches(ordered)
            out = (raw or ordered).barrier().mapPartitions(
                node_task(self._launch, "pickled-batches" if raw is not None else "pickle"))
        else:
            from pyspark.sql.pandas.types import to_arrow_schema
            from pyspark.sql.types import _parse_datatype_string

            schema = _parse_datatype_string(output_schema)
            df = data if data.rdd.getNumPartitions() == n else partition.dataframe_in_order(data, n)
            self._launch = dataclasses.replace(
                self._launch, output_schema=to_arrow_schema(schema).serialize().to_pybytes())
            task = node_task(self._launch, "arrow",
                             to_arrow_schema(df.schema).serialize().to_pybytes())
            out = df.mapInArrow(task, schema, barrier=True)
        out.persist(StorageLevel.MEMORY_AND_DISK)
        return out.count, out

    def _require_data_mode(self, what: str) -> None:
        if self.input_mode is not InputMode.SPARK:
            raise ClusterStateError(f"{what}() feeds data, which needs InputMode.SPARK: start "
                                    "with sparktf.run(..., input_mode=sparktf.InputMode.SPARK)")
        if self.status is not Status.CREATED:
            raise ClusterStateError(
                f"{what}() starts the cluster's nodes over the data and can be called once per "
                f"cluster (this one is {self.status.value}); call sparktf.run() again for "
                "another pass")

    def _data_stage(self, data, rebalance: bool | None, equalize: bool) -> Callable[[], Any]:
        """The barrier stage that runs the nodes over ``data``."""
        from pyspark import RDD

        from sparktf import partition

        n = len(self.roles)
        trainers = sum(r.trains for r in self.roles)
        parts = data.getNumPartitions() if isinstance(data, RDD) else data.rdd.getNumPartitions()
        if rebalance is None:
            rebalance = (equalize and trainers > 1) or not (parts == n == trainers)
        elif not rebalance and not parts == n == trainers:
            raise ConfigError(f"rebalance=False needs one data partition per node and no ps or "
                              f"evaluator; the data has {parts} partitions for {n} nodes "
                              f"({trainers} training): leave rebalance unset")
        if isinstance(data, RDD):
            rdd = partition.rdd_for_nodes(data, n, trainers) if rebalance else data
            raw = partition.raw_pickled_batches(rdd)
            if raw is not None:
                task = node_task(self._launch, "pickled-batches")
                return lambda: raw.barrier().mapPartitions(task).collect()
            task = node_task(self._launch, "pickle")
            return lambda: rdd.barrier().mapPartitions(task).collect()
        from pyspark.sql.pandas.types import to_arrow_schema

        df = partition.dataframe_for_nodes(data, n, trainers) if rebalance else data
        schema = to_arrow_schema(df.schema).serialize().to_pybytes()
        task = node_task(self._launch, "arrow", schema)
        if data.isEmpty():
            # Spark plans an empty DataFrame as no partitions at all (no barrier tasks, no
            # nodes): start the nodes over empty partitions; they get the schema and the end.
            return lambda: self._empty_stage(lambda _: task(iter(())))
        return lambda: df.mapInArrow(task, "node string", barrier=True).collect()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            with self._cond:
                if self._failure is None and self.status is not Status.FINISHED:
                    self._fail(ClusterStateError(f"the with-block raised {exc_type.__name__}"))
            self._teardown()
            return
        self.shutdown()

    def __repr__(self) -> str:
        return f"<sparktf.Cluster {self.job_id} {self.status.value} nodes={len(self.roles)}>"


class _AttemptHandler:
    """Routes one attempt's control connections to the cluster, and drops them once the
    cluster has moved on to a later attempt."""

    def __init__(self, cluster: Cluster, attempt: int) -> None:
        self._cluster, self._attempt = cluster, attempt

    def _current(self) -> bool:
        return self._cluster.attempt == self._attempt

    def on_connect(self, node: str, role: str, chan: protocol.Channel, hello: dict) -> None:
        if self._current():
            self._cluster.on_connect(node, role, chan, hello)
        else:
            chan.close()

    def on_message(self, node: str, role: str, message: dict) -> None:
        if self._current():
            self._cluster.on_message(node, role, message)

    def on_disconnect(self, node: str, role: str) -> None:
        if self._current():
            self._cluster.on_disconnect(node, role)


def _abort_quietly(sc, job_id: str, server: ControlServer) -> None:
    try:
        sc.cancelJobGroup(job_id)
    except Exception:  # noqa: BLE001 - interpreter exit: best effort
        pass
    server.close()


def _spark_error_text(exc: BaseException, roles: tuple[NodeRole, ...]) -> str:
    """The few lines of a Spark job failure worth reading, naming the node when Spark does."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    keep = [ln for ln in lines if ln and not ln.startswith(("at ", "...", "File ", "^"))
            and ("Exception" in ln or "Error" in ln or "sparktf node" in ln)]
    text = "the Spark job holding the TensorFlow nodes failed"
    m = re.search(r"Task (\d+) in stage", str(exc))
    if m and int(m.group(1)) < len(roles):
        text += f" in the task of node {roles[int(m.group(1))].name}"
    text += ":\n  " + "\n  ".join(keep[:6] or lines[:6])
    if "BarrierJobUnsupportedRDDChainException" in str(exc):
        text += ("\n  The data's lineage (union, coalesce, zip...) cannot feed a barrier stage "
                 "directly: call train() without rebalance=False so sparktf reshuffles it.")
    return text


def run(sc, main_fn: Callable, args: Any = None, num_executors: int | None = None,
        num_ps: int = 0, *, master_node: str | None = "chief", eval_node: bool = False,
        input_mode: InputMode = InputMode.TENSORFLOW, reservation_timeout: float | None = None,
        log_to_driver: bool | None = None, env: dict[str, str] | None = None,
        tensorboard: bool = False, log_dir: str | None = None, max_restarts: int = 0,
        heartbeat_timeout: float | None = None, progress_timeout: float | None = None) -> Cluster:
    """Start a TensorFlow cluster on Spark executors and run ``main_fn`` on every node.

    Parameters
    ----------
    sc : pyspark.SparkContext
    main_fn : callable
        ``main_fn(args, ctx)`` or ``main_fn(ctx)``; runs in a fresh process on each chief, worker
        and evaluator node, with ``TF_CONFIG`` set. Parameter servers run sparktf's server.
    args : any picklable object
        Passed to ``main_fn`` unchanged.
    num_executors : int, optional
        Nodes in the cluster, one per Spark task slot (default: every slot the cluster has).
    num_ps : int
        Parameter servers among them.
    master_node : {"chief", "master", None}
        The job name of the node that coordinates; ``None`` for a worker-only cluster.
    eval_node : bool
        Make one node an evaluator.
    input_mode : InputMode
        ``InputMode.TENSORFLOW``: the nodes read their own data, and start now.
        ``InputMode.SPARK``: the nodes start over the data given to :meth:`Cluster.train`.
    reservation_timeout : float, optional
        Seconds for every node to start (``spark.sparktf.reservationTimeout``, default 120).
    log_to_driver : bool, optional
        Print every node's output on the driver, tagged ``[worker:1]``
        (``spark.sparktf.logToDriver``, default true).
    env : dict, optional
        Extra environment variables for the node processes.
    tensorboard : bool
        The chief serves TensorBoard on ``log_dir`` while it runs; the driver prints its URL
        and :meth:`Cluster.tensorboard_url` returns it.
    heartbeat_timeout : float, optional
        A running node that sends no heartbeat for this many seconds is declared dead
        (``spark.sparktf.heartbeatTimeout``, default 30; 0 turns it off). Nodes send one a
        second, with their progress.
    progress_timeout : float, optional
        A running chief/worker/evaluator whose progress (``ctx.report_progress(step)`` and the
        rows its feed handed out) stops changing for this many seconds is declared hung
        (``spark.sparktf.progressTimeout``; default off). The clock starts at its first
        progress; parameter servers and serving workers are exempt.
    max_restarts : int
        After a node fails (its ``main_fn`` raised, its process or executor died), stop every
        node and launch the whole cluster again, up to this many times; ``ctx.attempt`` tells
        ``main_fn`` which launch it is, so it can resume from its latest checkpoint. With
        InputMode.SPARK the data are fed again from the start of the first epoch. The
        failures are kept in :attr:`Cluster.failures`. Inference is not restarted.
    log_dir : str, optional
        The directory ``main_fn`` writes summaries to (``ctx.log_dir``); with TensorBoard and no
        ``log_dir``, a directory in the chief's private work dir (removed at its end).

    Returns
    -------
    Cluster
        Running; call :meth:`Cluster.shutdown` (or use it as a context manager).
    """
    n_params, fn_problem = preflight.main_fn_params(main_fn)
    problems = [fn_problem] if fn_problem else []
    if not isinstance(input_mode, InputMode):
        problems.append(f"input_mode must be sparktf.InputMode.TENSORFLOW or "
                        f"sparktf.InputMode.SPARK, got {input_mode!r}")
    problems += topology.topology_problems(num_executors if num_executors is not None else 1,
                                           num_ps, master_node, eval_node)
    payload = None
    if n_params is not None:
        payload, pickle_problem = preflight.pickle_payload(main_fn, args, n_params)
        problems += [pickle_problem] if pickle_problem else []
    for name, value in (("heartbeat_timeout", heartbeat_timeout),
                        ("progress_timeout", progress_timeout)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or value < 0):
            problems.append(f"{name} must be a number of seconds >= 0 (0: off) or None, "
                            f"got {value!r}")
    if not isinstance(max_restarts, int) or isinstance(max_restarts, bool) or max_restarts < 0:
        problems.append(f"max_restarts must be an int >= 0, got {max_restarts!r}")
    if not isinstance(tensorboard, bool):
        problems.append(f"tensorboard must be True or False, got {tensorboard!r}")
    elif tensorboard and importlib.util.find_spec("tensorboard") is None:
        problems.append("tensorboard=True needs the tensorboard package: pip install tensorboard")
    if log_dir is not None and (not isinstance(log_dir, str) or not log_dir):
        problems.append(f"log_dir must be a non-empty path string or None, got {log_dir!r}")
    if env is not None and not all(isinstance(k, str) and isinstance(v, str)
                                   for k, v in dict(env).items()):
        problems.append("env must map str to str")
    slot_timeout = _setting(sc, "slotWaitTimeout", None, 30.0)
    spark_problems, slots = preflight.spark_problems(sc, num_executors, slot_timeout)
    problems += spark_problems
    if num_executors is None and not problems:
        problems += topology.topology_problems(slots, num_ps, master_node, eval_node)
    if problems:
        raise ConfigError.from_problems(problems)
    roles = topology.assign_roles(num_executors or slots, num_ps, master_node, eval_node)
    cluster = Cluster(
        sc, roles, payload,
        reservation_timeout=_setting(sc, "reservationTimeout", reservation_timeout, 120.0),
        log_to_driver=_setting(sc, "logToDriver", log_to_driver, True, bool),
        tail_lines=_setting(sc, "tailLines", None, 40, int),
        stop_grace=_setting(sc, "stopGrace", None, 3.0), env=env, input_mode=input_mode,
        tensorboard=tensorboard, log_dir=log_dir, max_restarts=max_restarts,
        heartbeat_timeout=_setting(sc, "heartbeatTimeout", heartbeat_timeout, 30.0) or None,
        progress_timeout=_setting(sc, "progressTimeout", progress_timeout, None) or None)
    log.info("sparktf: %s has %d nodes: %s", cluster.job_id, len(roles),
             ", ".join(r.name for r in roles))
    if input_mode is InputMode.TENSORFLOW:
        cluster._start()
        cluster._wait_registered()
    return cluster


def _feed_problems(data, num_epochs, feed_timeout, shuffle, equalize, rebalance) -> list[str]:
    from pyspark import RDD
    from pyspark.sql import DataFrame

    problems = []
    if not isinstance(data, (RDD, DataFrame)):
        problems.append(f"data must be a pyspark RDD or DataFrame, got {type(data).__name__}")
    if not isinstance(num_epochs, int) or isinstance(num_epochs, bool) or num_epochs < 1:
        problems.append(f"num_epochs must be an int >= 1, got {num_epochs!r}")
    if not isinstance(feed_timeout, (int, float)) or feed_timeout <= 0:
        problems.append(f"feed_timeout must be a positive number of seconds, got {feed_timeout!r}")
    for name, value in (("shuffle", shuffle), ("equalize", equalize)):
        if not isinstance(value, bool):
            problems.append(f"{name} must be True or False, got {value!r}")
    if rebalance is not None and not isinstance(rebalance, bool):
        problems.append(f"rebalance must be True, False or None, got {rebalance!r}")
    return problems
