"""The barrier task's feeder (InputMode.SPARK): its partition to the TF process over a Unix
socket (:mod:`sparktf.common.feedwire`), and, for inference, the TF process's outputs back as the
stage's output, interleaved with the sending and bounded.

Runs in the Spark Python worker; never imports pyspark or tensorflow itself (the partition's
iterator and Arrow batches come from Spark; pyarrow is imported where outputs are built).
"""

from __future__ import annotations

import inspect
import io
import itertools
import json
import os
import pickle
import queue
import socket
import stat as statmod
import struct
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from sparktf.common import feedwire, protocol
from sparktf.common.spec import LaunchSpec
from sparktf.errors import FeedError

#: Inference: output frames the task holds at most while it feeds (each one batch's outputs).
RESULTS_AHEAD = 4


class TaskFeedError(FeedError):
    """Feeding the partition to the TF process, or taking its outputs back, failed."""


def listen_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)  # inside a 0700 directory: only this user's processes can connect
    sock.listen(1)
    return sock


def _accept(
    listener: socket.socket, proc: subprocess.Popen, timeout: float
) -> socket.socket | None:
    """The TF process's feed connection (``timeout`` then bounds each send); None if the node
    ends without asking for data. A main_fn may do other work first: no limit on the wait."""
    while proc.poll() is None:
        if protocol.wait_readable(listener, 0.2):
            conn, _ = listener.accept()
            conn.settimeout(timeout)
            feedwire.tune(conn)
            return conn
    return None


def _frames(
    partition: Iterator, kind: str, arrow_schema: bytes | None, chunk_rows: int, counted: list
) -> Iterator[list]:
    """The partition as feed frames (each a list of buffers); ``counted[0]`` counts the rows
    (-1 for Spark's pickled batches, which are forwarded unopened: the TF process counts)."""
    if kind == "arrow":
        # The batches' own schema, as Spark's JVM wrote them; the driver's (the same types)
        # only for a partition without any batch.
        partition = iter(partition)
        first = next(partition, None)
        yield feedwire.frame(
            feedwire.SCHEMA,
            arrow_schema if first is None else first.schema.serialize().to_pybytes(),
        )
        messages = _ArrowMessages()
        for batch in [] if first is None else itertools.chain([first], partition):
            counted[0] += batch.num_rows
            yield feedwire.parts_frame(feedwire.ARROW, messages.of(batch))
    elif kind == "pickled-batches":
        counted[0] = -1
        for parts in _packs(partition, feedwire.MULTI_BYTES):
            yield feedwire.multi_frame(parts)
    else:
        for chunk in _chunks(partition, chunk_rows):
            counted[0] += len(chunk)
            yield feedwire.frame(
                feedwire.PICKLED, pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)
            )


def feed(listener, proc, partition, launch: LaunchSpec, kind: str, arrow_schema):
    """Stream the partition to the TF process; for inference, yield its outputs as they come
    back, interleaved with the sending, so neither side can block the other and at most
    ``RESULTS_AHEAD`` output frames wait in this task."""
    timeout = launch.feed.feed_timeout
    conn = _accept(listener, proc, timeout)
    inference = launch.train_mode is False
    if conn is None:
        if inference and proc.wait() == 0 and next(iter(partition), None) is not None:
            raise TaskFeedError(
                "main_fn returned without reading its rows: inference needs "
                "ctx.get_data_feed(train_mode=False) and one output per row"
            )
        return
    results: queue.Queue = queue.Queue(maxsize=RESULTS_AHEAD)
    stop = threading.Event()
    reader = _ReplyReader(conn, results, stop)
    counted, produced = [0], 0
    spark = None
    try:
        if kind == "pickled-batches":
            spark = spark_data_socket(partition)
        if spark is not None:
            feedwire.send_frame_with_fd(conn, feedwire.SPARK_SOCKET, spark.head, spark.fd)
            counted[0] = -1  # the TF process counts the rows
            while not inference and proc.poll() is None and not reader.finished.wait(0.2):
                pass  # training: the TF process reads, and goes on until main_fn returns
        else:
            frames = _frames(partition, kind, arrow_schema, launch.feed.chunk_rows, counted)
            for buffers in _then_end(frames, counted):
                if stop.is_set():
                    break
                if not inference:
                    feedwire.send_buffers(conn, buffers)
                    continue
                for chunk in _send_draining(conn, buffers, results, reader, proc, launch):
                    produced += len(chunk)
                    yield from _emit(chunk, kind, launch)
        if reader.idle:
            raise TimeoutError()
    except TimeoutError:
        raise _took_no_data(timeout) from None
    except (BrokenPipeError, ConnectionResetError):
        pass  # the TF process stopped reading (terminate() or main_fn returned): early stop
    try:
        if inference:
            for chunk in _results(results, reader, proc):
                produced += len(chunk)
                yield from _emit(chunk, kind, launch)
            if reader.idle:
                raise _took_no_data(timeout)
            _check_outputs(produced, counted[0], reader, proc)
    finally:
        reader.close()
        conn.close()
        if spark is not None and not reader.spark_ended:
            leave_mid_data(spark)


