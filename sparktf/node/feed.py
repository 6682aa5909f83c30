"""InputMode.SPARK, inside the TF process: the data feed over this node's partition.

``ctx.get_data_feed()`` returns a :class:`DataFeed`. Its first epoch streams from the node's
barrier task over a local socket (:mod:`sparktf.common.feedwire`) through a bounded read-ahead queue,
so a slow consumer slows the Spark side down; with ``num_epochs > 1`` the frames are also
spooled, as received, to a file in the node's private directory, and later epochs stream that
file back frame by frame (memory holds the read-ahead, not the share) instead of recomputing
the Spark lineage.

Synchronous training needs every worker to take the same number of steps. With ``equalize``,
every feed reports the rows it has received to the driver, which sends back the bound: the
fewest rows any training node is known to have. A feed never hands out a row beyond that bound,
so no worker can get ahead of data another worker will never have, and none waits on a peer
that waits on it. Once every partition has ended, the bound is final: each epoch delivers
exactly that many rows, and the rows beyond it are held back (``rows_held_back``). The driver
balances partitions before feeding, so that is a few rows at most.

This module never imports pyspark; pyarrow and numpy are imported when a feed is created, and
tensorflow only by :meth:`DataFeed.to_dataset`.
"""

from __future__ import annotations

import json
import os
import collections
import pickle
import socket
import threading
import time
from typing import Any, Callable, Iterator

from sparktf.common import feedwire, messages
from sparktf.common.spec import FeedConfig
from sparktf.errors import ConfigError, FeedError

_EOF = object()
PROGRESS_INTERVAL = 0.01  # seconds between progress reports while rows stream in


