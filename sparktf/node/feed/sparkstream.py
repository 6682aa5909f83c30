"""Epoch 1 of an RDD partition read straight from Spark's socket, not through the barrier task.

A barrier task forwarding Spark's pickled batches unopened still reads and resends every
byte. When it can (see :func:`sparktf.task.sparksocket.spark_data_socket`), it passes the TF process
its Python worker's own socket to the executor, with the bytes its reader had already buffered,
and the TF process reads the rest of the partition's data section itself: records
``length(4, signed) | pickled batch`` up to the length ``-1`` that ends the section.

That socket is not ours. The worker goes on using it after the task, so :class:`SparkRecords`

- never reads a byte past the ``-1`` (the worker reads the end of the stream after it: one
  ``recv`` per record, each taking the record's body and exactly the next record's length);
- never changes the socket's mode (a descriptor passed between processes shares its blocking
  flag with the worker's): it reads with ``MSG_DONTWAIT`` and waits with ``poll``;
- never shuts the connection down, only closes its own descriptor.

Records are grouped into the payloads of ``M`` frames (:mod:`sparktf.common.feedwire`: the same
``length | pickle`` layout), so the rest of the feed cannot tell where its frames came from.
"""

from __future__ import annotations

import fcntl
import socket
import time
from collections.abc import Callable

from sparktf.common import feedwire, protocol
from sparktf.errors import FeedError

#: Spark's length that ends a data section (``SpecialLengths.END_OF_DATA_SECTION``).
END_OF_DATA = -1
_LENGTH = 4
_POLL_SLICE = 0.25  # seconds: how soon a terminated feed stops waiting on Spark's socket


class SparkRecords:
    """Spark's data section on ``sock`` (after the bytes ``head`` already read off it) as
    ``M`` frame payloads of about :data:`~sparktf.common.feedwire.MULTI_BYTES`."""

    def __init__(
        self,
        sock: socket.socket,
        head,
        timeout: float,
        stopped: Callable[[], bool] = lambda: False,
        frame_bytes: int = feedwire.MULTI_BYTES,
    ) -> None:
        self.sock = sock
        self._head = memoryview(bytes(head))
        self._timeout = timeout
        self._stopped = stopped
        self._frame_bytes = frame_bytes
        self._buf = bytearray(frame_bytes + (1 << 17))
        self._next: bytes | None = None  # the next record's length, read with the last body
        #: The ``-1`` has been read: the socket is where the worker expects it.
        self.ended = False

    def next_payload(self) -> memoryview | None:
        """The next frame's payload (a view of a buffer reused for the frame after it), or
        None once the data section has ended."""
        if self.ended:
            return None
        if self._stopped():
            raise FeedError("the feed was terminated")  # not a byte more than it needed
        if self._next is None:
            self._read_into(0, _LENGTH)
        else:
            self._buf[:_LENGTH] = self._next
            self._next = None
        pos = 0  # where the current record's length is in the buffer
        while True:
            size = int.from_bytes(self._buf[pos : pos + _LENGTH], "big", signed=True)
            if size == END_OF_DATA:
                self.ended = True
                return memoryview(self._buf)[:pos] if pos else None
            if size < 0:
                raise FeedError(
                    f"unexpected length {size} in Spark's data for this partition "
                    "(expected pickled batches)"
                )
            end = pos + _LENGTH + size
            self._room(pos + _LENGTH, end + _LENGTH)
            self._read_into(pos + _LENGTH, size + _LENGTH)  # the body and the next length
            pos = end
            if pos >= self._frame_bytes:
                self._next = bytes(self._buf[pos : pos + _LENGTH])
                return memoryview(self._buf)[:pos]

    def close(self) -> None:
        """Close this process's descriptor (the worker's own stays open; no shutdown)."""
        self.sock.close()

    def _room(self, keep: int, need: int) -> None:
        """A buffer of at least ``need`` bytes that starts with the first ``keep`` of this one."""
        if len(self._buf) < need:
            bigger = bytearray(max(need, 2 * len(self._buf)))
            bigger[:keep] = self._buf[:keep]
            self._buf = bigger

    def _read_into(self, start: int, n: int) -> None:
        """Exactly ``n`` bytes into the buffer at ``start``: first what the worker had
        buffered, then from the socket, waiting at most the feed timeout for each part."""
        view = memoryview(self._buf)[start : start + n]
        got = min(len(self._head), n)
        if got:
            view[:got] = self._head[:got]
            self._head = self._head[got:]
        deadline = time.monotonic() + self._timeout
        while got < n:
            try:
                k = self.sock.recv_into(view[got:], n - got, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                self._wait(deadline)
                continue
            if k == 0:
                raise FeedError(
                    f"Spark's data socket closed in the middle of the partition "
                    f"({got} of {n} bytes of a record)"
                )
            got += k
            deadline = time.monotonic() + self._timeout

    def _wait(self, deadline: float) -> None:
        while not protocol.wait_readable(self.sock, min(_POLL_SLICE, deadline - time.monotonic())):
            if self._stopped():
                raise FeedError("the feed was terminated")
            if time.monotonic() >= deadline:
                raise FeedError(
                    f"no data came from Spark for feed_timeout="
                    f"{self._timeout:g}s (the Spark side made no progress)"
                )


def wrap(fd: int) -> socket.socket:
    """A socket object over a descriptor passed to us, leaving the descriptor's mode as it came:
    that flag is shared with the worker's own descriptor (creating the object, or giving it a
    timeout, would make it non-blocking under the worker's feet). The object itself has no
    timeout: :class:`SparkRecords` reads with ``MSG_DONTWAIT`` and waits with ``poll``."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    sock = socket.socket(fileno=fd)
    sock.settimeout(None)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags)
    return sock
