"""Large bytes of the launch spec (``main_fn`` and its ``args``) shipped to the barrier tasks as
a Spark broadcast of their own, so that the task closure, which carries the job's secret, stays
small.

PySpark puts a task closure larger than ``spark.broadcast.UDFCompressionThreshold`` (1 MiB by
default) into a broadcast, and a broadcast is written to files: on the driver (its pyspark
temporary directory) and on every executor (the file a Python worker reads it from). With
``args`` over 1 MiB inside the closure, the secret went to disk with them. Shipped apart,
only ``main_fn`` and ``args`` are in those files.

:func:`for_tasks` runs on the driver. On the executor, unpickling the closure calls
:func:`_value_of` with the broadcast PySpark's worker has already set up, so the barrier task
finds plain bytes where the driver put the reference. Imports pyspark only on the driver,
and only when shipping.
"""

from __future__ import annotations

from typing import Any

#: Bytes above this travel as a broadcast of their own (well under PySpark's 1 MiB default).
INLINE_LIMIT = 256 << 10


class BroadcastBytes:
    """Bytes held in a Spark broadcast; pickles as a reference to it."""

    def __init__(self, broadcast, size: int) -> None:
        self.broadcast = broadcast
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __reduce__(self):
        return (_value_of, (self.broadcast,))

    def __repr__(self) -> str:
        return f"BroadcastBytes({self.size} bytes)"


def _value_of(broadcast) -> bytes:
    """On the executor: the broadcast's bytes."""
    return broadcast.value


def for_tasks(sc: Any, data: bytes) -> bytes | BroadcastBytes:
    """``data`` itself if it is small, else a reference to a broadcast of it on ``sc``."""
    if len(data) <= INLINE_LIMIT or not callable(getattr(sc, "broadcast", None)):
        return data  # (a Spark Connect client has no broadcasts: in the function it sends)
    return BroadcastBytes(sc.broadcast(data), len(data))