def _took_no_data(timeout: float) -> TaskFeedError:
    return TaskFeedError(f"the TF process took no data for feed_timeout={timeout:g}s")


class SparkDataSocket(NamedTuple):
    fd: int  # the worker's socket to the executor
    head: bytes  # the partition's first bytes, already read off it by the worker's reader
    stream: io.BufferedReader  # the worker's reader of it


def spark_data_socket(partition) -> SparkDataSocket | None:
    """The socket this Python worker reads the partition from, and the bytes of it the
    worker's reader has already buffered, taken out of that buffer: from there on the TF
    process can read the rest of the partition itself (:mod:`sparktf.node.feed.sparkstream`),
    and the task no longer reads and resends every byte. Only while the partition is what
    PySpark hands a ``mapPartitions`` over its pickled batches, unstarted: its framed
    serializer's generator over a buffered reader of a socket. None otherwise (and with
    ``SPARKTF_FEED_SPARK_SOCKET=0`` in the executors' environment): the task forwards the
    frames itself.

    The task must not touch the partition afterwards. If the TF process does not say that
    it read the data to its end (and so stopped there, where the worker reads on), the
    task takes the socket away from the worker's reader (:func:`leave_mid_data`): the
    worker then ends after this task (Spark starts another) instead of reading the socket
    from the middle of the data.
    """
    if os.environ.get("SPARKTF_FEED_SPARK_SOCKET", "1") == "0":
        return None
    if (
        not inspect.isgenerator(partition)
        or partition.gi_code.co_name != "load_stream"
        or inspect.getgeneratorstate(partition) != inspect.GEN_CREATED
    ):
        return None
    stream = partition.gi_frame.f_locals.get("stream")
    if type(stream) is not io.BufferedReader:
        return None
    try:
        fd = stream.fileno()
        if not statmod.S_ISSOCK(os.fstat(fd).st_mode):
            return None
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    head = stream.peek()  # what is buffered (or, with nothing buffered, one read's worth)
    if not head or _data_ends_within(head):
        return None  # all of it is here: no socket to read, and the worker's end follows it
    return SparkDataSocket(fd, stream.read(len(head)), stream)  # the buffer, exactly


#: What the worker reads, after a task that left its partition unread, where it checks the
#: end of the stream: Spark's END_OF_DATA_SECTION, anything but END_OF_STREAM (-4).
_NOT_THE_END = struct.pack("!i", -1)


def leave_mid_data(spark: SparkDataSocket) -> None:
    """The TF process stopped before the data's end: Spark's socket is in the middle of the
    partition, and after this task the worker reads the end of the stream from it. Its reader's
    descriptor becomes a pipe that holds one value other than END_OF_STREAM, then ends: the
    worker reads that, tells the JVM not to reuse it, and exits (PySpark 4.0 to 4.3 all do so),
    instead of reading the rest of the data as the stream's end. Its writer, a descriptor of its
    own, still reaches the JVM. (Closing the reader instead fails the task on PySpark 4.0-4.2,
    whose unguarded read of a closed file crashes the worker.)"""
    try:
        fd = spark.stream.fileno()
        r, w = os.pipe()
    except (OSError, ValueError):
        spark.stream.close()
        return
    try:
        os.write(w, _NOT_THE_END)
        os.dup2(r, fd, inheritable=False)
    except OSError:
        spark.stream.close()
    finally:
        os.close(r)
        os.close(w)


def _data_ends_within(head: bytes) -> bool:
    """Whether ``head``, the start of a data section of ``length(4) | bytes`` records, holds
    the length that ends it (or any other negative one: not for the TF process to read)."""
    pos = 0
    while pos + 4 <= len(head):
        size = int.from_bytes(head[pos : pos + 4], "big", signed=True)
        if size < 0:
            return True
        pos += 4 + size
    return False


