"""The TF process reading an RDD partition from the Python worker's own socket to Spark
(:mod:`sparktf.node.feed.sparkstream`, :func:`sparktf.task.sparksocket.spark_data_socket`).

No Spark processes: the executor's side is a real socket whose other end writes what Spark's
JVM writes (``length(4) | pickled batch`` records, ``-1``, then ``-4``, the end of the
stream, which the worker must still find there), and the worker's side is PySpark's own
reader of it (``FramedSerializer.load_stream`` over a buffered reader, as ``daemon.py``
makes it)."""

import contextlib
import fcntl
import json
import os
import pickle
import socket
import struct
import threading
import time

import pytest

from sparktf.common import feedwire
from sparktf.common.spec import FeedConfig
from sparktf.errors import FeedError
from sparktf.node.feed import batches
from sparktf.node.feed.sparkstream import SparkRecords, wrap
from sparktf.node.feed.stream import EOF, Stream
from sparktf.task.sparksocket import leave_mid_data, spark_data_socket

END_OF_DATA, END_OF_STREAM = -1, -4


def data_section(elements, per_batch):
    """What the JVM writes for a partition: each batch's length and pickle, then -1."""
    out = b""
    for i in range(0, len(elements), per_batch):
        batch = pickle.dumps(elements[i : i + per_batch], protocol=5)
        out += struct.pack("!i", len(batch)) + batch
    return out + struct.pack("!i", END_OF_DATA)


def executor(payload, chunk=7_000, pause=0.0):
    """A connected socket pair; the 'executor' end writes ``payload`` and the end of the
    stream in uneven pieces from a thread. Returns (worker's end, executor's end)."""
    worker, jvm = socket.socketpair()

    def write():
        data = payload + struct.pack("!i", END_OF_STREAM)
        try:
            for i in range(0, len(data), chunk):
                jvm.sendall(data[i : i + chunk])
                if pause:
                    time.sleep(pause)
        except OSError:
            pass  # the test closed it: a reader that stopped early

    threading.Thread(target=write, daemon=True).start()
    return worker, jvm


@contextlib.contextmanager
def records_on_a_quiet_socket(send=b"", **kwargs):
    """SparkRecords over the worker's end of a socket pair whose other end sent only ``send``;
    yields (records, executor's end), and closes all three."""
    worker, jvm = socket.socketpair()
    jvm.sendall(send)
    records = SparkRecords(wrap(os.dup(worker.fileno())), b"", **kwargs)
    try:
        yield records, jvm
    finally:
        records.close()
        worker.close()
        jvm.close()


def elements_of(payloads):
    return [e for p in payloads for e in batches.decode(feedwire.MULTI, p, None)]


@pytest.mark.parametrize("head_bytes", [0, 2, 4, 5, 1000, 20_003])
def test_records_are_read_to_the_end_of_data_and_not_a_byte_further(head_bytes):
    """Whatever the worker had buffered (nothing, part of a length, part of a record), every
    element comes out, in frames of about the frame size, and the next 4 bytes on the socket
    are still the end of the stream, for the worker to read."""
    elements = [(i, "x" * (i % 50)) for i in range(3_000)]
    section = data_section(elements, per_batch=37)
    worker, jvm = executor(section[head_bytes:])
    try:
        records = SparkRecords(
            wrap(os.dup(worker.fileno())), section[:head_bytes], timeout=10, frame_bytes=16_384
        )
        payloads = []
        while (p := records.next_payload()) is not None:
            payloads.append(bytes(p))
        assert records.ended and records.next_payload() is None
        assert elements_of(payloads) == elements
        assert len(payloads) > 3 and all(len(p) < 16_384 + 2_000 for p in payloads)
        records.close()
        worker.settimeout(5)
        assert struct.unpack("!i", worker.recv(4, socket.MSG_WAITALL)) == (END_OF_STREAM,)
    finally:
        worker.close()
        jvm.close()


def test_a_record_larger_than_a_frame_is_one_frame_of_its_own():
    elements = [os.urandom(300_000), b"small", os.urandom(50_000)]
    section = data_section(elements, per_batch=1)
    worker, jvm = executor(section)
    try:
        records = SparkRecords(wrap(os.dup(worker.fileno())), b"", timeout=10, frame_bytes=1024)
        payloads = []
        while (p := records.next_payload()) is not None:
            payloads.append(bytes(p))
        assert elements_of(payloads) == elements
        records.close()
    finally:
        worker.close()
        jvm.close()


