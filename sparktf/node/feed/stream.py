"""Epoch 1: the frames of this node's partition from its barrier task, over a local socket.

A reader thread receives each frame, decodes it, appends it to the spool (when later epochs
will replay it) and hands it to the consumer through a read-ahead queue bounded in frames and
bytes, so a slow consumer slows the Spark side down. It also tells the driver how many rows
have arrived, which equalization needs (see :mod:`sparktf.node.feed`).
"""

from __future__ import annotations

import collections
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from sparktf.common import feedwire, messages, protocol
from sparktf.common.spec import FeedConfig
from sparktf.errors import FeedError
from sparktf.node.feed import batches, sparkstream
from sparktf.node.feed.sparkstream import SparkRecords
from sparktf.node.feed.spool import Spool

#: What :meth:`Stream.take` returns after the partition's last chunk.
EOF = object()
PROGRESS_INTERVAL = 0.01  # seconds between progress reports while rows stream in


class Stream:
    """The reader thread and the read-ahead queue between it and the consumer."""

    def __init__(
        self,
        sock_path: str,
        config: FeedConfig,
        spool: Spool | None,
        report: Callable[[dict], None] | None,
        *,
        spool_factory: Callable[[], Spool] | None = None,
        spill_when: Callable[[], bool] | None = None,
        on_rows: Callable[[], None] | None = None,
    ) -> None:
        """``spool``: keeps every frame (later epochs replay it). ``spool_factory``: rows may
        move to other nodes (see :mod:`~sparktf.node.feed.exchange`): every frame stays
        readable with :meth:`frame` until the consumer has passed it, from memory, or from a
        spool made when first needed (frames spilled, frames taken from other nodes).
        ``spill_when``: see ``_put``. ``on_rows``: called after each frame's rows are counted
        in :attr:`received` (an equalizing consumer may be waiting for them)."""
        self.config = config
        self._spool = spool
        self._spool_factory = spool_factory if spool is None else None
        self._spool_base = 0  # the frame the spool's first frame is
        #: Rows of each frame received, in order (rows may move: see ``spool_factory``).
        self.frame_rows: list[int] = []
        self._frame_ends: list[int] = []
        # frame -> (kind, payload) of frames not yet passed by the consumer, where there is
        # no spool of every frame and rows may move
        self._held: dict[int, tuple] | None = {} if spool_factory and spool is None else None
        self._report = report  # None: nobody needs our progress (no equalization)
        self._on_rows = on_rows
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(config.feed_timeout)
        feedwire.tune(self._sock)
        self._sock.connect(sock_path)
        self._send_lock = threading.Lock()
        self._rx = bytearray()  # receives the RDD frames, one after the other
        self._first = True  # the first frame may come with Spark's socket
        self._spark: SparkRecords | None = None  # reading Spark's socket, if so
        self._idle_told = False
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
        # With a spool: when the read-ahead is full and spill_when() says so (the consumer
        # waits for peers whose shares have ended: this node may hold rows to give away, and
        # its partition must reach its end), later frames are only spooled and the consumer
        # reads them back from there, from frame _spill_next on.
        self._spill_when = spill_when if (spool is not None or spool_factory) else None
        self._spill_next: int | None = None
        self._spilled = 0  # frames the spool holds readable (flushed), spilling or not
        self._failure: BaseException | None = None
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
                self._report_before_waiting()
                kind, payload = self._next_frame()
                if kind == feedwire.SCHEMA:
                    self.schema = batches.read_schema(payload)
                elif kind == feedwire.END:
                    self._end(payload)
                    return
                else:
                    self._take_frame(kind, payload)
        except BaseException as exc:
            self._broken(exc)

    def _take_frame(self, kind: bytes, payload: Any) -> None:
        """One frame of rows: counted, spooled, handed to the consumer or spilled."""
        chunk = batches.decode(kind, payload, self.schema)
        n = batches.rows(chunk)
        index = self._count_frame(n)
        if self._spool is not None and self._spool_factory is None:
            self._spool.append(kind, payload, n)  # the spool of every frame
        self.received += n
        if self._on_rows is not None:
            self._on_rows()
        if self._spill_next is None:
            if self._held is not None:
                # An Arrow batch is a view of its frame: keep the frame. A pickled
                # frame's buffer is reused for the next one: keep the elements.
                self._held[index] = (kind, payload) if kind == feedwire.ARROW else (None, chunk)
            self._put(chunk, len(payload), index)  # reports progress before it waits
        if self._spill_next is not None:  # spilling, maybe from this frame on
            if self._spool_factory is not None:
                self._spooling().append(kind, payload, n)
                if self._held is not None:
                    self._held.pop(index, None)
            self._spool_flushed()
        self._progress(ended=False, urgent=False)

    def _end(self, payload: Any) -> None:
        """The share's end frame: its rows counted, the spool complete, the consumer told."""
        if self._spool is not None:
            self._spool.flush()  # complete before anyone may replay it
        rows = json.loads(payload)["rows"]  # -1: the task forwarded unopened frames
        self.rows = rows if rows >= 0 else self.received
        self.ended.set()
        self._progress(ended=True)
        if self._spill_next is None:
            self._put(EOF)
        else:
            self._wake()

    def _broken(self, exc: BaseException) -> None:
        """The feed from Spark broke (``exc``): the consumer gets a FeedError."""
        if self._spark is not None:
            self._spark.close()
        failure = FeedError(
            f"the data feed from Spark broke: {type(exc).__name__}: {exc}",
            reason=FeedError.BROKEN,
        )
        self._failure = failure
        self.ended.set()
        if not self._terminated:
            if self._spill_next is None:
                self._put(failure)
            else:
                self._wake()

    def _next_frame(self) -> tuple[bytes, Any]:
        """The next frame: from the barrier task, or, once the task has passed this node
        Spark's own socket (the first frame), from there (:mod:`.sparkstream`)."""
        if self._spark is not None:
            payload = self._spark.next_payload()
            if payload is not None:
                return feedwire.MULTI, payload
            self._spark.close()  # the worker's socket is where it expects it: at the end
            try:
                self.send(feedwire.END, b"")  # and the task may let the worker read on
            except OSError:
                pass
            return feedwire.END, b'{"rows": -1}'
        if self._first:
            self._first = False
            kind, payload, fd = feedwire.recv_first_frame(self._sock, self._buffer_for)
            if fd is None:
                return kind, payload
            if kind != feedwire.SPARK_SOCKET:
                os.close(fd)
                raise FeedError(f"a descriptor came with a {kind!r} frame")
            self._spark = SparkRecords(
                sparkstream.wrap(fd),
                payload,
                self.config.feed_timeout,
                stopped=lambda: self._terminated,
            )
            return self._next_frame()
        return feedwire.recv_frame(self._sock, self._buffer_for)

    def _data_socket(self):
        """Where the next frame comes from."""
        return self._spark.sock if self._spark is not None else self._sock

    def _buffer_for(self, kind: bytes, size: int):
        """Where the reader receives a frame: an Arrow batch into memory of its own (the
        batch is a view of it); RDD elements into one buffer, reused: they are unpickled into
        objects of their own (and spooled by copy) before the next frame comes, so a frame's
        memory is neither zeroed nor faulted in anew, every frame."""
        if kind not in (feedwire.PICKLED, feedwire.MULTI):
            return batches.buffer_for(kind, size)
        if len(self._rx) < size:
            self._rx = bytearray(size)
        return memoryview(self._rx)[:size]

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _spool_flushed(self) -> None:
        """Flush the spool; the consumer may read what it holds."""
        spool = self._spooling()
        spool.flush()
        with self._cond:
            self._spilled = len(spool.frames)
            self._cond.notify_all()

    def _spooling(self) -> Spool:
        """The spool, where this stream's state says there is one (spilling, or a frame
        the consumer reads back from it)."""
        if self._spool is None:
            raise FeedError("a frame of the feed was to be in its spool, and there is none")
        return self._spool

    def _new_spool(self, base: int) -> Spool:
        """A spool made now (rows may move: ``spool_factory``); its first frame is ``base``."""
        if self._spool_factory is None:
            raise FeedError("this feed keeps no spool (its rows do not move)")
        self._spool = self._spool_factory()
        self._spool_base = base
        return self._spool

    def _count_frame(self, rows: int) -> int:
        """The next frame's number (from 0), its rows noted."""
        self.frame_rows.append(rows)
        self._frame_ends.append((self._frame_ends[-1] if self._frame_ends else 0) + rows)
        return len(self.frame_rows) - 1

    def spool(self) -> Spool:
        """The spool, made now if there is none yet (its first frame is the next one)."""
        with self._cond:
            if self._spool is None:
                return self._new_spool(len(self.frame_rows))
            return self._spool

    def frame(self, index: int) -> tuple[bytes, Any]:
        """``(kind, payload)`` of one of the partition's frames the consumer has not passed
        (or any, with a spool of every frame); RDD elements as one pickled list. The payload
        is bytes or any buffer (an Arrow buffer, a view), as :func:`feedwire.send_frame`
        takes it."""
        held = self._held.get(index) if self._held is not None else None
        if held is not None:
            return held if held[0] is not None else batches.encode(held[1])
        kind, payload, _ = self._spooling().read(index - self._spool_base)
        return kind, payload

    def release(self, delivered: int) -> None:
        """The consumer has handed out ``delivered`` rows: frames wholly before them are no
        longer kept for :meth:`frame`."""
        held = self._held
        if not held:
            return
        for index in list(held):  # in the order received
            if self._frame_ends[index] > delivered:
                return
            held.pop(index, None)

    def close_spool(self) -> None:
        if self._spool is not None:
            self._spool.close()
        if self._held is not None:
            self._held.clear()

    def _put(self, item, size: int = 0, index: int | None = None) -> None:
        """Hand a chunk to the consumer, waiting while the read-ahead is full: at most
        ``read_ahead`` frames and ``read_ahead_bytes`` bytes, but never fewer than two of
        the consumer's batches (an equalizing peer may wait for rows we have not read yet).
        ``index``: the chunk's frame in the spool, from where the consumer can read it
        instead (see ``spill_when``)."""
        rows = 0 if item is EOF or isinstance(item, BaseException) else batches.rows(item)
        waiting_since = time.monotonic()
        with self._cond:
            while (
                not self._gone
                and self._buffer
                and (
                    (
                        len(self._buffer) >= self.config.read_ahead
                        or self._buffer_bytes + size > self.config.read_ahead_bytes
                    )
                    and self._buffer_rows >= 2 * self._batch_hint
                )
            ):
                if self._report is not None and self._reported != self.received:
                    # peers may wait for these rows
                    self._cond.release()
                    try:
                        self._progress(ended=False)
                    finally:
                        self._cond.acquire()
                    continue
                if index is not None and self._spill_when is not None and self._spill_when():
                    spool = self._spool
                    if spool is None:  # the reader appends this frame next
                        spool = self._new_spool(index)
                    spool.flush()
                    self._spill_next = index
                    self._cond.notify_all()
                    return
                self._cond.wait(0.2)
                if (
                    self._spark is not None
                    and not self._idle_told
                    and time.monotonic() - waiting_since > self.config.feed_timeout
                ):
                    self._cond.release()
                    try:
                        self._tell_idle()
                    finally:
                        self._cond.acquire()
            if self._gone:
                return  # epoch 1 is over for the consumer: the frame is only spooled
            self._buffer.append((item, size))
            self._buffer_rows += rows
            self._buffer_bytes += size
            self._cond.notify_all()

    def _tell_idle(self) -> None:
        """Reading Spark's socket itself, the reader has waited ``feed_timeout`` for the
        consumer: tell the barrier task, which fails the feed as it does when it sends the
        frames itself and they are not taken."""
        self._idle_told = True
        try:
            self.send(feedwire.IDLE, json.dumps({"seconds": self.config.feed_timeout}).encode())
        except OSError:
            pass

    def _report_before_waiting(self) -> None:
        """Before the reader waits for the next frame: rows not reported yet are reported
        when no frame comes within what is left of PROGRESS_INTERVAL (a slow partition's
        rows are never held back for longer than that)."""
        if self._report is None or self._reported == self.received:
            return
        wait = PROGRESS_INTERVAL - (time.monotonic() - self._reported_at)
        if wait > 0 and protocol.wait_readable(self._data_socket(), wait):
            return  # the next frame is here: reported with it when due
        self._progress(ended=False)

    def _progress(self, ended: bool, urgent: bool = True) -> None:
        """Tell the driver how many rows arrived: at the end, before the reader waits (for
        room in the read-ahead, or for a frame that does not come in time), and otherwise at
        most every PROGRESS_INTERVAL seconds: each report costs the driver a message to every
        other training node, and each of those wakes a thread there."""
        if self._report is None:
            return
        if not ended and self._reported == self.received:
            return  # nothing new
        now = time.monotonic()
        due = ended or urgent or now - self._reported_at >= PROGRESS_INTERVAL
        if not due:
            return
        self._reported, self._reported_at = self.received, now
        self._report(messages.make("feed_progress", received=self.received, ended=ended))

    # ----------------------------------------------------------------------- consumer side
    def take(self) -> Any:
        """The next chunk, :data:`EOF`, or the exception that broke the stream."""
        deadline = time.monotonic() + self.config.feed_timeout
        with self._cond:
            while not self._buffer:
                if self._spill_next is not None:  # the rest is in the spool
                    if self._spill_next < self._spool_base + self._spilled:
                        index = self._spill_next
                        self._spill_next += 1
                        break
                    if self.ended.is_set():
                        return self._failure or EOF
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise FeedError(
                        f"no data arrived for feed_timeout="
                        f"{self.config.feed_timeout:g}s (the Spark side made no "
                        "progress)"
                    )
                self._cond.wait(min(remaining, 1.0))
            else:
                return self._pop()
        kind, payload, _ = self._spooling().read(index - self._spool_base)
        return batches.decode(kind, payload, self.schema)

    def _pop(self):
        """The read-ahead's first item (the condition held)."""
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
        if self._spark is not None:
            self._spark.close()