class Bound:
    """The driver's word on how many rows every training node has: (bound, final)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.value = 0
        self.final = False

    def update(self, value: int, final: bool) -> None:
        with self.cond:
            self.value, self.final = max(self.value, value), final or self.final
            self.cond.notify_all()


def column_to_numpy(name: str, arr):
    """An Arrow array as numpy: lists of equal length become one more dimension."""
    import numpy as np
    import pyarrow as pa

    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if arr.null_count:
            raise FeedError(f"column {name!r} has null arrays; drop or fill them before feeding")
        if pa.types.is_fixed_size_list(t):
            width = t.list_size
        else:
            lengths = np.diff(arr.offsets.to_numpy())
            if len(lengths) and (lengths != lengths[0]).any():
                raise FeedError(
                    f"column {name!r} holds arrays of different lengths ({lengths.min()} to "
                    f"{lengths.max()}) in one batch; make every row's array the same length")
            width = int(lengths[0]) if len(lengths) else 0
        values = column_to_numpy(name, arr.flatten())
        return values.reshape((len(arr), width) + values.shape[1:])
    if pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t) \
            or pa.types.is_large_string(t):
        return arr.to_numpy(zero_copy_only=False)
    if arr.null_count and not pa.types.is_floating(t):
        raise FeedError(f"column {name!r} ({t}) has nulls; fill or drop them before feeding")
    return arr.to_numpy(zero_copy_only=False)


class DataFeed:
    """This node's share of the data; ``next_batch`` / ``should_stop`` / ``terminate``.

    Semantics follow TensorFlowOnSpark's ``DataFeed``: ``next_batch(n)`` returns at most ``n``
    items, never crossing an epoch boundary; for an RDD a list of its elements as they are, for
    a DataFrame a dict of column name (or ``input_mapping`` name) to a numpy array whose first
    dimension is the batch.
    """

    def __init__(self, sock_path: str, *, train_mode: bool, input_mapping: dict | None,
                 config: FeedConfig, spool_dir: str, report: Callable[[dict], None],
                 bound: Bound) -> None:
        import numpy  # noqa: F401 - fail early if missing
        import pyarrow as pa

        self._pa = pa
        self.train_mode = train_mode
        self.input_mapping = dict(input_mapping) if input_mapping else None
        self.config = config
        self._report = report
        self._bound = bound
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(config.feed_timeout)
        feedwire.tune(self._sock)
        self._sock.connect(sock_path)
        self._send_lock = threading.Lock()
        self._schema = None
        # Read-ahead, bounded in frames and rows, but never below two of the consumer's batches:
        # an equalizing peer may wait for rows we have not read yet (see the module doc).
        self._buffer: collections.deque = collections.deque()
        self._buffer_rows = 0
        self._buffer_bytes = 0
        self._buffer_cond = threading.Condition()
        self._batch_hint = 1
        self._spool_path = os.path.join(spool_dir, "epoch1.spool")
        self._spool = open(self._spool_path, "wb") if config.num_epochs > 1 else None
        self._frames: list[tuple] = []  # (offset, size, rows, kind) of each spooled frame
        self._received = 0
        self._reported, self._reported_at = 0, 0.0  # rows last reported to the driver, when
        self._stream_rows: int | None = None  # this partition's rows, once it has ended
        self._stream_done = False  # the consumer has taken the end of the stream
        self._stream_ended = threading.Event()  # the reader has seen the end (or a failure)
        self._epoch0_delivered: int | None = None
        self._replay_held_back = 0
        self._epoch = 0
        self._delivered = 0  # rows handed out in the current epoch
        self._chunk: Any = None  # current chunk (RecordBatch or list) and our place in it
        self._chunk_pos = 0
        self._replay: Iterator | None = None
        self._terminated = False
        self._stopped = False
        self.results_sent = 0
        #: Rows handed to the consumer so far, every epoch together (sent with heartbeats).
        self.rows_fed = 0
        self._reader = threading.Thread(target=self._read_stream, name="sparktf-feed",
                                        daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ epoch 1: the stream
    def _read_stream(self) -> None:
        try:
            while True:
                kind, payload = feedwire.recv_frame(self._sock)
                if kind == feedwire.SCHEMA:
                    self._schema = self._pa.ipc.read_schema(self._pa.py_buffer(payload))
                    continue
                if kind == feedwire.END:
                    if self._spool is not None:
                        self._spool.flush()  # complete before anyone may replay it
                    rows = json.loads(payload)["rows"]  # -1: the task forwarded unopened frames
                    self._stream_rows = rows if rows >= 0 else self._received
                    self._stream_ended.set()
                    self._progress(ended=True)
                    self._put(_EOF)
                    return
                chunk = self._decode(kind, payload)
                if self._spool is not None:
                    offset = self._spool.tell()
                    limit = self.config.spool_max_bytes
                    if limit is not None and offset + len(payload) > limit:
                        raise FeedError(
                            f"this node's share of the data is over spark.sparktf.spoolMaxBytes="
                            f"{limit} bytes, which num_epochs={self.config.num_epochs} keeps on "
                            "local disk: raise the limit, or add nodes")
                    self._spool.write(payload)
                    self._frames.append((offset, len(payload), _rows(chunk), kind))
                self._received += _rows(chunk)
                self._put(chunk, len(payload))  # reports pending progress before it waits
                self._progress(ended=False, urgent=False)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._stream_ended.set()
            if not self._terminated:
                self._put(FeedError(f"the data feed from Spark broke: {type(exc).__name__}: "
                                    f"{exc}"))

    def _put(self, item, size: int = 0) -> None:
        """Hand a chunk to the consumer, waiting while the read-ahead is full: at most
        ``read_ahead`` frames and ``read_ahead_bytes`` bytes, but never fewer than two of
        the consumer's batches (an equalizing peer may wait for rows we have not read yet)."""
        if self._epoch > 0 or self._stopped:
            return  # epoch 1 is over for the consumer: the frame is only spooled (or dropped)
        rows = 0 if item is _EOF or isinstance(item, BaseException) else _rows(item)
        with self._buffer_cond:
            while not self._terminated and self._epoch == 0 and self._buffer and (
                    (len(self._buffer) >= self.config.read_ahead
                     or self._buffer_bytes + size > self.config.read_ahead_bytes)
                    and self._buffer_rows >= 2 * self._batch_hint):
                if self._reported != self._received:  # peers may wait for these rows
                    self._buffer_cond.release()
                    try:
                        self._progress(ended=False)
                    finally:
                        self._buffer_cond.acquire()
                    continue
                self._buffer_cond.wait(0.2)
            self._buffer.append((item, size))
            self._buffer_rows += rows
            self._buffer_bytes += size
            self._buffer_cond.notify_all()

    def _take(self):
        deadline = time.monotonic() + self.config.feed_timeout
        with self._buffer_cond:
            while not self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise FeedError(f"no data arrived for feed_timeout="
                                    f"{self.config.feed_timeout:g}s (the Spark side made no "
                                    "progress)")
                self._buffer_cond.wait(min(remaining, 1.0))
            item, size = self._buffer.popleft()
            self._buffer_bytes -= size
            if not (item is _EOF or isinstance(item, BaseException)):
                self._buffer_rows -= _rows(item)
            self._buffer_cond.notify_all()
            return item

    def _decode(self, kind: bytes, payload):
        if kind == feedwire.ARROW:
            return self._pa.ipc.read_record_batch(self._pa.py_buffer(payload), self._schema)
        if kind == feedwire.PICKLED:
            return pickle.loads(payload)
        if kind == feedwire.MULTI:
            items = []
            for part in feedwire.unpack_parts(payload):
                items.extend(pickle.loads(part))
            return items
        raise FeedError(f"unexpected frame {kind!r} on the data feed")

    def _progress(self, ended: bool, urgent: bool = True) -> None:
        """Tell the driver how many rows arrived: at the end, before the reader waits, when
        the consumer has nothing left, and otherwise at most every PROGRESS_INTERVAL seconds
        (each report costs the driver a round of bound messages to every node)."""
        if not (self.config.equalize and self.train_mode):
            return
        if not ended and self._reported == self._received:
            return  # nothing new
        now = time.monotonic()
        due = (ended or urgent or now - self._reported_at >= PROGRESS_INTERVAL
               or self._buffer_rows <= self._batch_hint)
        if not due:
            return
        self._reported, self._reported_at = self._received, now
        self._report(messages.make("feed_progress", received=self._received, ended=ended))

    # --------------------------------------------------------------- epochs 2+: the spool
    def _replay_chunks(self) -> Iterator:
        """The spooled share, frame by frame (shuffled if asked): each frame is read into a
        buffer of its own when it is needed, so memory holds one frame, not the share."""
        import numpy as np

        if not self._stream_ended.wait(self.config.feed_timeout) or self._stream_rows is None:
            raise FeedError("the first pass over the data did not complete; cannot replay it")
        order = list(range(len(self._frames)))
        rng = np.random.RandomState(self.config.seed + self._epoch)
        if self.config.shuffle:
            rng.shuffle(order)
        with open(self._spool_path, "rb", buffering=0) as f:
            for i in order:
                offset, size, rows, kind = self._frames[i]
                payload = bytearray(size)
                view, got = memoryview(payload), 0
                f.seek(offset)
                while got < size:
                    n = f.readinto(view[got:])
                    if not n:
                        raise FeedError(f"the spool file {self._spool_path} is shorter than "
                                        "what was written to it")
                    got += n
                chunk = self._decode(kind, payload)
                if self.config.shuffle:
                    chunk = (chunk.take(self._pa.array(rng.permutation(rows)))
                             if kind == feedwire.ARROW else
                             [chunk[j] for j in rng.permutation(rows)])
                yield chunk

    # ------------------------------------------------------------------------- consumer API
    def _limit(self) -> int | None:
        """Rows this epoch may deliver so far (final after epoch 1); None when unlimited."""
        if not (self.config.equalize and self.train_mode):
            return None
        return self._bound.value

    def _wait_for_bound(self) -> None:
        deadline = time.monotonic() + self.config.feed_timeout
        with self._bound.cond:
            while self._bound.value <= self._delivered and not self._bound.final:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise FeedError(
                        f"no progress from the other training nodes' feeds for "
                        f"feed_timeout={self.config.feed_timeout:g}s")
                self._bound.cond.wait(min(remaining, 1.0))

    def _next_chunk(self):
        if self._epoch == 0:
            if self._stream_done:
                return _EOF
            item = self._take()
            if isinstance(item, BaseException):
                raise item
            self._stream_done = item is _EOF
            return item
        if self._replay is None:
            self._replay = self._replay_chunks()
        return next(self._replay, _EOF)

    def _end_epoch(self, leftover: int) -> None:
        if self._epoch == 0:
            self._epoch0_delivered = self._delivered  # its leftover is known at the stream's end
        else:
            self._replay_held_back += leftover
        with self._buffer_cond:
            self._epoch += 1
            self._buffer.clear()
            self._buffer_rows = self._buffer_bytes = 0
            self._buffer_cond.notify_all()
        self._delivered = 0
        self._chunk, self._chunk_pos, self._replay = None, 0, None
        if self._epoch >= self.config.num_epochs:
            self._stopped = True

    def _epoch_rows_left_in_stream(self) -> int:
        """Rows of the current epoch not yet handed out (its whole length minus delivered)."""
        total = self._stream_rows if self._stream_rows is not None else self._received
        return total - self._delivered

    def next_batch(self, batch_size: int):
        """At most ``batch_size`` items of the current epoch (empty once ``should_stop()``)."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        if batch_size > self._batch_hint:
            with self._buffer_cond:
                self._batch_hint = batch_size
                self._buffer_cond.notify_all()
        parts, got = [], 0
        while got < batch_size and not self._stopped:
            limit = self._limit()
            if limit is not None and self._delivered >= limit:
                if self._bound.final:  # this epoch is complete for every node
                    self._end_epoch(self._epoch_rows_left_in_stream())
                    break
                # Wait even with a part of the batch in hand: batch boundaries must not depend
                # on timing, or equal rows would still make unequal steps.
                self._wait_for_bound()
                continue
            if self._chunk is None:
                chunk = self._next_chunk()
                if chunk is _EOF:
                    if limit is not None and not self._bound.final:
                        self._wait_for_bound()
                        continue
                    self._end_epoch(0)
                    break
                self._chunk, self._chunk_pos = chunk, 0
            rows = _rows(self._chunk) - self._chunk_pos
            take = min(batch_size - got, rows, (limit - self._delivered) if limit is not None
                       else rows)
            parts.append(_slice(self._chunk, self._chunk_pos, take))
            self._chunk_pos += take
            self._delivered += take
            self.rows_fed += take
            got += take
            if self._chunk_pos >= _rows(self._chunk):
                self._chunk = None
        return self._assemble(parts)

    def _assemble(self, parts: list):
        if self._schema is None:  # an RDD: lists of elements
            return [item for part in parts for item in part]
        table = self._pa.Table.from_batches(parts, schema=self._schema) if parts else \
            self._schema.empty_table()
        names = self.input_mapping or {n: n for n in self._schema.names}
        return {out: column_to_numpy(col, table.column(col).combine_chunks())
                for col, out in names.items()}

    @property
    def rows_held_back(self) -> int:
        """Rows of this node's share not delivered, over every epoch so far (equalization)."""
        held = self._replay_held_back
        if self._epoch0_delivered is not None:
            total = self._stream_rows if self._stream_rows is not None else self._received
            held += total - self._epoch0_delivered
        return held

    @property
    def epoch(self) -> int:
        """The epoch ``next_batch`` hands out rows from (0 first)."""
        return self._epoch

    def should_stop(self) -> bool:
        """True once every epoch has been delivered, or after :meth:`terminate`."""
        return self._stopped

    def terminate(self) -> None:
        """Stop the feed now: the Spark side stops reading the partition."""
        if self._terminated:
            return
        self._terminated = self._stopped = True
        try:
            with self._send_lock:
                feedwire.send_frame(self._sock, feedwire.TERMINATE, b"")
        except OSError:
            pass
        if self.config.equalize:
            self._report(messages.make("feed_progress", received=self._delivered, ended=True))

    def batch_results(self, results) -> None:
        """Send one output per row of the batch just taken (inference)."""
        if self.train_mode:
            raise FeedError("batch_results() is for inference: get the feed with "
                            "ctx.get_data_feed(train_mode=False)")
        results = list(results)
        with self._send_lock:
            feedwire.send_frame(self._sock, feedwire.RESULT,
                                pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL))
        self.results_sent += len(results)

    def close(self) -> None:
        """End of this node's use of the feed (called by sparktf when main_fn returns).

        Inference must answer every row of the share: a main_fn that returns (or terminates
        the feed) before it has read and answered all of them fails with :class:`FeedError`
        instead of leaving the output short.
        """
        try:
            if not self.train_mode:
                self._check_answered()
        finally:
            self._release()

    def _check_answered(self) -> None:
        if not self._stream_done:
            raise FeedError(
                f"main_fn returned (or called terminate()) after reading {self.rows_fed} of "
                f"this node's {self._stream_rows if self._stream_rows is not None else 'more'} "
                "input rows; inference needs one output per row: read until "
                "feed.should_stop() and call feed.batch_results() for every batch")
        if self.results_sent != self._received:
            raise FeedError(f"main_fn sent {self.results_sent} outputs for {self._received} "
                            "input rows; call feed.batch_results() with one output per row")
        with self._send_lock:
            feedwire.send_frame(self._sock, feedwire.RESULTS_END, json.dumps(
                {"rows": self._received, "results": self.results_sent}).encode())

    def _release(self) -> None:
        if self.train_mode and self.config.equalize and self._stopped and not self._terminated:
            # Count exactly what equalization held back: the reader drains what is left.
            self._stream_ended.wait(self.config.feed_timeout)
        self._terminated = True
        self._sock.close()
        if self._spool is not None:
            self._spool.close()
            try:
                os.unlink(self._spool_path)
            except OSError:
                pass

    def to_dataset(self, batch_size: int, output_signature=None):
        """A ``tf.data.Dataset`` of this node's batches for one epoch per iteration.

        Iterate it once per epoch (``model.fit(ds, epochs=num_epochs)``). Elements are dicts of
        column -> tensor for a DataFrame; for an RDD of tuples/arrays give ``output_signature``
        or let it be read from the first element. Auto-sharding is off: the data already is
        this node's share.
        """
        import tensorflow as tf

        first = self.next_batch(batch_size)
        if output_signature is None:
            output_signature = _signature(tf, first)
        pending = [first]

        def batches():
            while pending:
                yield _structure(pending.pop())
            while not self.should_stop():
                batch = self.next_batch(batch_size)
                if _count(batch) == 0:
                    return  # end of this epoch
                yield _structure(batch)
                if self._delivered == 0:  # that batch closed the epoch
                    return

        ds = tf.data.Dataset.from_generator(batches, output_signature=output_signature)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = \
            tf.data.experimental.AutoShardPolicy.OFF
        return ds.with_options(options)


