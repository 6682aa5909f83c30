"""The barrier task: what runs in each Spark barrier task to hold one TensorFlow node.

``barrier_task(launch)`` returns the function given to ``rdd.barrier().mapPartitions`` (or a
barrier ``mapInArrow``). Its steps (:func:`_steps`):

1. reserve a port for the node's TF server (:mod:`sparktf.common.ports`) and publish
   ``host:port`` to the driver, which answers every task with every node's address once all
   have arrived (:func:`rendezvous`); the host is the executor address Spark reports in
   ``getTaskInfos()``;
2. build the cluster spec and TF_CONFIG (:mod:`sparktf.common.topology`);
3. start the node's supervisor (:mod:`sparktf.task.supervisor`) in a session of its own,
   forked from this Python worker when that is safe, which forks the TF process;
4. feed it the partition, InputMode.SPARK (:mod:`sparktf.task.feeder`), and wait for it; the
   port stays reserved until the node ends;
5. whatever happens: tell the driver why the task failed (typed, over the control channel),
   stop the supervisor, remove the node's directories. A node that failed and whose exit the
   supervisor reported to the driver ends the task without an error of its own: the driver
   fails the job with the node's error, and Spark logs no stack trace beside it.

The closure captures only the :class:`~sparktf.common.spec.LaunchSpec` (plain data).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sparktf.common import gpus as node_gpus
from sparktf.common import keepalive, messages, procs, protocol, topology
from sparktf.common.ports import PortReservation
from sparktf.common.protocol.sockets import wait_readable
from sparktf.common.spec import LaunchSpec, NodeSpec
from sparktf.errors import RendezvousTimeoutError, SparkJobError, SparkTFError
from sparktf.task import feeder
from sparktf.task.supervisor import EXIT_REPORTED


def rendezvous(
    launch: LaunchSpec, node: str, host: str, port: int, claim: node_gpus.Claim | None = None
) -> tuple[list[str], list[str] | None]:
    """Every node's ``host:port`` in rank order, through the driver's control channel: this
    task sends its node's reserved port and waits for the driver's answer, which comes once
    every task of the attempt has sent its own. (Spark's ``allGather`` would do the same but
    polls once a second.) Fails if the driver goes away or turns the attempt down, and
    (:class:`~sparktf.errors.RendezvousTimeoutError`) if no answer comes within
    ``rendezvous_timeout`` (the driver's reservation timeout: it has failed the attempt by
    then) or the driver's host stops answering (keepalive): the task then ends, and the port
    it reserved is released, instead of waiting until its executor exits.

    ``claim`` (:func:`sparktf.common.gpus.claim`): the node's GPUs and its executor's; the
    answer's second part is other GPUs for the node where another node of its host was given
    the same one (None: keep its own)."""
    deadline = time.monotonic() + launch.rendezvous_timeout
    try:
        chan = protocol.connect(launch.driver_address, launch.secret, launch.connect_timeout)
    except OSError as exc:
        driver = "{}:{}".format(*launch.driver_address)
        raise SparkJobError(
            f"sparktf: {node} on {host} cannot reach the driver's control server at "
            f"{driver}: {exc}. Set spark.sparktf.controlHost to an address of the driver "
            "(on Spark Connect: of the client's machine) that the executors reach"
        ) from None
    keepalive.watch_peer(chan.sock)  # a driver's host that falls silent: give up in 30 s
    try:
        chan.send(messages.hello(messages.TASK, node, host))
        extra = {"gpus": claim[0], "gpu_pool": claim[1]} if claim else {}
        chan.send(messages.make("address", port=port, **extra))
        reply = _addresses_reply(chan, node, launch.rendezvous_timeout, deadline)
        if reply.get("type") != "addresses" or len(reply["addresses"]) != launch.num_nodes:
            raise SparkJobError(f"{node}: unexpected rendezvous reply {reply!r}")
        return list(reply["addresses"]), (reply.get("gpus") or {}).get(node)
    finally:
        chan.close()


def _addresses_reply(chan: protocol.Channel, node: str, limit: float, deadline: float) -> dict:
    """The driver's answer at the rendezvous, by ``deadline``."""
    late = (
        f"{node}: the driver did not send every node's address within {limit:g}s "
        "(spark.sparktf.reservationTimeout)"
    )
    try:
        if not wait_readable(chan.sock, deadline - time.monotonic()):
            raise RendezvousTimeoutError(
                f"{late}: another node's task never started, or this executor cannot hear "
                "the driver (a network partition, a firewall, a paused driver); this task "
                "gives up and releases its reserved port"
            )
        return chan.recv()
    except TimeoutError as exc:  # keepalive's or TCP_USER_TIMEOUT's ETIMEDOUT
        raise RendezvousTimeoutError(
            f"{node}: the driver's host stopped answering during the rendezvous ({exc}): a "
            "network partition or a crashed driver; this task gives up and releases its "
            "reserved port"
        ) from exc
    except (OSError, EOFError) as exc:
        raise SparkJobError(
            f"{node}: the driver closed the rendezvous before every node's "
            f"address was known ({type(exc).__name__}); the attempt was "
            "stopped or failed"
        ) from exc


