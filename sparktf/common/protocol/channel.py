"""A connection carrying pickled, MAC-sealed messages (Channel), and connecting one to a server
with retries.
"""

from __future__ import annotations

import logging
import pickle
import socket
import threading
import time
from typing import Any

from sparktf.common.protocol.auth import (
    _HEADER,
    MAX_FRAME,
    MAX_HELLO,
    TAG_LEN,
    Session,
    client_handshake,
)
from sparktf.common.protocol.exceptions import AuthenticationError, FrameRejected, TurnedAway
from sparktf.common.protocol.sockets import _recv_exact, recv_before, recv_exact_into

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ messages
class Channel:
    """An authenticated connection carrying pickled messages; ``send`` is thread-safe, one
    thread at a time receives.

    ``session`` is the connection's frame keys (what :func:`connect` and the driver's
    :class:`~sparktf.driver.control.ControlServer` give it); without one, frames carry no MAC,
    which is only for a socket pair within one host that no one else can reach (tests).
    ``report_rejections``: a frame refused is also reported to the peer as an ``error``
    message (the nodes' side: the driver then fails the job with the reason).
    """

    def __init__(
        self, sock: socket.socket, session: Session | None = None, report_rejections: bool = False
    ) -> None:
        self.sock = sock
        self.session = session
        self._report = report_rejections
        self._send_lock = threading.Lock()
        self._closed = False
        self._rejected: FrameRejected | None = None

    def send(self, message: Any) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        header = _HEADER.pack(len(payload))
        with self._send_lock:
            tag = self.session.sending.seal(header, payload) if self.session else b""
            self.sock.sendall(b"".join((header, payload, tag)))

    def recv(self, deadline: float | None = None) -> Any:
        """The next message; with ``deadline``, all of it must arrive before then (and it
        may be at most ``MAX_HELLO`` bytes). :class:`FrameRejected` if its MAC fails."""
        if self._rejected is not None:
            raise self._rejected
        if deadline is not None:
            header = bytes(recv_before(self.sock, _HEADER.size, deadline))
        else:
            header = _recv_exact(self.sock, _HEADER.size)
        (size,) = _HEADER.unpack(header)
        limit = MAX_HELLO if deadline is not None else MAX_FRAME
        if size > limit:
            raise ConnectionError(f"frame of {size} bytes is over the {limit} limit")
        tag_len = TAG_LEN if self.session else 0
        if deadline is not None:
            body = recv_before(self.sock, size + tag_len, deadline)
        else:
            body = recv_exact_into(self.sock, size + tag_len)
        view = memoryview(body)
        if self.session is not None:
            try:
                self.session.receiving.verify(view[size:], header, view[:size])
            except FrameRejected as exc:
                self._refused(exc)
                raise
        return pickle.loads(view[:size])

    def _refused(self, exc: FrameRejected) -> None:
        self._rejected = exc
        if self._report:
            from sparktf.common import messages

            try:
                self.send(messages.error("control", exc))
            except OSError:
                pass
        log.error("sparktf: %s", exc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


#: The most one try of :func:`connect` waits for the server (a full accept queue drops the
#: SYN, which the kernel sends again after 1, 3, 7 s).
TRY_TIMEOUT = 10.0


def connect(
    address: tuple[str, int], secret: bytes, timeout: float = 30.0, what: str = "control channel"
) -> Channel:
    """Open an authenticated channel to the server at ``address``.

    A server that refuses the connection, is late, or turns it away before its verdict (it
    holds too many unauthenticated connections, or our handshake ran past its deadline) is
    tried again, with backoff, until ``timeout``; a refused secret is final.
    """
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            return connect_once(
                address, secret, max(0.1, min(TRY_TIMEOUT, deadline - time.monotonic())), what
            )
        except AuthenticationError:
            raise
        except (ConnectionRefusedError, ConnectionResetError, TurnedAway, TimeoutError):
            if time.monotonic() + delay >= deadline:
                raise
            time.sleep(delay)
            delay = min(1.0, delay * 2)


def connect_once(
    address: tuple[str, int], secret: bytes, timeout: float, what: str = "control channel"
) -> Channel:
    """One authenticated connection to ``address``, no retry."""
    sock = socket.create_connection(address, timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        session = client_handshake(sock, secret, timeout, what)
    except BaseException:
        sock.close()
        raise
    return Channel(sock, session, report_rejections=True)
