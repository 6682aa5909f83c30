"""One table of settings: each key's name, default, type, check and doc line, in one place.

A value is looked up as: the argument, else ``spark.sparktf.<conf>`` in the Spark conf, else the
default; arguments and Spark conf values get the same check, and every error names the key
(and the conf key) and what would be valid. :meth:`Settings.resolve` reports every problem at
once. docs/reference/settings.md's table is :func:`markdown_table` (a test keeps them equal).

Common to every side (the driver resolves the settings; the specs the task and the node read
take their defaults from here), so it lives in ``common``, which imports no side. Pure:
imports neither pyspark nor tensorflow (``resolve`` only calls ``sc.getConf()``).
"""

from __future__ import annotations

import enum
import importlib.util
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparktf.common import plain_numbers
from sparktf.common.horovod import FRAMEWORKS
from sparktf.common.ports import PortRange
from sparktf.common.topology import MASTER_NODES
from sparktf.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.conf import RuntimeConfig


class InputMode(enum.Enum):
    """Where the nodes' data comes from."""

    #: The nodes read their own data (files, HDFS, tf.data).
    TENSORFLOW = "tensorflow"
    #: Spark feeds RDD or DataFrame partitions to the chief and workers: ``cluster.train(data)``.
    SPARK = "spark"


class _Invalid(ValueError):
    """A value failed its check; the message completes 'KEY must ...'."""


#: Bounds of every timeout, in seconds: past MAX_SECONDS the standard library's waits overflow
#: (``socket.settimeout(inf)`` raises OverflowError deep inside), and a wait under MIN_SECONDS
#: is none. Infinity and NaN are refused: "no timeout" is 0 or None where a setting has one.
MIN_SECONDS = 0.001
MAX_SECONDS = 1e9


def valid_seconds(value: Any, zero: bool = False) -> float | None:
    """``value`` as plain seconds if it is finite, MIN_SECONDS to MAX_SECONDS (or 0 where
    ``zero``), else None."""
    number = plain_numbers.real(value)
    if number is None or not math.isfinite(number) or not 0 <= number <= MAX_SECONDS:
        return None
    if number < MIN_SECONDS and not (zero and number == 0):
        return None
    return number


def _seconds(value: Any, zero: bool, what: str) -> float:
    number = valid_seconds(value, zero)
    if number is None:
        raise _Invalid(f"be {what}")
    return number


def seconds(value: Any) -> float:
    """A positive number of seconds."""
    return _seconds(value, False, "a positive number of seconds, 0.001 to 1e9 (not inf)")


def seconds_or_zero(value: Any) -> float:
    """A number of seconds >= 0."""
    return _seconds(value, True, "a number of seconds >= 0, at most 1e9 (not inf)")


def seconds_or_off(value: Any) -> float | None:
    """A number of seconds >= 0; 0 or None turns the check off (None)."""
    if value is None:
        return None
    what = "a number of seconds >= 0 (0: off; else 0.001 to 1e9, not inf) or None"
    return _seconds(value, True, what) or None


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("be True or False")
    return value


def optional_flag(value: Any) -> bool | None:
    """True, False, or None (unset: the call decides)."""
    if value is not None and not isinstance(value, bool):
        raise _Invalid("be True, False or None")
    return value


