"""The control and log channel between the driver and its nodes.

A TCP connection, authenticated before anything else with a mutual HMAC-SHA256
challenge-response over a per-job secret, then length-prefixed pickled messages (dicts).

Handshake (fixed sizes, so an unauthenticated peer can never make the server allocate or
unpickle anything)::

    server -> client   MAGIC | server_nonce(32)
    client -> server   HMAC(secret, "client" | server_nonce)(32) | client_nonce(32)
    server -> client   HMAC(secret, "server" | client_nonce)(32)

The secret itself never crosses the wire. This module imports neither pyspark nor tensorflow.
"""

from __future__ import annotations

import hashlib
import hmac
import pickle
import secrets
import select
import socket
import struct
import threading
import time
from typing import Any

MAGIC = b"SPARKTF1"
NONCE_LEN = 32
MAC_LEN = 32
MAX_FRAME = 1 << 31  # 2 GiB: only authenticated peers get to send frames
MAX_HELLO = 1 << 16  # the first message (hello), read under the handshake's deadline
_HEADER = struct.Struct("!Q")


class ChannelClosed(ConnectionError):
    """The peer closed the connection."""


class AuthenticationError(ConnectionError):
    """The peer did not prove it holds this job's secret."""


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def _mac(secret: bytes, label: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret, label + nonce, hashlib.sha256).digest()


def recv_exact_into(sock: socket.socket, n: int, buf=None):
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


def wait_readable(sock, timeout: float) -> bool:
    """Whether ``sock`` (a socket or a descriptor) has something to read, or an error or hang-up
    to report, within ``timeout`` seconds."""
    return _ready(sock, select.POLLIN, timeout)


def wait_writable(sock, timeout: float) -> bool:
    """Whether ``sock`` can take more bytes (or has an error to report) within ``timeout``."""
    return _ready(sock, select.POLLOUT, timeout)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    return bytes(recv_exact_into(sock, n))


def recv_before(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Exactly ``n`` bytes, all of them before ``deadline`` (``time.monotonic()``): a peer
    that dribbles a byte at a time cannot stretch the wait (``socket.timeout`` when late)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout(f"handshake not complete in time ({got} of {n} bytes)")
        sock.settimeout(remaining)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ChannelClosed(f"connection closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


def server_handshake(sock: socket.socket, secret: bytes, deadline: float) -> None:
    """Authenticate the client on ``sock`` (the server side) before ``deadline``; raises on
    any failure."""
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    nonce = secrets.token_bytes(NONCE_LEN)
    sock.sendall(MAGIC + nonce)
    reply = recv_before(sock, MAC_LEN + NONCE_LEN, deadline)
    if not hmac.compare_digest(reply[:MAC_LEN], _mac(secret, b"client", nonce)):
        raise AuthenticationError("client failed the challenge: wrong or missing job secret")
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    sock.sendall(_mac(secret, b"server", reply[MAC_LEN:]))


def client_handshake(sock: socket.socket, secret: bytes, timeout: float) -> None:
    """Prove we hold ``secret`` and check that the server does too."""
    sock.settimeout(timeout)
    try:
        hello = _recv_exact(sock, len(MAGIC) + NONCE_LEN)
    except (ChannelClosed, ConnectionResetError) as exc:
        raise _TurnedAway(f"the driver closed the connection before its greeting: {exc}") \
            from None
    if hello[: len(MAGIC)] != MAGIC:
        raise AuthenticationError("the peer is not a sparktf driver")
    nonce = secrets.token_bytes(NONCE_LEN)
    sock.sendall(_mac(secret, b"client", hello[len(MAGIC):]) + nonce)
    try:
        proof = _recv_exact(sock, MAC_LEN)
    except ChannelClosed:
        raise AuthenticationError("the driver refused this job secret") from None
    if not hmac.compare_digest(proof, _mac(secret, b"server", nonce)):
        raise AuthenticationError("the driver failed the challenge: wrong job secret")
    sock.settimeout(None)


class Channel:
    """An authenticated connection carrying pickled messages; ``send`` is thread-safe."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()
        self._closed = False

    def send(self, message: Any) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._send_lock:
            self.sock.sendall(_HEADER.pack(len(payload)) + payload)

    def recv(self, deadline: float | None = None) -> Any:
        """The next message; with ``deadline``, all of it must arrive before then."""
        if deadline is not None:
            (size,) = _HEADER.unpack(recv_before(self.sock, _HEADER.size, deadline))
            if size > MAX_HELLO:
                raise ConnectionError(f"first message of {size} bytes is over {MAX_HELLO}")
            return pickle.loads(recv_before(self.sock, size, deadline))
        (size,) = _HEADER.unpack(_recv_exact(self.sock, _HEADER.size))
        if size > MAX_FRAME:
            raise ConnectionError(f"frame of {size} bytes is over the {MAX_FRAME} limit")
        return pickle.loads(_recv_exact(self.sock, size))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class _TurnedAway(ConnectionError):
    """The server closed the connection before greeting it (it is full): try again."""


def connect(address: tuple[str, int], secret: bytes, timeout: float = 30.0) -> Channel:
    """Open an authenticated channel to the driver at ``address``.

    A driver that refuses the connection or turns it away before its greeting (it holds too
    many unauthenticated connections) is tried again, with backoff, until ``timeout``.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            return connect_once(address, secret, max(0.1, deadline - time.monotonic()))
        except (ConnectionRefusedError, _TurnedAway):
            if time.monotonic() + delay >= deadline:
                raise
            time.sleep(delay)
            delay = min(1.0, delay * 2)


def connect_once(address: tuple[str, int], secret: bytes, timeout: float) -> Channel:
    """One authenticated connection to ``address``, no retry (a peer that is always there
    before its address is known: a refusal is final)."""
    sock = socket.create_connection(address, timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client_handshake(sock, secret, timeout)
    except BaseException:
        sock.close()
        raise
    return Channel(sock)
