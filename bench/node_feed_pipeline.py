"""The TF process's RDD feed pipeline alone, against PySpark's own iteration of the same bytes.

    python3 bench/node_feed_pipeline.py [--rows 150000] [--per-batch 350] [--repeats 5]

No Spark processes, so no JVM or second node shares the cores: what a node's reading code
costs per row, apart from the machine it shares in ``bench/feed_throughput.py``. A forked
writer process plays the executor's JVM: it writes a cached RDD partition of MNIST-sized rows
(784 float32 and an int label) as Spark sends it to a Python worker, ``length | pickled
batch`` records of ``--per-batch`` rows (PySpark's batching reaches about 350 such rows), the
``-1`` that ends the data and the ``-4`` that ends the stream, into a socket. Then:

(a) PySpark: the worker's iteration of the partition, ``AutoBatchedSerializer(
    CloudPickleSerializer()).load_stream`` over a buffered reader of the socket (as
    ``daemon.py`` opens it), every element touched: what the barrier ``mapPartitions`` of
    feed_throughput's (c) and (g) does;
(b) sparktf: the barrier task's hand-off of that socket (``spark_data_socket``, the ``D``
    frame) and the node's ``DataFeed`` reading it to its end (sparkstream, Stream's
    read-ahead thread, the unpickling), the consumer taking ``next_batch(1024)`` until
    ``should_stop()``. Equalization is off: it needs a driver (its cost is in
    feed_throughput's (h), timed with and without).

Each figure: rows per second from the first read to the last row, and CPU seconds (user +
system of this process: the reader's side; the writer is another process) per 100k rows.
"""

import argparse
import os
import resource
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

END_OF_DATA, END_OF_STREAM = -1, -4


def data_section(rows: int, per_batch: int) -> bytes:
    import numpy as np
    from pyspark.serializers import CloudPickleSerializer

    rng = np.random.RandomState(0)
    pool = [(rng.rand(784).astype("float32"), i % 10) for i in range(2000)]
    ser = CloudPickleSerializer()
    parts = []
    for start in range(0, rows, per_batch):
        batch = ser.dumps([pool[i % len(pool)] for i in range(start, min(rows, start + per_batch))])
        parts += [struct.pack("!i", len(batch)), batch]
    return b"".join(parts) + struct.pack("!ii", END_OF_DATA, END_OF_STREAM)


def executor(section: bytes):
    """The worker's end of a socket pair whose other end a forked process fills with
    ``section``, as the executor's JVM does; returns (socket, pid)."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            ours.close()
            theirs.sendall(section)
            theirs.recv(1)  # until the reader closes its end
        except OSError:
            code = 1
        finally:
            os._exit(code)
    theirs.close()
    return ours, pid


def cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def pyspark_iteration(section: bytes, rows: int) -> tuple[float, float]:
    from pyspark.serializers import AutoBatchedSerializer, CloudPickleSerializer

    sock, pid = executor(section)
    stream = os.fdopen(os.dup(sock.fileno()), "rb", 65536)
    start, cpu0, n = time.perf_counter(), cpu(), 0
    for _ in AutoBatchedSerializer(CloudPickleSerializer()).load_stream(stream):
        n += 1
    secs, used = time.perf_counter() - start, cpu() - cpu0
    assert n == rows, n
    stream.close()
    sock.close()
    os.waitpid(pid, 0)
    return secs, used


def sparktf_node(section: bytes, rows: int) -> tuple[float, float]:
    from pyspark.serializers import NoOpSerializer

    from sparktf.common import feedwire
    from sparktf.common.spec import FeedConfig
    from sparktf.node.feed import DataFeed
    from sparktf.node.feed.equalize import FeedBound
    from sparktf.task.sparksocket import spark_data_socket

    sock, pid = executor(section)
    stream = os.fdopen(os.dup(sock.fileno()), "rb", 65536)
    partition = NoOpSerializer().load_stream(stream)  # a raw_pickled_batches partition
    work = tempfile.mkdtemp(prefix="sparktf-bench-")
    path = os.path.join(work, "feed.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    replies = []

    def task():  # the barrier task's side: hand the socket over, then hear the end
        conn, _ = listener.accept()
        found = spark_data_socket(partition)
        assert found is not None, "the partition's socket could not be passed"
        feedwire.send_frame_with_fd(conn, feedwire.SPARK_SOCKET, found.head, found.fd)
        try:
            while True:
                replies.append(feedwire.recv_frame(conn)[0])
        except (OSError, EOFError):
            conn.close()

    thread = threading.Thread(target=task, daemon=True)
    thread.start()
    start, cpu0 = time.perf_counter(), cpu()
    feed = DataFeed(
        path,
        train_mode=True,
        input_mapping=None,
        config=FeedConfig(feed_timeout=60),
        spool_dir=work,
        report=lambda message: None,
        bound=FeedBound(),
    )
    n = 0
    while not feed.should_stop():
        n += len(feed.next_batch(1024))
    secs, used = time.perf_counter() - start, cpu() - cpu0
    feed.close()
    thread.join(5)
    assert n == rows and replies[:1] == [feedwire.END], (n, replies)
    stream.close()
    sock.close()
    listener.close()
    os.waitpid(pid, 0)
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    os.rmdir(work)
    return secs, used


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=150000)
    p.add_argument("--per-batch", type=int, default=350)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    section = data_section(a.rows, a.per_batch)
    print(
        f"{a.rows} rows ({len(section) / 1e6:.0f} MB as Spark sends them, "
        f"{a.per_batch} rows a batch), best of {a.repeats}, alternating"
    )
    runs = {"a": [], "b": []}
    for _ in range(a.repeats):
        runs["a"].append(pyspark_iteration(section, a.rows))
        runs["b"].append(sparktf_node(section, a.rows))
    names = {
        "a": "(a) PySpark's iteration of the partition",
        "b": "(b) sparktf's node: hand-off, DataFeed, next_batch(1024)",
    }
    print("\n| | rows/s | CPU-s per 100k rows | vs (a) |")
    print("|---|---|---|---|")
    best = {k: min(v) for k, v in runs.items()}
    for k in "ab":
        secs, used = best[k]
        print(
            f"| {names[k]} | {a.rows / secs:,.0f} | {used * 1e5 / a.rows:.3f} | "
            f"{best['a'][0] / secs:.2f} |"
        )
    if a.repeats > 1:
        ratios = sorted(x[0] / y[0] for x, y in zip(runs["a"], runs["b"]))
        cpus = sorted(y[1] / x[1] for x, y in zip(runs["a"], runs["b"]))
        print(
            f"\n(b) against (a) within each repeat: rate {statistics.median(ratios):.2f} "
            f"({ratios[0]:.2f}-{ratios[-1]:.2f}), CPU {statistics.median(cpus):.2f} x "
            f"({cpus[0]:.2f}-{cpus[-1]:.2f})"
        )


if __name__ == "__main__":
    main()
