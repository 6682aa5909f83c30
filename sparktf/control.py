"""The driver's control and log server: one per job, one connection per node process.

Each accepted connection is authenticated in its own thread, with a timeout, before anything
is read from it (see :mod:`sparktf.protocol`); a peer that fails is counted and dropped, and the
job goes on. Authenticated connections start with a ``hello`` naming the node and its role
(``"node"``: the TF process, ``"agent"``: its supervisor); every later message goes to the
handler. The handler is called from the connection threads.
"""

from __future__ import annotations

import logging
import pickle
import socket
import threading
from typing import Protocol

from sparktf import protocol

log = logging.getLogger(__name__)


class Handler(Protocol):
    def on_connect(self, node: str, role: str, chan: protocol.Channel, hello: dict) -> None: ...
    def on_message(self, node: str, role: str, message: dict) -> None: ...
    def on_disconnect(self, node: str, role: str) -> None: ...


class ControlServer:
    """Listens on ``bind_host``; ``address`` is what nodes connect to."""

    def __init__(self, bind_host: str, advertise_host: str, secret: bytes, handler: Handler,
                 handshake_timeout: float = 10.0) -> None:
        self._secret = secret
        self._handler = handler
        self._handshake_timeout = handshake_timeout
        family = socket.getaddrinfo(bind_host, 0, type=socket.SOCK_STREAM)[0][0]
        self._sock = socket.create_server((bind_host, 0), family=family)
        self.address: tuple[str, int] = (advertise_host, self._sock.getsockname()[1])
        self.rejected = 0
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept_loop, name="sparktf-control-accept",
                                          daemon=True)
        self._acceptor.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conns.add(conn)
                t = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                     name="sparktf-control-conn")
                self._threads = [x for x in self._threads if x.is_alive()] + [t]
            t.start()

    def _authenticate(self, conn: socket.socket) -> tuple[protocol.Channel, dict] | None:
        try:
            protocol.server_handshake(conn, self._secret, self._handshake_timeout)
            chan = protocol.Channel(conn)
            conn.settimeout(self._handshake_timeout)
            hello = chan.recv()
            conn.settimeout(None)
            if not (isinstance(hello, dict) and hello.get("type") == "hello"
                    and isinstance(hello.get("node"), str) and hello.get("role") in ("node", "agent", "task")):
                raise protocol.AuthenticationError(f"bad hello message: {hello!r:.200}")
            return chan, hello
        except (OSError, EOFError, pickle.UnpicklingError, ValueError) as exc:
            with self._lock:
                self.rejected += 1
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
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def close(self) -> None:
        """Stop accepting, drop every connection, and wait for the connection threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns)
            threads = list(self._threads)
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._sock.close()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._acceptor.join(timeout=5)
        for t in threads:
            t.join(timeout=5)