def test_the_passed_socket_keeps_its_blocking_mode_under_a_default_timeout():
    """The descriptor's O_NONBLOCK flag is shared with the worker's own descriptor: wrapping
    it must not change it, even where the node's code set a default socket timeout."""
    worker, jvm = socket.socketpair()
    before = fcntl.fcntl(worker.fileno(), fcntl.F_GETFL)
    socket.setdefaulttimeout(3.0)
    try:
        sock = wrap(os.dup(worker.fileno()))
        assert fcntl.fcntl(worker.fileno(), fcntl.F_GETFL) == before
        assert sock.gettimeout() is None
        sock.close()
    finally:
        socket.setdefaulttimeout(None)
        worker.close()
        jvm.close()


def test_no_data_from_spark_within_feed_timeout_is_an_error_that_says_so():
    with records_on_a_quiet_socket(timeout=0.3) as (records, _):
        start = time.monotonic()
        with pytest.raises(FeedError, match="feed_timeout=0.3s"):
            records.next_payload()
        assert time.monotonic() - start < 3


def test_a_terminated_feed_stops_waiting_on_spark_soon():
    stopped = threading.Event()
    with records_on_a_quiet_socket(timeout=60, stopped=stopped.is_set) as (records, _):
        threading.Timer(0.2, stopped.set).start()
        start = time.monotonic()
        with pytest.raises(FeedError, match="terminated"):
            records.next_payload()
        assert time.monotonic() - start < 2


@pytest.mark.parametrize("special", [-3, -2, -5])
def test_a_length_that_is_not_data_is_an_error(special):
    with records_on_a_quiet_socket(struct.pack("!i", special), timeout=5) as (records, _):
        with pytest.raises(FeedError, match=f"unexpected length {special}"):
            records.next_payload()


def test_a_socket_that_closes_mid_record_is_an_error():
    batch = pickle.dumps(list(range(100)))
    with records_on_a_quiet_socket(struct.pack("!i", len(batch)) + batch[:10], timeout=5) as (
        records,
        jvm,
    ):
        jvm.close()
        with pytest.raises(FeedError, match="closed in the middle"):
            records.next_payload()


# --------------------------------------------------------------------- the task's side
def pyspark_partition(sock):
    """The partition as PySpark's worker hands it to mapPartitions over pickled batches read
    unopened: NoOpSerializer's framed generator over ``os.fdopen(dup, "rb", 65536)``."""
    from pyspark.serializers import NoOpSerializer

    stream = os.fdopen(os.dup(sock.fileno()), "rb", 65536)
    return NoOpSerializer().load_stream(stream), stream


def test_the_task_takes_the_workers_buffered_bytes_and_leaves_the_socket_at_the_next_byte():
    elements = list(range(50_000))
    section = data_section(elements, per_batch=1_000)
    worker, jvm = executor(section, chunk=50_000, pause=0.05)
    partition, stream = pyspark_partition(worker)
    try:
        time.sleep(0.1)
        found = spark_data_socket(partition)
        assert found is not None and found.stream is stream and len(found.head) > 0
        assert section.startswith(found.head)
        rest = b""
        worker.settimeout(5)
        while len(rest) < len(section) - len(found.head) + 4:
            rest += worker.recv(1 << 20)
        assert found.head + rest == section + struct.pack("!i", END_OF_STREAM)
    finally:
        stream.close()
        worker.close()
        jvm.close()


def test_a_partition_left_in_the_middle_ends_the_worker_without_failing_its_task():
    """A TF process that stopped reading before the data's end (``terminate()``, ``main_fn``
    returning with rows unread) leaves Spark's socket in the middle of the partition, where
    the worker, after the task, reads the end of the stream. It must read there a value other
    than END_OF_STREAM (then it tells the JVM not to reuse it, and exits), not the rest of the
    data, and not fail: PySpark 4.0-4.2 read it with a bare ``read_int``, which raised on the
    closed reader this once was, crashing the worker and failing the task and the job
    (PySpark 4.2.1 is what Python 3.10 installs). Its writer to the JVM still works."""
    from pyspark.serializers import read_int, write_int

    section = data_section(list(range(50_000)), per_batch=1_000)
    worker, jvm = executor(section, chunk=50_000, pause=0.05)
    partition, stream = pyspark_partition(worker)
    outfile = os.fdopen(os.dup(worker.fileno()), "wb", 65536)  # as daemon.py makes both
    try:
        time.sleep(0.1)
        found = spark_data_socket(partition)
        assert found is not None
        leave_mid_data(found)
        assert read_int(stream) not in (END_OF_STREAM, *struct.unpack("!4i", section[4:20]))
        with pytest.raises(EOFError):
            read_int(stream)  # and nothing after it: the data stays unread
        write_int(END_OF_DATA, outfile)
        outfile.flush()
        jvm.settimeout(5)
        assert jvm.recv(16) == struct.pack("!i", END_OF_DATA)
    finally:
        for f in (stream, outfile, worker, jvm):
            f.close()