def count(minimum: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        number = plain_numbers.integer(value)
        if number is None or number < minimum:
            raise _Invalid(f"be an int >= {minimum}")
        return number

    check.__doc__ = f"an int >= {minimum}"
    return check


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def optional_check(value: Any) -> Any:
        if value is None:
            return None
        try:
            return check(value)
        except _Invalid as exc:
            raise _Invalid(f"{exc} or None") from None

    return optional_check


def master_node(value: Any) -> str | None:
    if value not in MASTER_NODES:
        raise _Invalid("be one of 'chief', 'master' or None")
    return value


def framework(value: Any) -> str:
    if value not in FRAMEWORKS:
        raise _Invalid("be 'tensorflow' or 'horovod'")
    return value


def input_mode(value: Any) -> InputMode:
    if not isinstance(value, InputMode):
        raise _Invalid("be sparktf.InputMode.TENSORFLOW or sparktf.InputMode.SPARK")
    return value


def environment(value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _Invalid("map str to str, as a dict (e.g. {'TF_CPP_MIN_LOG_LEVEL': '2'})")
    owned = sorted(set(value) & RESERVED_ENV)
    if owned:
        raise _Invalid(
            f"not set {', '.join(owned)}: sparktf writes it for every node from the "
            "cluster it reserved (ctx.tf_config, ctx.name); leave it out"
        )
    return tuple(sorted(value.items()))


#: What ``env`` may not override in a node: its TF_CONFIG must name the ports sparktf reserved,
#: and SPARKTF_NODE is how a node's processes are found and stopped.
RESERVED_ENV = frozenset({"TF_CONFIG", "SPARKTF_NODE"})


def path(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise _Invalid("be a non-empty path string or None")
    return value


def host(value: Any) -> str | None:
    """None, or a host name or IP address (no port, no spaces)."""
    if value is None:
        return None
    bad = not isinstance(value, str) or not value or any(c in value for c in " /\t")
    if bad or value.count(":") == 1:  # (host:port; an IPv6 address has more colons)
        raise _Invalid("be a host name or IP address (no port), or unset")
    return value


def tensorboard(value: Any) -> bool:
    flag(value)
    if value and importlib.util.find_spec("tensorboard") is None:
        raise _Invalid("be False without the tensorboard package (pip install tensorboard)")
    return value


def yarn_overhead_check(value: Any) -> str:
    """``error``, ``warn`` or ``off`` (None: off)."""
    if value is None:
        return "off"
    if value not in ("error", "warn", "off"):
        raise _Invalid("be one of 'error', 'warn' or 'off'")
    return value


def port_range(value: Any) -> PortRange | None:
    """None, or ports as ``LOW-HIGH``."""
    if value is None or isinstance(value, PortRange):
        return value
    if not isinstance(value, str):
        raise _Invalid("be ports as LOW-HIGH (e.g. 40000-40100)")
    try:
        return PortRange.parse(value)
    except ValueError as exc:
        raise _Invalid(str(exc)) from None


@dataclass(frozen=True)
class Setting:
    """One key: its argument's name, Spark conf key, default, check and doc."""

    name: str
    conf: str | None
    default: Any
    check: Callable[[Any], Any]
    doc: str
    #: The call that takes it as an argument: ``run`` (``sparktf.run``), ``train``
    #: (``Cluster.train``), ``feed`` (``Cluster.train`` and ``Cluster.inference``), or None:
    #: only the Spark conf sets it.
    arg: str | None = "run"

    def parse_conf(self, text: str) -> Any:
        """A Spark conf string as the type the check wants."""
        text = text.strip()
        if self.check in (flag, tensorboard):
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            raise _Invalid(f"be true or false, got {text!r}")
        if text.lower() in ("none", "off", ""):
            return None
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if number.is_integer() and "." not in text else number


#: Restarts in place of each worker where the cluster has parameter servers and the setting is
#: unset (see :attr:`Settings.restarts_in_place`).
DEFAULT_WORKER_RESTARTS = 3

TABLE: tuple[Setting, ...] = (
    Setting(
        "num_executors",
        None,
        None,
        optional(count(1)),
        "nodes in the cluster, one per Spark task slot (default: every slot)",
    ),
    Setting("num_ps", None, 0, count(0), "parameter servers among them"),
    Setting(
        "master_node",
        None,
        "chief",
        master_node,
        "job name of the coordinating node: 'chief', 'master', or None (workers only)",
    ),
    Setting("eval_node", None, False, flag, "make one node an evaluator"),
    Setting(
        "input_mode",
        None,
        InputMode.TENSORFLOW,
        input_mode,
        "InputMode.TENSORFLOW (nodes read their own data) or InputMode.SPARK (train(data))",
    ),
    Setting(
        "framework",
        None,
        "tensorflow",
        framework,
        "'tensorflow', or 'horovod': each chief and worker also gets its Horovod rank, size, "
        "local rank and the chief's Gloo rendezvous, so that hvd.init() needs no horovodrun",
    ),
    Setting(
        "reservation_timeout",
        "reservationTimeout",
        120.0,
        seconds,
        "seconds for every node of an attempt to start (each restart too)",
    ),
    Setting(
        "slot_wait_timeout",
        "slotWaitTimeout",
        30.0,
        seconds,
        "seconds to wait for executors to register their task slots",
        arg=None,
    ),
    Setting(
        "log_to_driver",
        "logToDriver",
        True,
        flag,
        "print every node's output on the driver, tagged [worker:1]",
    ),
    Setting(
        "progress",
        "progress",
        True,
        flag,
        "show the nodes' progress on the driver (rows fed, rows/s, step, ctx.report "
        "metrics): a tqdm bar on a terminal, else a log line every progress_interval; "
        "a summary per node at the end",
    ),
    Setting(
        "progress_interval",
        "progressInterval",
        10.0,
        seconds,
        "seconds between progress lines when the driver's stderr is not a terminal",
        arg=None,
    ),
    Setting(
        "tf_startup_logs",
        "tfStartupLogs",
        False,
        flag,
        "show TensorFlow's C++ start-up lines (absl banner, CUDA probes, CPU notices) in "
        "the nodes' output; off: left off the driver's console",
        arg=None,
    ),
    Setting(
        "tail_lines",
        "tailLines",
        40,
        count(1),
        "lines of a failed node's output kept in its error",
        arg=None,
    ),
    Setting(
        "stop_grace",
        "stopGrace",
        3.0,
        seconds_or_zero,
        "seconds between SIGTERM and SIGKILL when a node is stopped",
        arg=None,
    ),
    Setting(
        "heartbeat_timeout",
        "heartbeatTimeout",
        30.0,
        seconds_or_off,
        "a live node (any role) silent this long is declared dead; 0: off",
    ),
    Setting(
        "progress_timeout",
        "progressTimeout",
        None,
        seconds_or_off,
        "a running chief/worker/evaluator whose progress stops this long (from the start "
        "of its main_fn) is declared hung; 0 or unset: off",
    ),
    Setting(
        "collective_idle_timeout",
        "collectiveIdleTimeout",
        300.0,
        seconds_or_off,
        "a lock-step trainer (MultiWorkerMirroredStrategy, SyncReplicasOptimizer) idle "
        "this long after a peer's main_fn returned, which uneven steps cause, fails the "
        "job (named as a warning after 30 s); 0: warn only",
        arg=None,
    ),
    Setting(
        "max_restarts",
        "maxRestarts",
        0,
        count(0),
        "launch the whole cluster again after a node failure, up to this many times",
    ),
    Setting(
        "worker_restarts",
        "workerRestarts",
        None,
        optional(count(0)),
        "start a worker's failed TF process again in place, same TF_CONFIG and port, the "
        "chief and ps running on, up to this many times a worker; default "
        f"{DEFAULT_WORKER_RESTARTS} with parameter servers (ParameterServerStrategy, TF1 "
        "async), else 0. Synchronous models cannot go on without a peer: once a trainer "
        "reports SyncReplicasOptimizer (or MWMS), restarts in place are refused and the "
        "whole cluster restarts (max_restarts)",
    ),
    Setting(
        "yarn_overhead_check",
        "yarnOverheadCheck",
        "error",
        yarn_overhead_check,
        "on YARN, before the nodes start: when spark.executor.memoryOverhead (or its default, "
        "max(384 MiB, 0.1 x spark.executor.memory)) leaves less beside the heap than the "
        "TensorFlow nodes of one executor need (384 MiB + 1024 MiB a node), fail naming the "
        "setting and the figure (error), only log it (warn), or do not check (off)",
        arg=None,
    ),
    Setting(
        "gpus_per_node",
        "gpusPerNode",
        None,
        optional(count(1)),
        "GPUs Spark assigns to each node's task (a ResourceProfile on the barrier stage; "
        "needs spark.executor.resource.gpu.*); unset: what spark.task.resource.gpu.amount "
        "gives, if anything. Chief/workers see theirs as CUDA_VISIBLE_DEVICES, ps and "
        "evaluator none",
    ),
    Setting(
        "env",
        None,
        None,
        environment,
        "extra environment variables for the TF processes (not TF_CONFIG or SPARKTF_NODE, "
        "which sparktf sets)",
    ),
    Setting("tensorboard", None, False, tensorboard, "the chief serves TensorBoard on log_dir"),
    Setting(
        "log_dir",
        None,
        None,
        path,
        "TensorBoard's directory; an hdfs:// one is mirrored from a local ctx.log_dir",
    ),
    Setting(
        "num_epochs",
        None,
        1,
        count(1),
        "passes over the data; later ones stream from each node's spool",
        arg="train",
    ),
    Setting(
        "feed_timeout",
        None,
        600.0,
        seconds,
        "seconds a node's feed may wait without progress (no rows taken, none arriving) "
        "before it fails",
        arg="feed",
    ),
    Setting(
        "shuffle",
        None,
        False,
        flag,
        "shuffle each node's share (batch order and rows) between epochs",
        arg="train",
    ),
    Setting(
        "equalize",
        None,
        None,
        optional_flag,
        "give every training node the same rows per epoch, so that lock-step strategies "
        "take equal steps. Unset: on without parameter servers and with more than one "
        "training node",
        arg="train",
    ),
    Setting(
        "rebalance",
        None,
        None,
        optional_flag,
        "deal rows out evenly over a Spark shuffle. Unset: only when the data's partitions "
        "do not match the training nodes one to one (the log says which and why)",
        arg="train",
    ),
    Setting(
        "spool_max_bytes",
        "spoolMaxBytes",
        None,
        optional(count(1)),
        "cap on a node's spool: its share for later epochs, rows spilled or moved to it "
        "(InputMode.SPARK)",
        arg=None,
    ),
    Setting(
        "node_log_dir",
        "nodeLogDir",
        None,
        path,
        "directory on the driver that keeps every node's whole output, as "
        "<job id>/attempt-N/worker-1.log (a failed node's error names its file); copied to "
        "log_dir/sparktf-logs/ at the job's end when log_dir is on HDFS. Unset: "
        "sparktf-<user>/logs in the driver's temp directory. Directories 0700, files 0600; "
        "a symlink or another user's directory there is refused",
        arg=None,
    ),
    Setting(
        "node_log_max_bytes",
        "nodeLogMaxBytes",
        64 * 2**20,
        count(4096),
        "cap on each node log file; past it the file's output so far moves to <file>.1 "
        "(replacing an older one) and the new file's first line says so",
        arg=None,
    ),
    Setting(
        "node_log_keep_jobs",
        "nodeLogKeepJobs",
        20,
        count(1),
        "jobs whose node logs are kept under the node log directory; older jobs' "
        "directories are removed when a job starts",
        arg=None,
    ),
    Setting(
        "port_range",
        "portRange",
        None,
        port_range,
        "firewalled clusters: every port sparktf opens (the driver's control server, the TF "
        "servers, the row exchange, TensorBoard) is one of these, as LOW-HIGH (e.g. "
        "40000-40100); a host needs one per node it runs, the driver one more. Unset: ports "
        "the kernel picks",
        arg=None,
    ),
    Setting(
        "control_host",
        "controlHost",
        None,
        host,
        "the address the executors reach the driver's control server at (it listens there). "
        "Unset: spark.driver.host (spark.driver.bindAddress to listen); on Spark Connect, the "
        "client machine's address on its route to the Connect server (loopback for a local "
        "one): set it where the executors reach the client at another address",
        arg=None,
    ),
)


#: The calls whose arguments are rows of the table: each takes the rows of these ``arg`` kinds.
CALLS = {"run": ("run",), "train": ("train", "feed"), "inference": ("feed",)}


def call_problems(call: str, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``values`` of ``call``'s (``train``, ``inference``) arguments that are rows of the table,
    checked: (the checked values, the problems, each naming the argument and what is valid)."""
    checked, problems = {}, []
    rows = {s.name: s for s in TABLE if s.arg in CALLS[call]}
    for name, value in values.items():
        try:
            checked[name] = rows[name].check(value)
        except _Invalid as exc:
            problems.append(f"{name} must {exc}, got {value!r}")
    return checked, problems


def checked(name: str, value: Any, check: Callable[[Any], Any], error: type = ConfigError) -> Any:
    """``value`` of argument ``name`` through one of the table's checks (:func:`count`,
    :func:`flag`, :func:`seconds`, ...), for the calls whose arguments are not rows of the
    table (``next_batch``, ``keras_callback``, ``predict``): the same test and the same words,
    ``error`` raised with the argument named."""
    try:
        return check(value)
    except _Invalid as exc:
        raise error(f"{name} must {exc}, got {value!r}") from None


def default(name: str) -> Any:
    """The default of setting ``name`` (``KeyError`` if the table has no such key): every
    default of the code (``Limits``, ``LaunchSpec``, ``FeedConfig``, ``Cluster.train``) is
    read from the table here."""
    for s in TABLE:
        if s.name == name:
            return s.default
    raise KeyError(name)


@dataclass(frozen=True)
class Settings:
    """Every setting of one job, resolved and checked."""

    num_executors: int | None
    num_ps: int
    master_node: str | None
    eval_node: bool
    input_mode: InputMode
    framework: str
    reservation_timeout: float
    slot_wait_timeout: float
    log_to_driver: bool
    progress: bool
    progress_interval: float
    tf_startup_logs: bool
    tail_lines: int
    stop_grace: float
    heartbeat_timeout: float | None
    progress_timeout: float | None
    collective_idle_timeout: float | None
    max_restarts: int
    worker_restarts: int | None
    yarn_overhead_check: str
    gpus_per_node: int | None
    env: tuple[tuple[str, str], ...]
    tensorboard: bool
    log_dir: str | None
    spool_max_bytes: int | None
    node_log_dir: str | None
    node_log_max_bytes: int
    node_log_keep_jobs: int
    port_range: PortRange | None
    control_host: str | None

    @classmethod
    def resolve(cls, conf: Mapping[str, str] | None = None, **args: Any) -> Settings:
        """Check every argument (unset: ``None``) and ``spark.sparktf.*`` value in ``conf``;
        raise one :class:`ConfigError` listing every problem."""
        unknown = set(args) - {s.name for s in TABLE if s.arg == "run"}
        if unknown:
            raise TypeError(f"unknown settings {sorted(unknown)}")
        conf = conf or {}
        values, problems = {}, []
        for s in TABLE:
            if s.arg not in ("run", None):
                continue  # another call's argument (train's num_epochs, feed_timeout, ...)
            # None means "unset" for keys the Spark conf can set; for the others it is a value
            # (master_node=None), and only a missing argument takes the default.
            value = args.get(s.name) if s.conf else args.get(s.name, s.default)
            source = "argument"
            if value is None and s.conf and f"spark.sparktf.{s.conf}" in conf:
                source = "conf"
                try:
                    value = s.parse_conf(conf[f"spark.sparktf.{s.conf}"])
                except _Invalid as exc:
                    problems.append(f"spark.sparktf.{s.conf} must {exc}")
                    continue
            if value is None and source == "argument" and s.conf:
                value = s.default
            try:
                values[s.name] = s.check(value)
            except _Invalid as exc:
                if source == "conf":
                    problems.append(
                        f"spark.sparktf.{s.conf} must {exc}, got {value!r} "
                        f"(the Spark conf's value for {s.name})"
                    )
                else:
                    also = f" (or unset, to use spark.sparktf.{s.conf})" if s.conf else ""
                    problems.append(f"{s.name} must {exc}, got {value!r}{also}")
        if problems:
            raise ConfigError.from_problems(problems)
        return cls(**values)

    @property
    def restarts_in_place(self) -> int:
        """``worker_restarts``, or where unset its default: DEFAULT_WORKER_RESTARTS with
        parameter servers (their models go on while a worker is away), else 0."""
        if self.worker_restarts is not None:
            return self.worker_restarts
        return DEFAULT_WORKER_RESTARTS if self.num_ps > 0 else 0


def session_conf(runtime_conf: RuntimeConfig) -> dict[str, str]:
    """The ``spark.sparktf.*`` values of a SparkSession's conf (``spark.conf``: the Spark conf
    it started with, and what ``spark.conf.set`` changed since). Where none is set (the usual
    case) that is one py4j call, the listing of the keys set; else one lookup per key."""
    keys = _keys_set(runtime_conf)
    if keys is not None and "spark.sparktf." not in keys:
        return {}
    out = {}
    for s in TABLE:
        if s.conf:
            value = runtime_conf.get(f"spark.sparktf.{s.conf}", None)
            if value is not None:
                out[f"spark.sparktf.{s.conf}"] = value
    return out


def _keys_set(runtime_conf) -> str | None:
    """The keys the session's conf has set, as the JVM lists them in one string (None where
    that cannot be had). A ``spark.sparktf.`` key set is in it whatever the listing's format."""
    try:
        return str(runtime_conf._jconf.getAllAsJava().keySet().toString())
    except Exception:  # not a classic session's conf: look every key up
        return None


def markdown_table() -> str:
    """The settings as docs/reference/settings.md's table (bin/gen_docs.py writes it)."""
    rows = ["| setting | Spark conf | default | what it does |", "|---|---|---|---|"]
    for s in TABLE:
        name = "-" if s.arg is None else f"`{s.name}`"
        if s.arg == "feed":
            name += " (train(), inference())"
        elif s.arg == "train":
            name += " (train())"
        conf = f"`spark.sparktf.{s.conf}`" if s.conf else "-"
        if s.name == "num_executors":
            default = "every slot"
        elif s.name == "worker_restarts":
            default = f"{DEFAULT_WORKER_RESTARTS} with ps, else 0"
        elif isinstance(s.default, InputMode):
            default = f"InputMode.{s.default.name}"
        elif s.default is None:
            default = "off" if s.name.endswith(("_timeout", "_bytes")) else "none"
        else:
            default = repr(s.default)
        rows.append(f"| {name} | {conf} | {default} | {s.doc} |")
    return "\n".join(rows)
