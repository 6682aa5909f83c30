"""Frames kept on local disk: a node's share for epochs after the first, and, where rows may
move between nodes, frames spilled while its consumer waits for its peers and the rows it takes
from them (see :mod:`sparktf.node.feed.stream` and :mod:`sparktf.node.feed.exchange`).

Frames are appended exactly as they arrived (Arrow IPC or pickled bytes) and read back one at
a time, each into a buffer of its own, so replaying holds one frame in memory, not the share.
"""

from __future__ import annotations

import os
from typing import Any

from sparktf.errors import FeedError
from sparktf.node.feed import batches


class Spool:
    """An append-only file of frames and the index to read them back: (offset, size, rows,
    kind) of each."""

    def __init__(self, path: str, max_bytes: int | None, num_epochs: int) -> None:
        self.path = path
        self._max_bytes = max_bytes
        self._num_epochs = num_epochs
        self._file = open(path, "wb")
        self._read_fd: int | None = None
        self.frames: list[tuple[int, int, int, bytes]] = []

    def append(self, kind: bytes, payload: Any, rows: int) -> None:
        offset = self._file.tell()
        if self._max_bytes is not None and offset + len(payload) > self._max_bytes:
            why = (
                f"num_epochs={self._num_epochs} keeps on local disk"
                if self._num_epochs > 1
                else "equalizing keeps on local disk to move rows between unequal "
                "shares (equalize=False keeps nothing)"
            )
            raise FeedError(
                f"this node's share of the data is over spark.sparktf.spoolMaxBytes="
                f"{self._max_bytes} bytes, which {why}: raise the limit, or add nodes"
            )
        self._file.write(payload)
        self.frames.append((offset, len(payload), rows, kind))

    def flush(self) -> None:
        """Make what was appended readable (before anyone may replay it)."""
        self._file.flush()

    def read(self, index: int) -> tuple[bytes, Any, int]:
        """``(kind, payload, rows)`` of one frame (appended and flushed before); safe to call
        while another thread appends."""
        offset, size, rows, kind = self.frames[index]
        if self._read_fd is None:
            self._read_fd = os.open(self.path, os.O_RDONLY)
        payload = batches.buffer_for(kind, size)
        view, got = memoryview(payload).cast("B"), 0
        while got < size:
            n = os.preadv(self._read_fd, [view[got:]], offset + got)
            if not n:
                raise FeedError(
                    f"the spool file {self.path} is shorter than what was written to it"
                )
            got += n
        return kind, payload, rows

    def close(self) -> None:
        """Close and delete the file."""
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None
        self._file.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
