"""Driver-side checks made before any barrier stage starts; each problem says what to change.

Spark's own check for too few task slots waits about ten minutes before failing a barrier job,
and refuses barrier jobs under dynamic allocation only once they are submitted; these checks
answer at once.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import cloudpickle

from sparktf.common import topology
from sparktf.common.settings import Settings, session_conf
from sparktf.common.topology import NodeRole
from sparktf.driver import sparkfacts, yarnmemory
from sparktf.errors import ClusterStateError, ConfigError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark import SparkConf, SparkContext


def main_fn_params(main_fn: Any) -> tuple[int | None, str | None]:
    """How many arguments ``main_fn`` takes (1: ``ctx``; 2: ``args, ctx``), or a problem."""
    if not callable(main_fn):
        return (
            None,
            "main_fn must be a function main_fn(args, ctx) or main_fn(ctx)"
            + (
                f", or the path of a Python script on the driver: no file {main_fn!r} here"
                if isinstance(main_fn, (str, os.PathLike))
                else f", got {main_fn!r}"
            ),
        )
    lazy = _lazy_kind(main_fn)
    if lazy:
        kind, instead = lazy
        return None, (
            f"main_fn {getattr(main_fn, '__name__', main_fn)!r} is {kind}: calling it "
            f"runs none of its body, and sparktf calls main_fn as a plain function. "
            f"Use a plain def{instead}"
        )
    try:
        sig = inspect.signature(main_fn)
    except (TypeError, ValueError):
        return 2, None  # a builtin or C callable: trust it with (args, ctx)
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return (2 if len(required) <= 2 else None), (
            None if len(required) <= 2 else f"main_fn{sig} requires {len(required)} arguments"
        )
    if any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params):
        return None, f"main_fn{sig} has required keyword-only arguments; sparktf passes (args, ctx)"
    if len(required) <= 1 and len(positional) == 1:
        return 1, None
    if len(required) <= 2 and len(positional) >= 2:
        return 2, None
    return None, (
        f"main_fn{sig} must take (args, ctx) or (ctx); "
        f"it takes {len(positional)} positional argument(s), {len(required)} required"
    )


def _lazy_kind(fn: Any) -> tuple[str, str] | None:
    """What ``fn`` is, and what to write instead, when calling it only makes an object (a
    generator, a coroutine). ``inspect`` sees through partials and bound methods."""
    if inspect.isasyncgenfunction(fn):
        return "an async generator function", " that collects what it yields into its return value"
    if inspect.iscoroutinefunction(fn):
        return "a coroutine function (async def)", " that runs the coroutine: asyncio.run(...)"
    if inspect.isgeneratorfunction(fn):
        return "a generator function", " that returns its result (return a list of the values)"
    return None


def pickle_payload(main_fn: Callable, args: Any, n_params: int) -> tuple[bytes | None, str | None]:
    """cloudpickle ``(main_fn, args, n_params)`` for the nodes, or say what cannot be pickled."""
    try:
        cloudpickle.dumps(args)
    except Exception as exc:
        return None, (
            f"args cannot be pickled ({type(exc).__name__}: {exc}); pass plain data "
            "(an argparse.Namespace, a dict, numbers, strings), not open files, locks, "
            "sockets or a SparkContext"
        )
    try:
        return cloudpickle.dumps((main_fn, args, n_params)), None
    except Exception as exc:
        return None, (
            f"main_fn cannot be pickled ({type(exc).__name__}: {exc}); it must not "
            "capture a SparkContext, a SparkSession, locks or open files"
        )


def gpu_problems(master: str, conf: dict[str, str], gpus_per_node: int | None) -> list[str]:
    """What stops Spark from giving each node ``gpus_per_node`` GPUs."""
    if not gpus_per_node:
        return []
    if master == "local" or sparkfacts.LOCAL.match(master):
        return [
            f"gpus_per_node={gpus_per_node}: Spark's local mode ({master}) assigns no GPUs "
            "to tasks; use a cluster manager that schedules them (standalone, YARN, "
            "Kubernetes, or local-cluster[...] for a test), or leave gpus_per_node unset and "
            "let TensorFlow use the machine's GPUs"
        ]
    have = conf.get("spark.executor.resource.gpu.amount")
    if have is None:
        return [
            f"gpus_per_node={gpus_per_node}, but the executors have no GPUs configured: set "
            "spark.executor.resource.gpu.amount (GPUs per executor) and "
            "spark.executor.resource.gpu.discoveryScript (e.g. bin/gpu-discovery.sh)"
        ]
    if int(float(have)) < gpus_per_node:
        return [
            f"gpus_per_node={gpus_per_node}, but each executor has "
            f"spark.executor.resource.gpu.amount={have}: ask for at most {have}, or give "
            "the executors more"
        ]
    return []


def conf_problems(conf: SparkConf | Mapping[str, str]) -> list[str]:
    """Spark settings under which a barrier job cannot run (``conf``: a SparkConf or dict)."""
    problems = []
    if (conf.get("spark.dynamicAllocation.enabled") or "false").lower() == "true":
        problems.append(
            "spark.dynamicAllocation.enabled is true, and Spark refuses barrier "
            "jobs under dynamic allocation: submit with "
            "--conf spark.dynamicAllocation.enabled=false"
        )
    capped = conf.get("spark.executor.pyspark.memory")
    if capped:
        problems.append(
            f"spark.executor.pyspark.memory={capped} caps the address space (RLIMIT_AS, hard "
            "limit included) of every Spark Python worker, and TensorFlow runs in them "
            "(sparktf's nodes start from one; sparktf.predict loads it there): it does not load "
            "under such a cap (measured: its import fails under 1g, a small model's training "
            "under 2g), and the cap cannot be raised "
            "again. Remove spark.executor.pyspark.memory for this application (from "
            "spark-defaults.conf or the submit command) and give the TensorFlow processes "
            "their memory with spark.executor.memoryOverhead (YARN, Kubernetes) instead"
        )
    return problems


def memory_problems(conf: Mapping[str, str], settings: Settings) -> list[str]:
    """On YARN, executors' containers too small for their TensorFlow nodes: the problem
    (``spark.sparktf.yarnOverheadCheck=error``, the default), a warning logged (``warn``), or
    nothing (``off``). Checked before any slot is waited for: at once."""
    if settings.yarn_overhead_check == "off":
        return []
    problem = yarnmemory.overhead_problem(conf, settings.num_executors)
    if problem is None:
        return []
    if settings.yarn_overhead_check == "warn":
        log.warning("sparktf: %s", problem)
        return []
    return [problem]


def more_slots(master: str, wanted: int, conf: dict[str, str]) -> str:
    """How to give a Spark application of ``master`` ``wanted`` task slots."""
    task_cpus = int(conf.get("spark.task.cpus", "1"))
    if master == "local" or sparkfacts.LOCAL.match(master):
        return f"--master local[{wanted * task_cpus}]" + (
            f" (spark.task.cpus={task_cpus})" if task_cpus > 1 else ""
        )
    if sparkfacts.LOCAL_CLUSTER.match(master):
        return "more local-cluster[workers,cores,memory] workers or cores"
    if master.startswith(("yarn", "k8s://")):
        manager = "YARN" if master.startswith("yarn") else "Kubernetes"
        asked = conf.get("spark.executor.instances")
        asked = (
            f"spark.executor.instances={asked} were asked for"
            if asked
            else "set spark.executor.instances (--num-executors)"
        )
        return (
            f"more executors ({asked}; where fewer registered, {manager} lacked memory or "
            "vcores for them: make them smaller, spark.executor.memory and "
            "spark.executor.memoryOverhead, or the queue larger) or more cores each "
            "(spark.executor.cores)"
        )
    return "more executors or cores (--num-executors, --executor-cores, spark.cores.max)"


def spark_problems(
    sc: SparkContext, num_nodes: int | None, slot_timeout: float, conf: dict[str, str]
) -> tuple[list[str], int]:
    """Problems with the Spark side (``conf``: the context's settings), and the task slots
    found."""
    problems = conf_problems(conf)
    slots = sparkfacts.wait_for_slots(sc, num_nodes, slot_timeout, conf)
    if num_nodes is not None and num_nodes > slots:
        task_cpus = conf.get("spark.task.cpus", "1")
        promised = sparkfacts.expected_slots(str(sc.master), conf, os.cpu_count() or 1)
        waited = (
            ""
            if promised is not None and promised < num_nodes
            else f" after waiting {slot_timeout:g}s for executors"
        )
        problems.append(
            f"num_executors={num_nodes} needs {num_nodes} concurrent task slots, but the cluster "
            f"({sc.master}) has {slots} (executor cores / spark.task.cpus={task_cpus}){waited}: "
            f"use num_executors <= {slots}, or give Spark more: "
            f"{more_slots(str(sc.master), num_nodes, conf)}"
        )
    if slots < 1:
        problems.append(
            f"the cluster ({sc.master}) has no task slots after waiting "
            f"{slot_timeout:g}s; check that executors started (Spark UI, executor logs)"
        )
    return problems, slots


def framework_problems(settings: Settings) -> list[str]:
    """What ``framework="horovod"`` cannot run with: Horovod's ranks are all trainers, and a
    process that starts again cannot join a Gloo rendezvous its peers have finished."""
    if settings.framework != "horovod":
        return []
    problems = []
    if settings.num_ps:
        problems.append(
            f"framework='horovod' trains on every node: use num_ps=0, got {settings.num_ps}"
        )
    if settings.eval_node:
        problems.append("framework='horovod' trains on every node: use eval_node=False")
    if settings.worker_restarts:
        problems.append(
            "framework='horovod' cannot restart one node in place (its peers' Gloo context "
            f"is gone): use worker_restarts=0, got {settings.worker_restarts}; max_restarts "
            "restarts the whole cluster"
        )
    return problems


def check_run(
    sc: Any, main_fn: Callable, args: Any, **arguments: Any
) -> tuple[Any, Settings, dict[str, str], bytes, tuple[NodeRole, ...]]:
    """Every check of a ``sparktf.run(sc, main_fn, args, **arguments)`` call, before anything
    starts: ``ConfigError`` listing every problem at once. Returns the SparkContext (``sc``
    may be a SparkSession; a Spark Connect session gives a
    :class:`~sparktf.driver.sparkside.ConnectContext`), the resolved settings, the Spark conf,
    ``main_fn`` and ``args`` pickled, and the nodes' roles."""
    if sparkfacts.is_connect(sc):
        return _check_connect_run(sc, main_fn, args, **arguments)
    session = sc if hasattr(sc, "sparkContext") else None
    sc = getattr(sc, "sparkContext", sc)  # a SparkSession is welcome too
    if not callable(getattr(sc, "getConf", None)):
        raise ConfigError(
            f"sc must be a pyspark SparkContext (or a SparkSession), got {type(sc).__name__}"
        )
    if getattr(sc, "_jsc", None) is None:
        raise ClusterStateError(
            "the SparkContext is stopped: give sparktf.run() a running one "
            "(SparkSession.builder.getOrCreate() makes a new one)"
        )
    conf = sparkfacts.spark_conf(sc)
    session = session or sparkfacts.active_session(sc)
    if session is not None:  # spark.conf.set("spark.sparktf....") counts too
        conf.update(session_conf(session.conf))
    settings, problems, payload = _resolve(conf, main_fn, args, arguments)
    found, slots = spark_problems(sc, settings.num_executors, settings.slot_wait_timeout, conf)
    roles = _roles(str(sc.master), conf, settings, slots, problems + found, payload)
    assert payload is not None  # (a main_fn that does not pickle is one of the problems)
    return sc, settings, conf, payload, roles


def _resolve(
    conf: dict[str, str], main_fn: Callable, args: Any, arguments: dict[str, Any]
) -> tuple[Settings, list[str], bytes | None]:
    """The settings, the problems so far and the pickled ``main_fn``; raises at once where
    the settings themselves are bad (nothing about the Spark cluster is worth waiting for)."""
    problems: list[str] = []
    settings: Settings | None = None
    try:
        settings = Settings.resolve(conf, **arguments)
    except ConfigError as exc:
        problems = list(exc.problems)
    n_params, fn_problem = main_fn_params(main_fn)
    problems += [fn_problem] if fn_problem else []
    payload = None
    if n_params is not None:
        payload, pickle_problem = pickle_payload(main_fn, args, n_params)
        problems += [pickle_problem] if pickle_problem else []
    if settings is None:
        raise ConfigError.from_problems(problems)
    return settings, problems + memory_problems(conf, settings), payload


def _roles(
    master: str,
    conf: dict[str, str],
    settings: Settings,
    slots: int,
    problems: list[str],
    payload: bytes | None,
) -> tuple[NodeRole, ...]:
    """The nodes' roles once every problem is known (``slots``: the task slots counted);
    ``ConfigError`` listing the problems if there are any."""
    problems = problems + gpu_problems(master, conf, settings.gpus_per_node)
    problems += framework_problems(settings)
    num_nodes = settings.num_executors or slots
    if num_nodes >= 1:  # once, with the slot count known
        every_slot = None
        if settings.num_executors is None and isinstance(settings.num_ps, int):
            wanted = settings.num_ps + (2 if settings.eval_node is True else 1)
            every_slot = (master, more_slots(master, wanted, conf))
        problems += topology.topology_problems(
            num_nodes, settings.num_ps, settings.master_node, settings.eval_node, every_slot
        )
    if problems or payload is None:
        raise ConfigError.from_problems(problems)
    return topology.assign_roles(
        num_nodes, settings.num_ps, settings.master_node, settings.eval_node
    )


def _check_connect_run(
    session: Any, main_fn: Callable, args: Any, **arguments: Any
) -> tuple[Any, Settings, dict[str, str], bytes, tuple[NodeRole, ...]]:
    """:func:`check_run` on a Spark Connect session: the settings from ``spark.conf``, the
    task slots from the server's conf alone (no status tracker to count them), and the
    address the executors reach this client at (``spark.sparktf.controlHost``)."""
    from sparktf.driver.sparkside import ConnectContext

    if getattr(session, "is_stopped", False):
        raise ClusterStateError(
            "the Spark Connect session is stopped: give sparktf.run() a live one"
        )
    sc = ConnectContext(session)
    conf = sc.conf()
    settings, problems, payload = _resolve(conf, main_fn, args, arguments)
    problems += conf_problems(conf)
    slots = sparkfacts.connect_slots(sc.master, conf)
    if settings.num_executors and slots and settings.num_executors > slots:
        problems.append(
            f"num_executors={settings.num_executors}, but the Spark Connect server's conf "
            f"(master {sc.master!r}) offers {slots} task slots: a barrier stage needs one per "
            "node at once; ask for fewer nodes, or give the server's application more cores"
        )
    if settings.num_executors is None and not slots:
        problems.append(
            "sparktf.run on Spark Connect cannot count the task slots (the client has no "
            f"status tracker, and the server's conf (master {sc.master!r}) does not say): "
            "pass num_executors"
        )
    problems += gpu_problems(sc.master, conf, settings.gpus_per_node)
    roles = _roles(sc.master, conf, settings, slots or 0, problems, payload)
    conf["spark.sparktf.controlHost"] = settings.control_host or sc.client_address()
    assert payload is not None
    return sc, settings, conf, payload, roles
