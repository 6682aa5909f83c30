"""The Spark worker's own data socket: found under the partition's iterator and handed to the TF
process, which then reads an RDD's pickled batches straight from Spark; and left mid-data when
the TF process stops early.
"""

from __future__ import annotations

import inspect
import io
import os
import stat as statmod
import struct
from typing import Any, NamedTuple


class SparkDataSocket(NamedTuple):
    fd: int  # the worker's socket to the executor
    head: bytes  # the partition's first bytes, already read off it by the worker's reader
    stream: io.BufferedReader  # the worker's reader of it


def spark_data_socket(partition: Any) -> SparkDataSocket | None:
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
    frame = partition.gi_frame
    if frame is None:
        return None
    stream = frame.f_locals.get("stream")
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
