"""The driver's control and log server: one per attempt, one connection per node process.

Runs on the driver. Connections are accepted and authenticated by a
:class:`~sparktf.common.protocol.Gatekeeper` (one thread, every handshake under its own
deadline, at most ``max_pending`` unauthenticated at once; see :mod:`sparktf.common.protocol`),
which hands each authenticated peer to a thread of its own. Its first message, the ``hello``,
must arrive within what is left of ``handshake_timeout``, however slowly the peer dribbles its
bytes. A peer that fails is counted and dropped, and the job goes on; the acceptor survives
running out of file descriptors or threads; :meth:`ControlServer.close` never raises.

Authenticated connections start with a ``hello`` naming the node and the peer, the kind of
process at the other end (see :mod:`sparktf.common.messages`); every later message goes to the
handler, from the connection's thread. Every frame carries a MAC: a frame that fails it (forged, altered, replayed) ends the
connection and is the job's failure (the handler's ``on_security_error``; a handler without one
gets it as an ``error`` message from that node).
"""

from __future__ import annotations

import logging
import pickle
import socket
import struct
import threading
from typing import Protocol

from sparktf.common import keepalive, messages, ports, protocol

log = logging.getLogger(__name__)

#: Seconds a send to a node may block (a frozen peer's full buffer) before it counts as failed.
SEND_TIMEOUT = 5.0
#: The receive buffer of every connection to the driver (bytes; the kernel caps it at
#: net.core.rmem_max, and doubles it for its bookkeeping): what the nodes may write while the
#: driver reads nothing (paused) before their window shuts, after which their
#: TCP_USER_TIMEOUT (30 s) ends the connection. Measured (2 KB/s in 100-byte frames, a reader
#: that reads nothing): ended after 117 s with the kernel's autotuned default (198 KB), 193 s
#: with 425 KB (Debian's rmem_max), still open after 300 s with this one.
RECV_BUFFER = 4 << 20
#: Unauthenticated connections held at once (see protocol.Gatekeeper).
MAX_PENDING = 256
EVICT_AFTER = protocol.EVICT_AFTER


class Handler(Protocol):
    def on_connect(self, node: str, peer: str, chan: protocol.Channel, hello: dict) -> None: ...
    def on_message(self, node: str, peer: str, message: dict) -> None: ...
    def on_disconnect(self, node: str, peer: str) -> None: ...

    # optional: def on_security_error(self, node, peer, exc: protocol.SecurityError) -> None


class ControlServer:
    """Listens on ``bind_host``; ``address`` is what nodes connect to."""

    def __init__(
        self,
        bind_host: str,
        advertise_host: str,
        secret: bytes,
        handler: Handler,
        handshake_timeout: float = 10.0,
        max_pending: int = MAX_PENDING,
        port_range: ports.PortRange | None = None,
        peer_silent_secs: int = keepalive.NODE_SILENT_SECS,
    ) -> None:
        self._handler = handler
        self._peer_silent_secs = peer_silent_secs
        self._sock, self._claim = ports.listening_socket(
            bind_host, port_range, "the driver's control server", backlog=128
        )
        try:  # inherited by every accepted connection
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER)
        except OSError:
            pass
        self.address: tuple[str, int] = (advertise_host, self._sock.getsockname()[1])
        self.bad_hellos = 0
        self.frames_rejected = 0
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._closed = False
        try:
            self._gate = protocol.Gatekeeper(
                self._sock,
                secret,
                self._admit,
                what="control server",
                handshake_timeout=handshake_timeout,
                max_pending=max_pending,
            )
        except BaseException:
            _close_quietly(self._sock)
            ports.release(self._claim)
            raise
        self._acceptor = self._gate.thread

    @property
    def rejected(self) -> int:
        """Connections dropped before their hello was accepted (wrong secret, late, evicted,
        closed, a bad hello)."""
        return self._gate.rejected + self.bad_hellos

    @property
    def turned_away(self) -> int:
        """Connections closed before the greeting: too many handshakes under way."""
        return self._gate.turned_away

    @property
    def gate(self) -> protocol.Gatekeeper:
        return self._gate

    # --------------------------------------------------------------------------- accepting
    def _admit(self, conn: socket.socket, session: protocol.Session, deadline: float) -> None:
        with self._lock:
            if self._closed:
                _close_quietly(conn)
                return
            self._conns.add(conn)
            t = threading.Thread(
                target=self._serve,
                args=(conn, session, deadline),
                daemon=True,
                name="sparktf-control-conn",
            )
            self._threads.add(t)
        try:
            t.start()
        except BaseException:
            self._forget(conn)
            raise

    def _forget(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)
            self._threads.discard(threading.current_thread())

    # ---------------------------------------------------------------------------- serving
    def _hello(
        self, conn: socket.socket, session: protocol.Session, deadline: float
    ) -> tuple[protocol.Channel, dict] | None:
        try:
            # Small messages leave at once: with Nagle's algorithm the second of two
            # back-to-back sends ('training_done', 'stop') waited for the peer's delayed ACK.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            chan = protocol.Channel(conn, session)
            hello = chan.recv(deadline)
            if not (
                isinstance(hello, dict)
                and hello.get("type") == "hello"
                and isinstance(hello.get("node"), str)
                and hello.get("peer") in messages.PEERS
            ):
                raise protocol.AuthenticationError(f"bad hello message: {hello!r:.200}")
            conn.settimeout(None)
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(SEND_TIMEOUT), 0)
            )
            # A node whose host falls silent, or whose process exits during a partition (its
            # FIN lost), is seen as closed: keepalive probes, no TCP_USER_TIMEOUT (the sends
            # have SEND_TIMEOUT; and a stopped node's kernel still answers the probes, so a
            # paused node is left to heartbeat_timeout).
            keepalive.watch_peer(conn, self._peer_silent_secs, user_timeout=False)
            return chan, hello
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, struct.error) as exc:
            with self._lock:
                self.bad_hellos += 1
            if not self._closed:
                log.warning("sparktf: rejected a connection to the control server: %s", exc)
            return None

    def _serve(self, conn: socket.socket, session: protocol.Session, deadline: float) -> None:
        try:
            authed = self._hello(conn, session, deadline)
            if authed is None:
                return
            chan, hello = authed
            node, peer = hello["node"], hello["peer"]
            self._handler.on_connect(node, peer, chan, hello)
            try:
                while True:
                    self._handler.on_message(node, peer, chan.recv())
            except protocol.FrameRejected as exc:
                self._security_error(node, peer, exc)
            except (OSError, EOFError, pickle.UnpicklingError):
                pass
            self._handler.on_disconnect(node, peer)
        except Exception:
            log.exception("sparktf: the control connection's handler failed")
        finally:
            self._forget(conn)
            _close_quietly(conn)

    def _security_error(self, node: str, peer: str, exc: protocol.FrameRejected) -> None:
        """A frame from ``node``'s ``peer`` connection failed its MAC: the job's failure."""
        with self._lock:
            self.frames_rejected += 1
        exc = protocol.FrameRejected(f"the control channel from {node} ({peer}): {exc}")
        hook = getattr(self._handler, "on_security_error", None)
        if hook is not None:
            hook(node, peer, exc)
        else:
            self._handler.on_message(node, peer, messages.error("control", exc))

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
            self._gate.close()
            _close_quietly(self._sock)
            ports.release(self._claim)
            for conn in conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            for t in threads:
                if t is not threading.current_thread():
                    t.join(timeout=5)
        except Exception:
            log.exception("sparktf: closing the control server failed")


def _close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