class _ArrowMessages:
    """Record batches as Arrow IPC messages, each a list of buffers: the body buffers are the
    batch's own, not copied into one buffer as ``batch.serialize()`` does (a tenth of a
    second per 470 MB fed), and ``sendmsg`` gathers them. The bytes are the same as
    ``serialize()``'s; a batch whose message is not (pyarrow would have to write dictionaries
    before it) is serialized instead."""

    closed = False  # the pyarrow output sink protocol: a file-like object that stays open

    def __init__(self) -> None:
        self._parts: list = []
        self._writer = None

    def write(self, data) -> int:
        self._parts.append(data)
        return memoryview(data).nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def of(self, batch) -> list:
        import pyarrow as pa

        if self._writer is None:
            self._writer = pa.ipc.new_stream(self, batch.schema)
            self._writer.write_batch(batch.slice(0, 0))  # the stream's schema goes first
        self._parts = []
        try:
            self._writer.write_batch(batch)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return [batch.serialize()]  # not the stream's schema: serialize() says if bad
        parts, self._parts = self._parts, []
        if sum(memoryview(p).nbytes for p in parts) != pa.ipc.get_record_batch_size(batch):
            return [batch.serialize()]
        return parts


def _then_end(frames: Iterator[list], counted: list) -> Iterator[list]:
    """The partition's frames, then its end (which carries the row count)."""
    yield from frames
    yield feedwire.frame(feedwire.END, json.dumps({"rows": counted[0]}).encode())


def _emit(chunk: list, kind: str, launch: LaunchSpec) -> Iterator:
    """One batch's outputs as the stage yields them: a record batch, or the elements."""
    if kind == "arrow":
        yield _to_record_batch(chunk, _output_schema(launch))
    else:
        yield from chunk


def _check_outputs(produced: int, rows: int, reader: _ReplyReader, proc) -> None:
    """Inference must answer every row: never return short (or long) output silently."""
    if proc.wait() != 0:
        return  # the node failed and says why itself
    expected = rows if rows >= 0 else reader.rows_received
    if expected is None:
        raise TaskFeedError(
            f"the TF process ended without finishing its outputs ({produced} "
            "sent); main_fn must read its whole feed and answer every row"
        )
    if produced != expected:
        raise TaskFeedError(
            f"main_fn sent {produced} outputs for {expected} input rows; "
            "read the feed until feed.should_stop() and call "
            "feed.batch_results() with one output per row it read"
        )


def _send_draining(
    conn, buffers: list, results: queue.Queue, reader: _ReplyReader, proc, launch: LaunchSpec
) -> Iterator[list]:
    """Send one frame without blocking; while the TF process is not reading, yield the output
    chunks it has sent back (it may be waiting for us to take them)."""
    timeout = launch.feed.feed_timeout
    idle_since = time.monotonic()
    while buffers:
        remaining = feedwire.send_some(conn, buffers)
        if remaining is not buffers:
            buffers, idle_since = remaining, time.monotonic()
            continue
        drained = False
        for chunk in _drain(results, reader):
            drained = True
            yield chunk
        if drained:
            idle_since = time.monotonic()
        elif proc.poll() is not None or reader.finished.is_set():
            raise BrokenPipeError("the TF process stopped reading")
        elif time.monotonic() - idle_since > timeout:
            raise TimeoutError()
        protocol.wait_writable(conn, 0.05)
    yield from _drain(results, reader)


def _drain(results: queue.Queue, reader: _ReplyReader) -> Iterator[list]:
    """The output chunks already waiting, without blocking (the end stays queued)."""
    while True:
        try:
            chunk = results.get_nowait()
        except queue.Empty:
            return
        if chunk is None:
            results.put(None)
            return
        yield chunk


_SCHEMAS: dict = {}


def _output_schema(launch: LaunchSpec):
    import pyarrow as pa

    key = launch.output_schema
    if key not in _SCHEMAS:
        _SCHEMAS.clear()
        _SCHEMAS[key] = pa.ipc.read_schema(pa.py_buffer(key))
    return _SCHEMAS[key]


