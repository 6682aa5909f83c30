"""``loads``: ``pickle.loads`` for the feed's RDD elements, with numpy arrays rebuilt in one C call.

An RDD of numpy arrays (the usual way to feed features) reaches the node as Spark's pickles,
protocol 5, where each array is ``numpy._core.numeric._frombuffer(buffer, dtype, shape,
order)``: a Python function that calls ``frombuffer`` and then ``reshape``, once per array. That
Python-level call was half of the node's CPU for such a feed (bench/feed_throughput.py, py-spy of
the node). :func:`loads` resolves that one name to ``numpy.ndarray(shape, dtype, buffer, 0,
None, order)``, the same array over the same buffer, built by the constructor itself; anything
unusual (``order="K"`` with an axis order) goes to numpy's own function. Every other global
resolves as ``pickle`` resolves it. The pickle is read in place (no copy of the frame).

No numpy import here: numpy is imported by the pickles that reference it.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

_FROMBUFFER = {("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer")}
_REBUILDERS: dict = {}  # numpy's _frombuffer -> the rebuilder standing in for it


def _rebuilder(frombuffer):
    from numpy import ndarray

    def rebuild(
        buf: bytes | bytearray | memoryview,
        dtype: np.dtype,
        shape: tuple[int, ...],
        order: Literal["C", "F", "K", "A"],
        *axis_order: tuple[int, ...] | None,
    ) -> np.ndarray:  # axis_order: numpy 2, order "K"
        if order in ("C", "F") and not any(a is not None for a in axis_order):
            return ndarray(shape, dtype, buf, 0, None, order)
        return frombuffer(buf, dtype, shape, order, *axis_order)

    return rebuild


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(module, name)
        if (module, name) in _FROMBUFFER:
            rebuild = _REBUILDERS.get(found)
            if rebuild is None:
                rebuild = _REBUILDERS[found] = _rebuilder(found)
            return rebuild
        return found


class _Reader:
    """A file over a buffer whose reads are views into it (the unpickler takes any buffer)."""

    __slots__ = ("view", "pos")

    def __init__(self, data) -> None:
        self.view = memoryview(data).cast("B")
        self.pos = 0

    def read(self, n: int | None = -1) -> memoryview:
        start = self.pos
        end = len(self.view) if n is None or n < 0 else min(len(self.view), start + n)
        self.pos = end
        return self.view[start:end]

    def readinto(self, buf: bytearray | memoryview) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def readline(self) -> memoryview:
        # Only protocols 0-3 read lines (their GLOBAL opcode): short ones, near at hand.
        start, size = self.pos, len(self.view)
        width = 256
        while True:
            chunk = self.view[start : min(size, start + width)].tobytes()
            i = chunk.find(b"\n")
            if i >= 0 or start + width >= size:
                end = start + i + 1 if i >= 0 else size
                self.pos = end
                return self.view[start:end]
            width *= 4


def loads(data: Any) -> Any:
    """``pickle.loads(data)`` (``data``: bytes or any buffer), numpy arrays built faster."""
    # typeshed's _ReadableFileobj wants read() -> bytes; the unpickler takes any buffer.
    return _Unpickler(_Reader(data)).load()  # type: ignore[arg-type]
