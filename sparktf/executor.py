"""What runs in each Spark barrier task: one TensorFlow node.

``node_task(launch)`` returns the function given to ``rdd.barrier().mapPartitions``. In the
task it:

1. reserves a port for the node's TF server (:mod:`sparktf.ports`) and publishes
   ``host:port`` with ``BarrierTaskContext.allGather``; the host is the executor address Spark
   reports in ``getTaskInfos()``;
2. builds the cluster spec and TF_CONFIG (:mod:`sparktf.topology`);
3. starts the node's supervisor (:mod:`sparktf.supervisor`) in a session of its own, which
   starts the TF process, and waits for it; the port stays reserved until the node ends.

The closure captures only the :class:`~sparktf.spec.LaunchSpec` (plain data).
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from typing import Callable, Iterable, Iterator

from sparktf import feedwire, protocol, topology
from sparktf.ports import PortReservation
from sparktf.procs import describe_exit
from sparktf.spec import LaunchSpec, NodeSpec


def gather_addresses(published: Iterable[str], num_nodes: int) -> list[str]:
    """Order the ``allGather`` messages by rank into ``host:port`` addresses."""
    by_rank = {}
    for text in published:
        info = json.loads(text)
        by_rank[info["rank"]] = topology.format_address(info["host"], info["port"])
    if sorted(by_rank) != list(range(num_nodes)):
        raise RuntimeError(f"sparktf: expected ranks 0..{num_nodes - 1}, got {sorted(by_rank)}")
    return [by_rank[r] for r in range(num_nodes)]


def build_node_spec(launch: LaunchSpec, rank: int, addresses: list[str], num_cpus: int,
                    python_path: Iterable[str] = (), work_dir: str | None = None,
                    feed_path: str | None = None) -> NodeSpec:
    """The node's spec once every node's address is known."""
    spec = topology.cluster_spec(launch.roles, addresses)
    host, port = topology.split_address(addresses[rank])
    return NodeSpec(
        launch=launch, rank=rank, host=host, port=port, cluster_spec=spec,
        tf_config=topology.tf_config(spec, launch.roles[rank]), num_cpus=max(1, num_cpus),
        python_path=tuple(p for p in python_path if p and os.path.exists(p)),
        work_dir=work_dir, feed_path=feed_path)


def start_supervisor(spec: NodeSpec) -> subprocess.Popen:
    """Start the node's supervisor (its own session) with ``spec`` on its stdin."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparktf.supervisor", str(os.getpid())],
        stdin=subprocess.PIPE, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(spec.python_path)})
    assert proc.stdin is not None
    proc.stdin.write(pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))
    proc.stdin.close()
    return proc


def stop_supervisor(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM (the supervisor then stops its whole tree), SIGKILL if it does not go."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace + 2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def node_task(launch: LaunchSpec, data_kind: str | None = None,
              arrow_schema: bytes | None = None) -> Callable[[Iterator], Iterator]:
    """The barrier-stage function for ``launch``.

    ``data_kind`` is None (InputMode.TENSORFLOW: the partition is ignored), ``"pickle"`` (an
    RDD's elements), ``"pickled-batches"`` (Spark's own pickled lists of an RDD's elements,
    forwarded unopened) or ``"arrow"`` (a DataFrame's record batches, with ``arrow_schema``).
    """

    def run_node(partition: Iterator) -> Iterator:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        rank = ctx.partitionId()
        host, _ = topology.split_address(ctx.getTaskInfos()[rank].address)
        role = launch.roles[rank]
        work_dir = tempfile.mkdtemp(prefix=f"sparktf-{launch.job_id}-{rank}-", dir=local_dir())
        # The socket gets a short private directory of its own: Spark's local dirs can be
        # longer than the 107 bytes an AF_UNIX path may have.
        sock_dir = tempfile.mkdtemp(prefix="sparktf-") if data_kind and role.trains else None
        feed_path = os.path.join(sock_dir, "feed.sock") if sock_dir else None
        listener = _listen_unix(feed_path) if feed_path else None
        proc = None
        try:
            with PortReservation() as reservation:
                published = ctx.allGather(
                    json.dumps({"rank": rank, "host": host, "port": reservation.port}))
                addresses = gather_addresses(published, launch.num_nodes)
                spec = build_node_spec(launch, rank, addresses, ctx.cpus(), sys.path,
                                       work_dir=work_dir, feed_path=feed_path)
                proc = start_supervisor(spec)
                if listener is not None:
                    try:
                        yield from _feed(listener, proc, partition, launch, data_kind,
                                         arrow_schema)
                    except Exception as exc:
                        report_task_error(spec, exc)
                        raise
                code = proc.wait()
        finally:
            if proc is not None:
                stop_supervisor(proc, launch.stop_grace)  # generator closed or task failing
            if listener is not None:
                listener.close()
            for path in (work_dir, sock_dir):
                if path:
                    shutil.rmtree(path, ignore_errors=True)
        if code != 0:
            raise RuntimeError(
                f"sparktf node {spec.name} on {host} {describe_exit(code)}; "
                "the driver's error has the node's own message and output")
        if data_kind is None:
            yield json.dumps({"rank": rank, "node": spec.name, "host": host})

    return run_node