def _rows(chunk) -> int:
    return chunk.num_rows if hasattr(chunk, "num_rows") else len(chunk)


def _slice(chunk, start: int, n: int):
    return chunk.slice(start, n) if hasattr(chunk, "num_rows") else chunk[start:start + n]


def _count(batch) -> int:
    if isinstance(batch, dict):
        return len(next(iter(batch.values()))) if batch else 0
    return len(batch)


def _structure(batch):
    """RDD elements (tuples of arrays/scalars) stacked into a tuple of arrays."""
    import numpy as np

    if isinstance(batch, dict):
        return batch
    try:
        if batch and isinstance(batch[0], (tuple, list)):
            return tuple(np.stack([np.asarray(e[i]) for e in batch])
                         for i in range(len(batch[0])))
        return np.stack([np.asarray(e) for e in batch])
    except (ValueError, IndexError) as exc:
        shapes = sorted({str(np.shape(e[0] if isinstance(e, (tuple, list)) else e))
                         for e in batch})
        raise FeedError(f"to_dataset() needs RDD elements of one structure and shape; this "
                        f"batch has elements of different shapes ({', '.join(shapes[:4])}): "
                        f"{exc}. Make every element the same shape, or use next_batch() and "
                        "handle them yourself") from None


def _signature(tf, batch):
    data = _structure(batch)

    def spec(a):
        return tf.TensorSpec(shape=(None,) + a.shape[1:], dtype=tf.as_dtype(a.dtype)
                             if a.dtype != object else tf.string)

    if isinstance(data, dict):
        return {k: spec(v) for k, v in data.items()}
    if isinstance(data, tuple):
        return tuple(spec(a) for a in data)
    return spec(data)
