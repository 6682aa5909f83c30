"""Socket reads and waits with deadlines: exactly n bytes, readable or writable within a time."""

from __future__ import annotations

import select
import socket
import time
from typing import Any

from sparktf.common.protocol.exceptions import ChannelClosed


def recv_exact_into(sock: socket.socket, n: int, buf: Any = None) -> Any:
    """Exactly ``n`` bytes into ``buf`` (any writable buffer of ``n`` bytes; by default a new
    ``bytearray``), which it returns (no copy afterwards: Arrow can wrap it)."""
    buf = bytearray(n) if buf is None else buf
    view = memoryview(buf).cast("B")
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ChannelClosed(f"connection closed after {got} of {n} bytes")
        got += k
    return buf


def _ready(sock, event: int, timeout: float) -> bool:
    """``poll``, not ``select``: a TensorFlow process may well hold more than 1024
    descriptors, and ``select`` fails on any numbered above that."""
    poller = select.poll()
    poller.register(sock, event)
    return bool(poller.poll(max(0.0, timeout) * 1000))


def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` (a socket or a descriptor) has something to read, or an error or hang-up
    to report, within ``timeout`` seconds."""
    return _ready(sock, select.POLLIN, timeout)


def wait_writable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` can take more bytes (or has an error to report) within ``timeout``."""
    return _ready(sock, select.POLLOUT, timeout)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    return bytes(recv_exact_into(sock, n))


def recv_before(sock: socket.socket, n: int, deadline: float, buf: Any = None) -> Any:
    """Exactly ``n`` bytes (into ``buf`` if given), all of them before ``deadline``
    (``time.monotonic()``): a peer that dribbles a byte at a time cannot stretch the wait
    (``socket.timeout`` when late)."""
    buf = bytearray(n) if buf is None else buf
    view, got = memoryview(buf).cast("B"), 0
    while got < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"not complete in time ({got} of {n} bytes)")
        sock.settimeout(remaining)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ChannelClosed(f"connection closed after {got} of {n} bytes")
        got += k
    return buf