def node_cpus(task_cpus: int, executor_cores: int | None, addresses: list[str], host: str) -> int:
    """The threads a node's TensorFlow gets: its task's cpus, or its share of the executor's
    cores when its host runs fewer nodes than the executor has slots (a one-node job in
    ``local[N]`` gets all N cores instead of leaving N-1 idle). Nodes are counted per host, so
    two executors on one host each keep to their task's cpus."""
    task_cpus = max(1, task_cpus)
    if not executor_cores:
        return task_cpus
    on_host = sum(1 for a in addresses if topology.split_address(a)[0] == host)
    return max(task_cpus, executor_cores // max(1, on_host))


def task_gpus(ctx: Any) -> tuple[str, ...]:
    """The GPU addresses Spark assigned to this task (none without resource scheduling)."""
    try:
        gpu = (ctx.resources() or {}).get("gpu")
    except Exception:
        return ()
    return tuple(gpu.addresses) if gpu is not None else ()


def node_gpu_claim(
    job: str, assigned: tuple[str, ...], user_env: dict
) -> tuple[tuple[str, ...], node_gpus.Claim | None]:
    """What the node may see (Spark's addresses within the executor's
    ``CUDA_VISIBLE_DEVICES``), and what the driver is told of it at the rendezvous (which GPU
    each is, by nvidia-smi's UUIDs, to find two nodes of a host given one GPU)."""
    asked = bool(assigned) and job not in node_gpus.NO_GPU_JOBS and node_gpus.VAR not in user_env
    inventory = node_gpus.inventory() if asked else None
    gpus = node_gpus.task_assignment(job, assigned, os.environ, user_env, inventory)
    return gpus, node_gpus.claim(job, gpus, os.environ, user_env, inventory)


def build_node_spec(
    launch: LaunchSpec,
    rank: int,
    addresses: list[str],
    num_cpus: int,
    python_path: Iterable[str] = (),
    work_dir: str | None = None,
    feed_path: str | None = None,
    gpus: tuple[str, ...] = (),
) -> NodeSpec:
    """The node's spec once every node's address is known."""
    spec = topology.cluster_spec(launch.roles, addresses)
    host, port = topology.split_address(addresses[rank])
    role = launch.roles[rank]
    return NodeSpec(
        launch=launch,
        rank=rank,
        host=host,
        port=port,
        cluster_spec=spec,
        tf_config=topology.tf_config(spec, role),
        num_cpus=node_cpus(num_cpus, launch.executor_cores, addresses, host),
        python_path=tuple(p for p in python_path if p and os.path.exists(p)),
        work_dir=work_dir,
        feed_path=feed_path,
        gpus=tuple(gpus),
    )


def start_supervisor(spec: NodeSpec) -> Any:
    """Start the node's supervisor in a session of its own: forked from this Spark Python
    worker (no interpreter start-up: ~0.15 CPU-seconds a node), or, where forking is not
    safe (another thread in this process) or ``SPARKTF_SUPERVISOR_EXEC=1`` (in the
    executor's environment or ``run(env=...)``), as
    ``python -m sparktf.task.supervisor`` with ``spec`` on its stdin. Returns a ``Popen`` or
    a :class:`ForkedSupervisor` (the same ``poll``/``wait``/``terminate``/``kill``)."""
    # run(env=...) is in the environment the process starts with: TensorFlow's native
    # logging reads TF_CPP_MIN_LOG_LEVEL from there, not from a later os.environ change
    env = {
        **os.environ,
        **dict(spec.launch.env),
        **node_gpus.node_environment(spec.role.job, spec.gpus, os.environ, dict(spec.launch.env)),
        "PYTHONPATH": os.pathsep.join(spec.python_path),
    }
    if env.get("SPARKTF_SUPERVISOR_EXEC") != "1":
        preload()
        if _may_fork():
            return ForkedSupervisor.start(spec, env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparktf.task.supervisor", str(os.getpid())],
        stdin=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))
    proc.stdin.close()
    return proc


