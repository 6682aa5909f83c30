"""Epoch 1: the frames of this node's partition from its barrier task, over a local socket.

A reader thread receives each frame, decodes it, appends it to the spool (when later epochs
will replay it) and hands it to the consumer through a read-ahead queue bounded in frames and
bytes, so a slow consumer slows the Spark side down. It also tells the driver how many rows
have arrived, which equalization needs (see :mod:`sparktf.node.feed`).
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
from typing import Callable

from sparktf.common import feedwire, messages
from sparktf.common.spec import FeedConfig
from sparktf.errors import FeedError
from sparktf.node.feed import batches
from sparktf.node.feed.spool import Spool

#: What :meth:`Stream.take` returns after the partition's last chunk.
EOF = object()
PROGRESS_INTERVAL = 0.01  # seconds between progress reports while rows stream in


class Stream:
    """The reader thread and the read-ahead queue between it and the consumer."""

    def __init__(self, sock_path: str, config: FeedConfig, spool: Spool | None,
                 report: Callable[[dict], None] | None) -> None:
        import pyarrow as pa

        self._pa = pa
        self.config = config
        self._spool = spool
        self._report = report  # None: nobody needs our progress (no equalization)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(config.feed_timeout)
        feedwire.tune(self._sock)
        self._sock.connect(sock_path)
        self._send_lock = threading.Lock()
        #: The partition's Arrow schema (None for an RDD).
        self.schema = None
        #: Rows received so far.
        self.received = 0
        #: The partition's rows, once it has ended.
        self.rows: int | None = None
        #: Set when the reader has seen the end, or failed.
        self.ended = threading.Event()
        # Read-ahead, bounded in frames and bytes, but never below two of the consumer's
        # batches: an equalizing peer may wait for rows we have not read yet.
        self._buffer: collections.deque = collections.deque()
        self._buffer_rows = 0
        self._buffer_bytes = 0
        self._cond = threading.Condition()
        self._batch_hint = 1
        self._reported, self._reported_at = 0, 0.0  # rows last reported to the driver, when
        self._gone = False  # the consumer has left epoch 1: frames are only spooled
        self._terminated = False
        self._reader = threading.Thread(target=self._read, name="sparktf-feed", daemon=True)
        self._reader.start()

    @property
    def total(self) -> int:
        """The partition's rows: final once it has ended, the rows so far before."""
        return self.rows if self.rows is not None else self.received

    # ------------------------------------------------------------------------- reader side
    def _read(self) -> None:
        try:
            while True:
                kind, payload = feedwire.recv_frame(self._sock)
                if kind == feedwire.SCHEMA:
                    self.schema = self._pa.ipc.read_schema(self._pa.py_buffer(payload))
                    continue
                if kind == feedwire.END:
                    if self._spool is not None:
                        self._spool.flush()  # complete before anyone may replay it
                    rows = json.loads(payload)["rows"]  # -1: the task forwarded unopened frames
                    self.rows = rows if rows >= 0 else self.received
                    self.ended.set()
                    self._progress(ended=True)
                    self._put(EOF)
                    return
                chunk = batches.decode(kind, payload, self.schema)
                n = batches.rows(chunk)
                if self._spool is not None:
                    self._spool.append(kind, payload, n)
                self.received += n
                self._put(chunk, len(payload))  # reports pending progress before it waits
                self._progress(ended=False, urgent=False)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self.ended.set()
            if not self._terminated:
                self._put(FeedError(f"the data feed from Spark broke: {type(exc).__name__}: "
                                    f"{exc}"))

    def _put(self, item, size: int = 0) -> None:
        """Hand a chunk to the consumer, waiting while the read-ahead is full: at most
        ``read_ahead`` frames and ``read_ahead_bytes`` bytes, but never fewer than two of
        the consumer's batches (an equalizing peer may wait for rows we have not read yet)."""
        rows = 0 if item is EOF or isinstance(item, BaseException) else batches.rows(item)
        with self._cond:
            while not self._gone and self._buffer and (
                    (len(self._buffer) >= self.config.read_ahead
                     or self._buffer_bytes + size > self.config.read_ahead_bytes)
                    and self._buffer_rows >= 2 * self._batch_hint):
                if self._reported != self.received:  # peers may wait for these rows
                    self._cond.release()
                    try:
                        self._progress(ended=False)
                    finally:
                        self._cond.acquire()
                    continue
                self._cond.wait(0.2)
            if self._gone:
                return  # epoch 1 is over for the consumer: the frame is only spooled
            self._buffer.append((item, size))
            self._buffer_rows += rows
            self._buffer_bytes += size
            self._cond.notify_all()

    def _progress(self, ended: bool, urgent: bool = True) -> None:
        """Tell the driver how many rows arrived: at the end, before the reader waits, when
        the consumer has nothing left, and otherwise at most every PROGRESS_INTERVAL seconds
        (each report costs the driver a round of bound messages to every node)."""
        if self._report is None:
            return
        if not ended and self._reported == self.received:
            return  # nothing new
        now = time.monotonic()
        due = (ended or urgent or now - self._reported_at >= PROGRESS_INTERVAL
               or self._buffer_rows <= self._batch_hint)
        if not due:
            return
        self._reported, self._reported_at = self.received, now
        self._report(messages.make("feed_progress", received=self.received, ended=ended))

    # ----------------------------------------------------------------------- consumer side
    def take(self):
        """The next chunk, :data:`EOF`, or the exception that broke the stream."""
        deadline = time.monotonic() + self.config.feed_timeout
        with self._cond:
            while not self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise FeedError(f"no data arrived for feed_timeout="
                                    f"{self.config.feed_timeout:g}s (the Spark side made no "
                                    "progress)")
                self._cond.wait(min(remaining, 1.0))
            item, size = self._buffer.popleft()
            self._buffer_bytes -= size
            if not (item is EOF or isinstance(item, BaseException)):
                self._buffer_rows -= batches.rows(item)
            self._cond.notify_all()
            return item

    def hint(self, batch_size: int) -> None:
        """The consumer takes batches this large: keep at least two of them read ahead."""
        if batch_size > self._batch_hint:
            with self._cond:
                self._batch_hint = batch_size
                self._cond.notify_all()

    def leave(self) -> None:
        """The consumer is done with epoch 1: drop the read-ahead; the reader goes on to the
        end of the partition (spooling it, and counting what equalization held back)."""
        with self._cond:
            self._gone = True
            self._buffer.clear()
            self._buffer_rows = self._buffer_bytes = 0
            self._cond.notify_all()

    def send(self, kind: bytes, payload: bytes) -> None:
        """A frame back to the barrier task (results, their end, terminate)."""
        with self._send_lock:
            feedwire.send_frame(self._sock, kind, payload)

    def terminate(self) -> None:
        """Ask the task to stop reading the partition; a broken stream is no longer an error."""
        self._terminated = True
        self.leave()
        try:
            self.send(feedwire.TERMINATE, b"")
        except OSError:
            pass

    def close(self) -> None:
        self._terminated = True
        self._sock.close()