class _ReplyReader:
    """Reads the TF process's replies: terminate, outputs (into a bounded queue: a full queue
    stops the reading, and so the TF process's sending), and the end of its outputs."""

    def __init__(self, conn: socket.socket, results: queue.Queue, stop: threading.Event) -> None:
        self.conn, self.results, self.stop = conn, results, stop
        self.error: BaseException | None = None
        self.rows_received: int | None = None  # the TF process's own count, at the end
        self.idle = False  # the TF process says its consumer took nothing for feed_timeout
        self.spark_ended = False  # the TF process read Spark's socket to the data's end
        self.finished = threading.Event()
        self._closed = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="sparktf-replies").start()

    def check(self) -> None:
        if self.error is not None:
            raise TaskFeedError(str(self.error)) from self.error

    def close(self) -> None:
        """The task is done with the replies: the reading thread must not wait on it."""
        self._closed.set()

    def _put(self, item) -> bool:
        while not self._closed.is_set():
            try:
                self.results.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        """Training sends no replies for hours: wait without a time limit, and let the
        socket's feed_timeout apply only inside a frame."""
        try:
            while True:
                while not protocol.wait_readable(self.conn, 1.0):
                    pass
                kind, payload = feedwire.recv_frame(self.conn)
                if kind == feedwire.TERMINATE:
                    self.stop.set()
                elif kind == feedwire.END:
                    self.spark_ended = True
                elif kind == feedwire.IDLE:
                    self.idle = True
                    break
                elif kind == feedwire.RESULT:
                    try:
                        values = pickle.loads(payload)
                    except Exception as exc:
                        self.error = RuntimeError(
                            f"an inference output from main_fn cannot be read in the Spark "
                            f"task ({type(exc).__name__}: {exc}); send plain values (numbers, "
                            "strings, lists, dicts, numpy arrays) to feed.batch_results()"
                        )
                        break
                    if not self._put(values):
                        break
                elif kind == feedwire.RESULTS_END:
                    self.rows_received = json.loads(payload or b"{}").get("rows")
                    break
        except (OSError, EOFError, ValueError):
            pass
        self.stop.set()
        self.finished.set()
        self._put(None)


def _results(results: queue.Queue, reader: _ReplyReader, proc) -> Iterator[list]:
    """The remaining output chunks in order, until the TF process says it sent them all."""
    while True:
        try:
            chunk = results.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None and reader.finished.is_set() and results.empty():
                reader.check()
                return
            continue
        if chunk is None:
            reader.check()
            return
        yield chunk


def _to_record_batch(values: list, schema):
    import pyarrow as pa

    if len(schema) == 1 and not (values and isinstance(values[0], dict)):
        field = schema[0]
        values = _one_per_row(values, field.type)
        try:
            column = pa.array(values, type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TaskFeedError(_misfit(field, values, exc)) from None
        return pa.RecordBatch.from_arrays([column], schema=schema)
    rows = [v if isinstance(v, dict) else dict(zip(schema.names, v)) for v in values]
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def _one_per_row(values: list, arrow_type):
    """A batch of outputs as Keras' ``model.predict`` gives it for one number per row, an
    ``(n, 1)`` array (a list of ``(1,)`` arrays once sent), as the ``n`` numbers a scalar
    column takes; anything else as it is."""
    import numpy as np
    import pyarrow as pa

    first = values[0] if values else None
    if isinstance(first, np.ndarray) and first.shape == (1,) and not pa.types.is_nested(arrow_type):
        stacked = np.asarray(values)
        if stacked.shape == (len(values), 1):
            return stacked.reshape(-1)
    return values


def _misfit(field, values, exc: Exception) -> str:
    """Why main_fn's outputs do not fit a one-column ``output_schema``, saying what would."""
    import pyarrow as pa

    t = field.type
    want = (
        "one number per row"
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
        else "one list per row"
        if pa.types.is_list(t) or pa.types.is_large_list(t)
        else "one value per row"
    )
    first = values[0]
    got = (
        f"arrays of shape {first.shape}"
        if hasattr(first, "shape") and first.shape
        else f"{type(first).__name__} values like {first!r:.60}"
    )
    return (
        f"output_schema's {field.name} is {t}: {want}, but main_fn's outputs are {got} "
        f"({type(exc).__name__}: {exc}); give feed.batch_results() outputs of that kind, "
        "or an output_schema that fits them (e.g. 'scores array<float>')"
    )


#: A frame being filled goes out once its first row has waited this long (seconds), full or
#: not: rows that Spark computes slowly (a slow map upstream) reach their node as they come,
#: so its feed, and every other node's, sees them flow (feed_timeout is an idle timeout).
FLUSH_SECS = 0.25


def _packs(frames: Iterable[bytes], size: int, flush: float = FLUSH_SECS) -> Iterator[list]:
    """Group byte strings into lists of about ``size`` bytes (or what came in ``flush``
    seconds)."""
    pack, total, since = [], 0, 0.0
    for frame in frames:
        now = time.monotonic()
        if not pack:
            since = now
        pack.append(frame)
        total += len(frame)
        if total >= size or now - since >= flush:
            yield pack
            pack, total = [], 0
    if pack:
        yield pack


def _chunks(items: Iterable, size: int, flush: float = FLUSH_SECS) -> Iterator[list]:
    """Group items into lists of ``size`` (or what came in ``flush`` seconds)."""
    chunk, since = [], 0.0
    for item in items:
        now = time.monotonic()
        if not chunk:
            since = now
        chunk.append(item)
        if len(chunk) >= size or now - since >= flush:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