#: Native threads that are safe to fork past: jemalloc's background purger (pyarrow's
#: allocator starts it in a worker that has read Arrow data). jemalloc takes and resets all of
#: its locks around a fork (pthread_atfork), and the child starts its own purger when needed.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})
#: The ids of the native threads that :func:`preload`'s own imports started: numpy's OpenBLAS
#: pool where ``spark.task.cpus`` > 1 (Spark sets OMP_NUM_THREADS to it; with 1 there is no
#: pool). OpenBLAS stops its pool before a fork (pthread_atfork) and starts it again on use.
_PRELOADED_THREADS: dict[str, str | None] = {}  # thread id -> its name
_preloaded = False


def preload() -> None:
    """Import what every node process needs, once per Spark Python worker (Spark reuses them)
    before the fork, rather than after it in every supervisor and TF process of every job:
    the TF process's code, ``cloudpickle`` (main_fn's payload needs it: ~5 ms a node) and
    ``numpy`` (the feed's batches and TensorFlow both import it: ~55 ms a node)."""
    global _preloaded
    if _preloaded:
        return
    _preloaded = True
    before = _thread_ids()
    import cloudpickle  # noqa: F401

    import sparktf.node.process  # noqa: F401 - the TF process's code

    try:
        import numpy  # noqa: F401
    except ImportError:
        pass  # the node says so when it needs it
    _PRELOADED_THREADS.update({t: _thread_name(t) for t in _thread_ids() - before})


def _thread_ids() -> set[str]:
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


def _may_fork() -> bool:
    """Whether this process has no thread but this one and fork-safe native ones (a fork
    copies only the calling thread: a lock another thread holds would stay held in the child
    forever)."""
    if not hasattr(os, "fork"):
        return False
    try:
        me = str(threading.get_native_id())
        others = {t: _thread_name(t) for t in os.listdir("/proc/self/task") if t != me}
    except OSError:
        return threading.active_count() == 1
    # The preload's threads end at a fork (OpenBLAS starts new ones on use): forget those
    # gone, so that a later thread given the same id is not taken for one of them.
    for tid in [t for t in _PRELOADED_THREADS if t not in others]:
        del _PRELOADED_THREADS[tid]
    for tid, name in others.items():
        if name is None or name in FORK_SAFE_THREADS or _PRELOADED_THREADS.get(tid) == name:
            continue  # ended meanwhile, or known to be safe
        return False
    return threading.active_count() == 1


def _thread_name(tid: str) -> str | None:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None  # the thread ended meanwhile


class ForkedSupervisor(procs.ForkedChild):
    """The supervisor forked from this task's process. The child keeps stdout and stderr
    (Spark's worker output), gets ``/dev/null`` in place of every other descriptor it inherits
    (the worker's connection to the JVM must not outlive the task in it; a stale object
    closing its fd then closes a ``/dev/null``), never returns into the worker's code, and
    leaves by ``os._exit``."""

    @classmethod
    def start(cls, spec: NodeSpec, env: dict) -> ForkedSupervisor:
        from sparktf.task import supervisor

        preload()

        parent = os.getpid()
        _flush_output()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setsid()
                _to_devnull_but_output()
                os.environ.clear()
                os.environ.update(env)
                code = supervisor.serve(spec, parent)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                _flush_output()
                os._exit(code)
        return cls(pid)


def _flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _to_devnull_but_output() -> None:
    """In a forked child: stdin and every descriptor above stderr become ``/dev/null``."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in (1, 2) or fd == devnull:
            continue
        try:
            os.dup2(devnull, fd, inheritable=False)
        except OSError:
            pass  # the listing's own descriptor, closed already
    os.dup2(devnull, 0)
    os.close(devnull)


def stop_supervisor(proc: Any, grace: float) -> None:
    """SIGTERM (the supervisor then stops its whole tree), SIGKILL if it does not go."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace + 2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class NodeFailed(SparkTFError, RuntimeError):
    """The node's own process failed: it reported why to the driver itself."""


