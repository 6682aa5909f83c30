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
import enum
import logging
import re
import sys
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from sparktf import preflight, protocol, topology
from sparktf.control import ControlServer
from sparktf.errors import (ClusterStateError, ClusterTimeoutError, ConfigError, NodeError,
                            SparkJobError, SparkTFError)
from sparktf.executor import node_task
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


class Status(str, enum.Enum):
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
                 stop_grace: float, env: dict[str, str] | None = None) -> None:
        self.sc = sc
        self.roles = roles
        self.job_id = f"sparktf-{uuid.uuid4().hex[:12]}"
        self.status = Status.LAUNCHING
        self.results: dict[str, Any] = {}
        self._nodes = {r.name: _Node(r, tail=collections.deque(maxlen=tail_lines)) for r in roles}
        self._cond = threading.Condition()
        self._failure: SparkTFError | None = None
        self._grace = 0.0
        self._training_done_at: float | None = None
        self._stop_sent = False
        self._job_done = False
        self._job_done_at = 0.0
        self._job_error: BaseException | None = None
        self._log_to_driver = log_to_driver
        self._print_lock = threading.Lock()
        self._reservation_timeout = reservation_timeout
        self._closed = False
        conf = sc.getConf()
        advertise = conf.get("spark.driver.host")
        secret = protocol.new_secret()
        self._server = ControlServer(conf.get("spark.driver.bindAddress", advertise), advertise,
                                     secret, self)
        self._launch = LaunchSpec(
            job_id=self.job_id, roles=roles, driver_address=self._server.address,
            secret=secret, payload=payload, tail_lines=tail_lines,
            stop_grace=stop_grace, env=tuple(sorted((env or {}).items())))
        # Whatever happens to this object, the nodes do not outlive the driver's interpreter.
        self._finalizer = weakref.finalize(self, _abort_quietly, sc, self.job_id, self._server)

    # ----------------------------------------------------------------- control server callbacks
    def on_connect(self, node: str, role: str, chan: protocol.Channel, hello: dict) -> None:
        with self._cond:
            n = self._nodes.get(node)
            if n is None:
                chan.close()
                return
            n.chans[role] = chan
            n.host = hello.get("host")
            if role == "node" and n.state == "pending":
                n.state = "running"
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
        with self._cond:
            if kind == "state" and msg.get("state") == "serving":
                n.state = "serving"
            elif kind == "done":
                n.state, n.value = "done", msg.get("value")
                self.results[node] = n.value
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
            n.chans.pop(role, None)
            if role == "agent" and n.exit is None:
                n.lost = True
                n.failed_at = n.failed_at or time.monotonic()
            self._cond.notify_all()

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
    def _start(self) -> None:
        from pyspark import InheritableThread

        self._job_thread = InheritableThread(target=self._run_spark_job,
                                             name=f"{self.job_id}-spark", daemon=True)
        self._job_thread.start()
        self._monitor = threading.Thread(target=self._monitor_loop, name=f"{self.job_id}-monitor",
                                         daemon=True)
        self._monitor.start()

    def _run_spark_job(self) -> None:
        try:
            self.sc.setJobGroup(self.job_id, f"sparktf TensorFlow cluster {self.job_id}",
                                interruptOnCancel=True)
            n = len(self.roles)
            rdd = self.sc.parallelize(range(n), n)
            rdd.barrier().mapPartitions(node_task(self._launch)).collect()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            self._job_error = exc
        finally:
            with self._cond:
                self._job_done, self._job_done_at = True, time.monotonic()
                self._cond.notify_all()

    def _monitor_loop(self) -> None:
        with self._cond:
            while self.status not in (Status.FINISHED, Status.FAILED):
                self._step()
                self._cond.wait(0.1)

    def _step(self) -> None:
        """Advance the state machine; called with the lock held."""
        if self._failure is None:
            failure = self._find_failure()
            if failure is not None:
                self._fail(failure)
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

    def _find_failure(self) -> SparkTFError | None:
        now = time.monotonic()
        failed = []
        for n in self._nodes.values():
            exited_badly = n.exit is not None and n.exit["code"] != 0
            settled_error = n.error is not None and (n.exit is not None or n.lost or
                                                     now - n.error_at >= ERROR_SETTLE_SECS)
            if exited_badly or settled_error or n.lost:
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
            where = "its return value" if n.error.get("where") == "result" else "main_fn raised"
            return NodeError(n.role.name, n.host, where, exc_type=n.error["exc_type"],
                             exc_message=n.error["message"], traceback_text=n.error["traceback"],
                             output_tail=tail, others=others)
        if n.lost:
            reason = ("lost contact with the node: its executor, Spark task or supervisor died "
                      "(see that executor's logs)")
        else:
            reason = f"its TensorFlow process {describe_exit(n.exit['code'])}"
        return NodeError(n.role.name, n.host, reason, output_tail=tail, others=others)

    def _fail(self, failure: SparkTFError) -> None:
        """Record the first failure and take every node down (lock held)."""
        if self._failure is None:
            self._failure = failure
            log.warning("sparktf: %s failed (%s); stopping every node", self.job_id,
                        str(failure).splitlines()[0])
        self.status = Status.FAILED
        for n in self._nodes.values():
            self._send(n, "agent", {"type": "abort"})
        self.sc.cancelJobGroup(self.job_id)
        self._cond.notify_all()

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
        self._job_thread.join(timeout)
        if self._job_thread.is_alive():
            log.warning("sparktf: the Spark job of %s did not end within %.0fs", self.job_id,
                        timeout)
        if not self._closed:
            self._closed = True
            self._server.close()
            self._finalizer.detach()

    # -------------------------------------------------------------------------------- public
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
    return text + ":\n  " + "\n  ".join(keep[:6] or lines[:6])


def run(sc, main_fn: Callable, args: Any = None, num_executors: int | None = None,
        num_ps: int = 0, *, master_node: str | None = "chief", eval_node: bool = False,
        input_mode: InputMode = InputMode.TENSORFLOW, reservation_timeout: float | None = None,
        log_to_driver: bool | None = None, env: dict[str, str] | None = None) -> Cluster:
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
        ``InputMode.TENSORFLOW``: the nodes read their own data.
    reservation_timeout : float, optional
        Seconds for every node to start (``spark.sparktf.reservationTimeout``, default 120).
    log_to_driver : bool, optional
        Print every node's output on the driver, tagged ``[worker:1]``
        (``spark.sparktf.logToDriver``, default true).
    env : dict, optional
        Extra environment variables for the node processes.

    Returns
    -------
    Cluster
        Running; call :meth:`Cluster.shutdown` (or use it as a context manager).
    """
    n_params, fn_problem = preflight.main_fn_params(main_fn)
    problems = [fn_problem] if fn_problem else []
    if input_mode is not InputMode.TENSORFLOW:
        problems.append(f"input_mode must be a sparktf.InputMode, got {input_mode!r}")
    problems += topology.topology_problems(num_executors if num_executors is not None else 1,
                                           num_ps, master_node, eval_node)
    payload = None
    if n_params is not None:
        payload, pickle_problem = preflight.pickle_payload(main_fn, args, n_params)
        problems += [pickle_problem] if pickle_problem else []
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
        stop_grace=_setting(sc, "stopGrace", None, 3.0), env=env)
    log.info("sparktf: starting %s with %d nodes: %s", cluster.job_id, len(roles),
             ", ".join(r.name for r in roles))
    cluster._start()
    cluster._wait_registered()
    return cluster
