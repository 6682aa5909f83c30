"""The driver's control and log server: one per attempt, one connection per node process.

Runs on the driver. Each accepted connection is authenticated in its own thread before
anything is read from it (see :mod:`sparktf.common.protocol`), and the handshake plus the ``hello``
must complete within ``handshake_timeout`` in total, however slowly the peer dribbles its bytes.
At most ``max_pending`` connections may be unauthenticated at once: when that many are open, the
ones older than a second are dropped to make room, or, if none is, the new one is turned away
before the greeting (real clients try again; see :func:`sparktf.common.protocol.connect`). A peer that
fails is counted and dropped, and the job goes on. The acceptor survives running out of file
descriptors or threads; :meth:`ControlServer.close` never raises.

Authenticated connections start with a ``hello`` naming the node and its role (see
:mod:`sparktf.common.messages`); every later message goes to the handler, from the connection's thread.
"""

from __future__ import annotations

import errno
import logging
import pickle
import socket
import struct
import threading
import time
from typing import Protocol

from sparktf.common import messages, protocol

log = logging.getLogger(__name__)

#: Seconds a send to a node may block (a frozen peer's full buffer) before it counts as failed.
SEND_TIMEOUT = 5.0
#: Unauthenticated connections held at once, and the age after which one may be dropped.
MAX_PENDING = 64
EVICT_AFTER = 1.0
_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Handler(Protocol):
    def on_connect(self, node: str, role: str, chan: protocol.Channel, hello: dict) -> None: ...
    def on_message(self, node: str, role: str, message: dict) -> None: ...
    def on_disconnect(self, node: str, role: str) -> None: ...


class ControlServer:
    """Listens on ``bind_host``; ``address`` is what nodes connect to."""

    def __init__(self, bind_host: str, advertise_host: str, secret: bytes, handler: Handler,
                 handshake_timeout: float = 10.0, max_pending: int = MAX_PENDING) -> None:
        self._secret = secret
        self._handler = handler
        self._handshake_timeout = handshake_timeout
        self._max_pending = max_pending
        family = socket.getaddrinfo(bind_host, 0, type=socket.SOCK_STREAM)[0][0]
        self._sock = socket.create_server((bind_host, 0), family=family, backlog=128)
        self.address: tuple[str, int] = (advertise_host, self._sock.getsockname()[1])
        self.rejected = 0
        self.turned_away = 0
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._pending: dict[socket.socket, float] = {}  # unauthenticated, since when
        self._threads: set[threading.Thread] = set()
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept_loop, name="sparktf-control-accept",
                                          daemon=True)
        self._acceptor.start()

    # --------------------------------------------------------------------------- accepting
    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError as exc:
                if self._closed:
                    return
                if exc.errno in _RESOURCE_ERRORS:  # out of fds or memory: wait, go on
                    log.warning("sparktf: the control server cannot accept (%s); retrying", exc)
                    time.sleep(0.1)
                    continue
                if isinstance(exc, (ConnectionAbortedError, InterruptedError)):
                    continue
                log.warning("sparktf: the control server's socket failed: %s", exc)
                return
            try:
                self._admit(conn)
            except Exception as exc:  # noqa: BLE001 - e.g. no thread could be started
                log.warning("sparktf: dropped a control connection: %s", exc)
                self._forget(conn)
                _close_quietly(conn)

    def _admit(self, conn: socket.socket) -> None:
        now = time.monotonic()
        with self._lock:
            if self._closed:
                _close_quietly(conn)
                return
            if len(self._pending) >= self._max_pending:
                old = [c for c, since in self._pending.items() if now - since >= EVICT_AFTER]
                if not old:
                    self.turned_away += 1
                    _close_quietly(conn)  # before the greeting: a real client tries again
                    return
                oldest = min(old, key=self._pending.get)
                self._pending.pop(oldest)
                self.rejected += 1
                _shutdown_quietly(oldest)  # its thread sees the error and cleans up
            self._conns.add(conn)
            self._pending[conn] = now
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                 name="sparktf-control-conn")
            self._threads.add(t)
        t.start()

    def _forget(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)
            self._pending.pop(conn, None)
            self._threads.discard(threading.current_thread())

    # ---------------------------------------------------------------------------- serving
    def _authenticate(self, conn: socket.socket) -> tuple[protocol.Channel, dict] | None:
        deadline = time.monotonic() + self._handshake_timeout
        try:
            # Small messages leave at once: with Nagle's algorithm the second of two
            # back-to-back sends ('training_done', 'stop') waited for the peer's delayed ACK.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            protocol.server_handshake(conn, self._secret, deadline)
            chan = protocol.Channel(conn)
            hello = chan.recv(deadline)
            if not (isinstance(hello, dict) and hello.get("type") == "hello"
                    and isinstance(hello.get("node"), str)
                    and hello.get("role") in messages.ROLES):
                raise protocol.AuthenticationError(f"bad hello message: {hello!r:.200}")
            conn.settimeout(None)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                            struct.pack("ll", int(SEND_TIMEOUT), 0))
            with self._lock:
                self._pending.pop(conn, None)
            return chan, hello
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, struct.error) as exc:
            with self._lock:
                self.rejected += conn in self._pending
                self._pending.pop(conn, None)
            if not self._closed:
                log.warning("sparktf: rejected a connection to the control server: %s", exc)
            return None

    def _serve(self, conn: socket.socket) -> None:
        try:
            authed = self._authenticate(conn)
            if authed is None:
                return
            chan, hello = authed
            node, role = hello["node"], hello["role"]
            self._handler.on_connect(node, role, chan, hello)
            try:
                while True:
                    self._handler.on_message(node, role, chan.recv())
            except (OSError, EOFError, pickle.UnpicklingError):
                pass
            self._handler.on_disconnect(node, role)
        except Exception:  # noqa: BLE001 - a handler bug must not pass unseen
            log.exception("sparktf: the control connection's handler failed")
        finally:
            self._forget(conn)
            _close_quietly(conn)

    def close(self) -> None:
        """Stop accepting, drop every connection, and wait for the connection threads.
        Idempotent, and never raises."""
        try:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                conns = list(self._conns)
                threads = list(self._threads)
            woken = _shutdown_quietly(self._sock)  # wakes the blocked accept()
            _close_quietly(self._sock)
            for conn in conns:
                _shutdown_quietly(conn)
            if threading.current_thread() is not self._acceptor:
                if not woken:
                    # The socket was closed under us: an accept() already blocked on it is
                    # not woken by that, but the kernel still listens for it. Knock.
                    _knock(self.address)
                self._acceptor.join(timeout=5)
            for t in threads:
                if t is not threading.current_thread():
                    t.join(timeout=5)
        except Exception:  # noqa: BLE001 - closing must not fail the caller
            log.exception("sparktf: closing the control server failed")


def _shutdown_quietly(sock: socket.socket) -> bool:
    try:
        sock.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False


def _knock(address: tuple[str, int]) -> None:
    try:
        socket.create_connection(address, timeout=1).close()
    except OSError:
        pass


def _close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
