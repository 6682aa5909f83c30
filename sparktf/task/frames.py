"""A partition as feed frames (:mod:`sparktf.common.feedwire`): Arrow record batches as IPC
messages without a copy, RDD elements pickled in chunks, Spark's pickled batches packed as they
are; then the end with the row count.
"""

from __future__ import annotations

import itertools
import json
import pickle
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from sparktf.common import feedwire

if TYPE_CHECKING:
    import pyarrow as pa


def partition_frames(
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


class _ArrowMessages:
    """Record batches as Arrow IPC messages, each a list of buffers: the body buffers are the
    batch's own, not copied into one buffer as ``batch.serialize()`` does (a tenth of a
    second per 470 MB fed), and ``sendmsg`` gathers them. The bytes are the same as
    ``serialize()``'s; a batch whose message is not (pyarrow would have to write dictionaries
    before it) is serialized instead."""

    closed = False  # the pyarrow output sink protocol: a file-like object that stays open

    def __init__(self) -> None:
        self._parts: list = []
        self._writer: Any = None  # a pyarrow RecordBatchStreamWriter, once a batch came

    def write(self, data: pa.Buffer) -> int:
        self._parts.append(data)
        return memoryview(data).nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def of(self, batch: pa.RecordBatch) -> list:
        import pyarrow as pa

        writer = self._writer
        if writer is None:
            writer = self._writer = pa.ipc.new_stream(self, batch.schema)
            writer.write_batch(batch.slice(0, 0))  # the stream's schema goes first
        self._parts = []
        try:
            writer.write_batch(batch)
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


#: A frame being filled goes out once its first row has waited this long (seconds), full or
#: not: rows that Spark computes slowly (a slow map upstream) reach their node as they come,
#: so its feed, and every other node's, sees them flow (feed_timeout is an idle timeout).
FLUSH_SECS = 0.25


def _packs(frames: Iterable[bytes], size: int, flush: float = FLUSH_SECS) -> Iterator[list]:
    """Group byte strings into lists of about ``size`` bytes (or what came in ``flush``
    seconds)."""
    pack: list[bytes] = []
    total, since = 0, 0.0
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
    chunk: list = []
    since = 0.0
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
