"""The barrier task's feeder (InputMode.SPARK): its partition to the TF process over a Unix
socket (:mod:`sparktf.common.feedwire`), and, for inference, the TF process's outputs back as the
stage's output, interleaved with the sending and bounded (:func:`feed`). The parts:
:mod:`~sparktf.task.frames` (the partition as frames), :mod:`~sparktf.task.sparksocket` (Spark's
own data socket, passed on), :mod:`~sparktf.task.readback` (inference outputs).

Runs in the Spark Python worker; never imports pyspark or tensorflow itself (the partition's
iterator and Arrow batches come from Spark; pyarrow is imported where outputs are built).
"""

from __future__ import annotations

import queue
import socket
import subprocess
import threading
from collections.abc import Iterator

from sparktf.common import feedwire, protocol
from sparktf.common.spec import LaunchSpec
from sparktf.task.feederror import TaskFeedError, _took_no_data
from sparktf.task.frames import _then_end, partition_frames
from sparktf.task.readback import _check_outputs, _emit, _ReplyReader, _results, _send_draining
from sparktf.task.sparksocket import leave_mid_data, spark_data_socket

#: Inference: output frames the task holds at most while it feeds (each one batch's outputs).
RESULTS_AHEAD = 4


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


def feed(
    listener: socket.socket,
    proc: subprocess.Popen,
    partition: Iterator,
    launch: LaunchSpec,
    kind: str,
    arrow_schema: bytes | None,
) -> Iterator:
    """Stream the partition to the TF process; for inference, yield its outputs as they come
    back, interleaved with the sending, so neither side can block the other and at most
    ``RESULTS_AHEAD`` output frames wait in this task."""
    config = launch.feed
    if config is None:  # a job fed from Spark has its feed's settings
        raise TaskFeedError("this job's launch spec has no feed settings to feed the data with")
    timeout = config.feed_timeout
    conn = _accept(listener, proc, timeout)
    inference = launch.train_mode is False
    if conn is None:
        _check_unread(inference, proc, partition)
        return
    results: queue.Queue = queue.Queue(maxsize=RESULTS_AHEAD)
    stop = threading.Event()
    reader = _ReplyReader(conn, results, stop)
    counted, produced = [0], [0]  # rows sent, output rows yielded (as they go)
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
            frames = partition_frames(partition, kind, arrow_schema, config.chunk_rows, counted)
            framed = _then_end(frames, counted)
            yield from _send_frames(
                conn, framed, kind, stop, results, reader, proc, launch, produced
            )
        if reader.idle:
            raise TimeoutError()
    except TimeoutError:
        raise _took_no_data(timeout) from None
    except (BrokenPipeError, ConnectionResetError):
        pass  # the TF process stopped reading (terminate() or main_fn returned): early stop
    try:
        if inference:
            for chunk in _results(results, reader, proc):
                produced[0] += len(chunk)
                yield from _emit(chunk, kind, launch)
            if reader.idle:
                raise _took_no_data(timeout)
            _check_outputs(produced[0], counted[0], reader, proc)
    finally:
        reader.close()
        conn.close()
        if spark is not None and not reader.spark_ended:
            leave_mid_data(spark)


def _check_unread(inference: bool, proc: subprocess.Popen, partition: Iterator) -> None:
    """The TF process never connected to read its rows: fail an inference whose ``main_fn``
    returned (exit 0) with rows of its partition unread; any other end is the node's to report."""
    if inference and proc.wait() == 0 and next(iter(partition), None) is not None:
        raise TaskFeedError(
            "main_fn returned without reading its rows: inference needs "
            "ctx.get_data_feed(train_mode=False) and one output per row"
        )


def _send_frames(
    conn: socket.socket,
    framed: Iterator,
    kind: str,
    stop: threading.Event,
    results: queue.Queue,
    reader: _ReplyReader,
    proc: subprocess.Popen,
    launch: LaunchSpec,
    produced: list[int],
) -> Iterator:
    """Send the partition's frames until the last or ``stop``; for inference, yield the outputs
    that come back meanwhile (``produced[0]`` counts their rows as they go)."""
    inference = launch.train_mode is False
    for buffers in framed:
        if stop.is_set():
            break
        if not inference:
            feedwire.send_buffers(conn, buffers)
            continue
        for chunk in _send_draining(conn, buffers, results, reader, proc, launch):
            produced[0] += len(chunk)
            yield from _emit(chunk, kind, launch)