def test_the_task_forwards_the_frames_itself_when_the_socket_cannot_be_passed(monkeypatch):
    section = data_section(list(range(10)), per_batch=3)
    assert spark_data_socket(iter([b"a", b"b"])) is None  # not PySpark's generator

    def case(check):
        worker, jvm = executor(section)
        partition, stream = pyspark_partition(worker)
        try:
            time.sleep(0.1)
            check(partition)
        finally:
            stream.close()
            worker.close()
            jvm.close()

    def started(partition):
        next(partition)
        assert spark_data_socket(partition) is None  # already being read

    def all_buffered(partition):  # the whole section, its -1 too, is in the worker's buffer
        assert spark_data_socket(partition) is None
        assert len(list(partition)) == 4  # and the generator is untouched

    def switched_off(partition):
        monkeypatch.setenv("SPARKTF_FEED_SPARK_SOCKET", "0")
        assert spark_data_socket(partition) is None

    for check in (started, all_buffered, switched_off):
        case(check)


def test_a_file_is_not_passed_on(tmp_path):
    from pyspark.serializers import NoOpSerializer

    path = tmp_path / "data"
    path.write_bytes(data_section(list(range(10)), per_batch=3) * 100)
    with open(path, "rb") as stream:
        assert spark_data_socket(NoOpSerializer().load_stream(stream)) is None


# ------------------------------------------------------------- task and node together
def test_a_stream_reads_the_partition_from_the_socket_the_task_passes(tmp_path):
    """The whole hand-off over real sockets: the task's side sends the ``D`` frame with the
    worker's socket and buffered bytes; the node's Stream reads every row from there, tells
    the task it reached the end, and the worker's end of the stream is still on the socket."""
    elements = [(i, float(i)) for i in range(20_000)]
    section = data_section(elements, per_batch=500)
    worker, jvm = executor(section, chunk=30_000, pause=0.01)
    partition, worker_stream = pyspark_partition(worker)
    path = str(tmp_path / "feed.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    replies = []

    def task():
        conn, _ = listener.accept()
        found = spark_data_socket(partition)
        feedwire.send_frame_with_fd(conn, feedwire.SPARK_SOCKET, found.head, found.fd)
        while True:
            try:
                kind, _ = feedwire.recv_frame(conn)
            except (OSError, EOFError):
                return
            replies.append(kind)

    t = threading.Thread(target=task, daemon=True)
    t.start()
    stream = Stream(path, FeedConfig(feed_timeout=20), None, None)
    try:
        got = []
        while (item := stream.take()) is not EOF:
            assert not isinstance(item, BaseException), item
            got.extend(item)
        assert got == elements and stream.rows == len(elements)
        assert stream._spark is not None  # it did read the socket itself
    finally:
        stream.close()
    t.join(5)
    assert replies == [feedwire.END]
    assert worker_stream.read(4) == struct.pack("!i", END_OF_STREAM)  # what the worker reads
    for s in (worker_stream, worker, jvm, listener):
        s.close()


def test_a_descriptor_with_the_first_frame_is_received_and_not_inherited(tmp_path):
    a, b = socket.socketpair()
    other_r, other_w = os.pipe()
    try:
        feedwire.send_frame_with_fd(a, feedwire.SPARK_SOCKET, b"hello", other_w)
        kind, payload, fd = feedwire.recv_first_frame(b)
        assert (kind, bytes(payload)) == (feedwire.SPARK_SOCKET, b"hello")
        assert fd is not None and not os.get_inheritable(fd)
        os.write(fd, b"!")
        assert os.read(other_r, 1) == b"!"
        os.close(fd)
        feedwire.send_frame(a, feedwire.END, json.dumps({"rows": 1}).encode())
        assert feedwire.recv_first_frame(b)[2] is None  # no descriptor: None
    finally:
        for s in (a, b):
            s.close()
        os.close(other_r)
        os.close(other_w)


def test_a_terminated_feed_reads_no_further_even_while_data_flows():
    section = data_section(list(range(100_000)), per_batch=100)
    worker, jvm = executor(section, chunk=1 << 20)
    stopped = threading.Event()
    try:
        records = SparkRecords(
            wrap(os.dup(worker.fileno())), b"", timeout=10, stopped=stopped.is_set, frame_bytes=4096
        )
        assert records.next_payload() is not None
        stopped.set()
        with pytest.raises(FeedError, match="terminated"):
            records.next_payload()
        records.close()
    finally:
        worker.close()
        jvm.close()
