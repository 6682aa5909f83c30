"""Inference: the TF process's outputs read back while the partition is sent, bounded, checked
against the rows fed and turned into the stage's output (record batches or elements).
"""

from __future__ import annotations

import json
import pickle
import queue
import socket
import threading
import time
from collections.abc import Iterator

from sparktf.common import feedwire, protocol
from sparktf.common.spec import LaunchSpec
from sparktf.task.feederror import TaskFeedError


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
    assert launch.feed is not None  # (a job with a feed)
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
        columns = [values]
    else:
        rows = [v if isinstance(v, dict) else dict(zip(schema.names, v)) for v in values]
        columns = [[row.get(name) for row in rows] for name in schema.names]
    arrays = [_column(field, column) for field, column in zip(schema, columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _column(field, values: list):
    """One output column as Arrow: a bare output or a dict's value alike (Keras' ``(n, 1)``
    fills a scalar column either way); a misfit says what would fit."""
    import pyarrow as pa

    values = _one_per_row(values, field.type)
    try:
        return pa.array(values, type=field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise TaskFeedError(_misfit(field, values, exc)) from None


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