def barrier_task(
    launch: LaunchSpec, data_kind: str | None = None, arrow_schema: bytes | None = None
) -> Callable[[Iterable], Iterator]:
    """The barrier-stage function for ``launch``.

    ``data_kind`` is None (InputMode.TENSORFLOW: the partition is ignored), ``"pickle"`` (an
    RDD's elements), ``"pickled-batches"`` (Spark's own pickled lists of an RDD's elements,
    forwarded unopened) or ``"arrow"`` (a DataFrame's record batches, with ``arrow_schema``).
    Any failure of the task itself reaches the driver typed, over the control channel.
    """

    def run_barrier_task(partition: Iterable) -> Iterator:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        rank = ctx.partitionId()
        host, _ = topology.split_address(ctx.getTaskInfos()[rank].address)
        # Spark passes an iterator (iter() returns it as it is)
        yield from _steps(ctx, rank, host, iter(partition), launch, data_kind, arrow_schema)

    return run_barrier_task


def _steps(
    ctx,
    rank: int,
    host: str,
    partition: Iterator,
    launch: LaunchSpec,
    data_kind: str | None,
    arrow_schema: bytes | None,
) -> Iterator:
    """The steps of one node's barrier task: reserve its port, gather every address, start
    its supervisor, feed it, wait for it; whatever happens, stop it and remove its files."""
    node = launch.roles[rank]  # this task's node (its role and index)
    work_dir = tempfile.mkdtemp(prefix=f"sparktf-{launch.job_id}-{rank}-", dir=local_dir())
    # The socket gets a short private directory of its own: Spark's local dirs can be
    # longer than the 107 bytes an AF_UNIX path may have.
    sock_dir = tempfile.mkdtemp(prefix="sparktf-") if data_kind and node.trains else None
    feed_path = os.path.join(sock_dir, "feed.sock") if sock_dir else None
    listener = feeder.listen_unix(feed_path) if feed_path else None
    proc = None
    try:
        with PortReservation(
            ports=launch.port_range, what=f"{node.name}'s TF server"
        ) as reservation:
            proc = _start_node(ctx, rank, host, launch, reservation.port, work_dir, feed_path)
            if listener is not None and data_kind:  # (a listener only where data comes)
                yield from feeder.feed(listener, proc, partition, launch, data_kind, arrow_schema)
            code = proc.wait()
    except (NodeFailed, GeneratorExit):
        raise
    except BaseException as exc:
        # Before the node is stopped below: the driver must hear the cause before it sees
        # the node's supervisor go.
        report_task_error(
            launch,
            node.name,
            host,
            exc,
            "feed" if isinstance(exc, feeder.TaskFeedError) else "task",
        )
        raise
    finally:
        if proc is not None:
            stop_supervisor(proc, launch.stop_grace)  # generator closed or task failing
        if listener is not None:
            listener.close()
        for path in (work_dir, sock_dir):
            if path:
                shutil.rmtree(path, ignore_errors=True)
    if code == EXIT_REPORTED:
        return  # the driver has the node's exit and fails the job with its own error
    if code != 0:
        raise NodeFailed(
            f"sparktf node {node.name} on {host} {procs.describe_exit(code)}; "
            "the driver's error has the node's own message and output"
        )
    if data_kind is None:
        yield json.dumps({"rank": rank, "node": node.name, "host": host})


def _start_node(
    ctx,
    rank: int,
    host: str,
    launch: LaunchSpec,
    port: int,
    work_dir: str,
    feed_path: str | None,
) -> Any:
    """Gather every node's address (this one's: ``port``, and its GPUs claimed) and start
    this node's supervisor: its process."""
    node = launch.roles[rank]
    gpus, claim = node_gpu_claim(node.job, task_gpus(ctx), dict(launch.env))
    addresses, dealt = rendezvous(launch, node.name, host, port, claim)
    spec = build_node_spec(
        launch,
        rank,
        addresses,
        ctx.cpus(),
        sys.path,
        work_dir=work_dir,
        feed_path=feed_path,
        gpus=tuple(dealt) if dealt else gpus,
    )
    return start_supervisor(spec)


def local_dir() -> str | None:
    """Spark's scratch directory on this executor (spark.local.dir), if it has one."""
    for path in os.environ.get("SPARK_LOCAL_DIRS", "").split(","):
        if path and os.path.isdir(path):
            return path
    return None


def report_task_error(
    launch: LaunchSpec, node: str, host: str, exc: BaseException, where: str = "task"
) -> None:
    """Tell the driver why this node's barrier task is failing, typed, before Spark does."""
    try:
        chan = protocol.connect(launch.driver_address, launch.secret, timeout=5)
    except (OSError, protocol.AuthenticationError):
        return  # Spark's own error still carries the message
    try:
        chan.send(messages.hello(messages.TASK, node, host))
        chan.send(
            messages.error(
                where, exc, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            )
        )
    except OSError:
        pass
    finally:
        chan.close()