def local_dir() -> str | None:
    """Spark's scratch directory on this executor (spark.local.dir), if it has one."""
    for path in os.environ.get("SPARK_LOCAL_DIRS", "").split(","):
        if path and os.path.isdir(path):
            return path
    return None


def report_task_error(spec: NodeSpec, exc: BaseException) -> None:
    """Tell the driver why this node's barrier task is failing, before Spark does."""
    try:
        chan = protocol.connect(spec.launch.driver_address, spec.launch.secret, timeout=5)
        chan.send({"type": "hello", "role": "task", "node": spec.name, "host": spec.host})
        chan.send({"type": "error", "where": "feed", "exc_type": type(exc).__name__,
                   "message": str(exc), "traceback": ""})
        chan.close()
    except (OSError, protocol.AuthenticationError):
        pass  # Spark's own error still carries the message


def _listen_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)  # inside a 0700 directory: only this user's processes can connect
    sock.listen(1)
    return sock


def _accept(listener: socket.socket, proc: subprocess.Popen,
            timeout: float) -> socket.socket | None:
    """The TF process's feed connection (``timeout`` then bounds each send); None if the node
    ends without asking for data. A main_fn may do other work first: no limit on the wait."""
    while proc.poll() is None:
        ready, _, _ = select.select([listener], [], [], 0.2)
        if ready:
            conn, _ = listener.accept()
            conn.settimeout(timeout)
            feedwire.tune(conn)
            return conn
    return None


def _feed(listener, proc, partition, launch: LaunchSpec, kind: str, arrow_schema):
    """Stream the partition to the TF process; yield inference outputs as they come back."""
    timeout = launch.feed.feed_timeout
    conn = _accept(listener, proc, timeout)
    if conn is None:
        return
    results: queue.Queue = queue.Queue()
    stop = threading.Event()
    threading.Thread(target=_read_replies, args=(conn, results, stop), daemon=True).start()
    rows = 0
    try:
        if kind == "arrow":
            feedwire.send_frame(conn, feedwire.SCHEMA, arrow_schema)
            for batch in partition:
                if stop.is_set():
                    break
                feedwire.send_frame(conn, feedwire.ARROW, batch.serialize())
                rows += batch.num_rows
        elif kind == "pickled-batches":
            rows = -1  # unknown here: the TF process counts them as it unpickles
            for parts in _packs(partition, feedwire.MULTI_BYTES):
                if stop.is_set():
                    break
                feedwire.send_parts(conn, parts)
        else:
            for chunk in _chunks(partition, launch.feed.chunk_rows):
                if stop.is_set():
                    break
                feedwire.send_frame(conn, feedwire.PICKLED,
                                    pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL))
                rows += len(chunk)
        if not stop.is_set():
            feedwire.send_frame(conn, feedwire.END, json.dumps({"rows": rows}).encode())
    except socket.timeout:
        raise RuntimeError(f"sparktf: the TF process took no data for feed_timeout="
                           f"{timeout:g}s") from None
    except (BrokenPipeError, ConnectionResetError):
        pass  # the TF process stopped reading (terminate() or main_fn returned): early stop
    if launch.train_mode is False:
        produced = 0
        for item in _results(results, proc, kind, launch):
            produced += item.num_rows if kind == "arrow" else 1
            yield item
        if rows >= 0 and produced != rows and proc.wait() == 0:
            raise RuntimeError(f"sparktf: main_fn sent {produced} outputs for {rows} input rows; "
                               "call feed.batch_results() with one output per row it read")
    conn.close()


def _read_replies(conn: socket.socket, results: queue.Queue, stop: threading.Event) -> None:
    """Replies from the TF process. Training sends none for hours: wait without a time limit,
    and let the socket's feed_timeout apply only inside a frame."""
    try:
        while True:
            while not select.select([conn], [], [], 1.0)[0]:
                pass
            kind, payload = feedwire.recv_frame(conn)
            if kind == feedwire.TERMINATE:
                stop.set()
            elif kind == feedwire.RESULT:
                results.put(pickle.loads(payload))
            elif kind == feedwire.RESULTS_END:
                break
    except (OSError, EOFError):
        pass
    stop.set()
    results.put(None)


def _results(results: queue.Queue, proc, kind: str, launch: LaunchSpec):
    """Inference outputs in order, until the TF process says it has sent them all."""
    schema = None
    if kind == "arrow":
        import pyarrow as pa

        schema = pa.ipc.read_schema(pa.py_buffer(launch.output_schema))
    while True:
        try:
            batch = results.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None and results.empty():
                return
            continue
        if batch is None:
            return
        if kind == "arrow":
            yield _to_record_batch(batch, schema)
        else:
            yield from batch


def _to_record_batch(values: list, schema):
    import pyarrow as pa

    if len(schema) == 1 and not (values and isinstance(values[0], dict)):
        return pa.RecordBatch.from_arrays([pa.array(values, type=schema[0].type)],
                                          schema=schema)
    rows = [v if isinstance(v, dict) else dict(zip(schema.names, v)) for v in values]
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def _packs(frames: Iterable[bytes], size: int) -> Iterator[list]:
    """Group byte strings into lists of about ``size`` bytes."""
    pack, total = [], 0
    for frame in frames:
        pack.append(frame)
        total += len(frame)
        if total >= size:
            yield pack
            pack, total = [], 0
    if pack:
        yield pack


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
