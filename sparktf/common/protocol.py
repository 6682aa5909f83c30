"""The control and log channel between the driver and its nodes, and the handshake and frame
authentication that the node-to-node row exchange shares with it.

A TCP connection, authenticated before anything else with a mutual HMAC-SHA256
challenge-response over a per-job secret; then length-prefixed pickled messages (dicts), each
carrying a MAC that is checked before a byte of it is unpickled.

Handshake (fixed sizes, so an unauthenticated peer can never make the server allocate or
unpickle anything)::

    server -> client   MAGIC | sn                           sn, cn: 32-byte random nonces
    client -> server   HMAC(secret, "client" | sn) | cn
    server -> client   GRANTED | HMAC(secret, "server" | cn | sn)
                    or DENIED  (the client's MAC is wrong: the one "wrong secret" answer)
                    or BUSY    (the server takes no more peers now: try again)

A server that closes the connection before its verdict (its handshake deadline passed, or it
dropped the connection to make room under a flood) is *not* a refusal of the secret: the
client tries again (:class:`TurnedAway`), and only ``DENIED`` or a wrong server proof is an
:class:`AuthenticationError`.

Frames after the handshake: each direction has its own key and sequence number,

    k_c2s = HMAC(secret, "sparktf frames c2s" | sn | cn)     (client to server)
    k_s2c = HMAC(secret, "sparktf frames s2c" | sn | cn)     (server to client)
    frame = header | payload | HMAC(k_dir, seq | header | payload)   seq: 8 bytes, from 0

so a frame forged without the secret, altered, replayed, reordered, dropped from the middle,
reflected back to its sender or carried over from another connection fails its MAC, and the
receiver refuses it (:class:`FrameRejected`) before it is used. The sequence number is
counted by both ends, never sent. The frames are authenticated, not encrypted: see
docs/reliability.md, "Security".

The secret itself never crosses the wire. This module imports neither pyspark nor tensorflow.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import logging
import pickle
import secrets
import select
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from sparktf.errors import SparkTFError

log = logging.getLogger(__name__)

MAGIC = b"SPARKTF2"  # 2: frames carry a MAC
NONCE_LEN = 32
MAC_LEN = 32
TAG_LEN = 32  # each frame's MAC
GRANTED, DENIED, BUSY = b"\x01", b"\x00", b"\x02"
GREETING_LEN = len(MAGIC) + NONCE_LEN
REPLY_LEN = MAC_LEN + NONCE_LEN  # the client's proof and nonce
MAX_FRAME = 1 << 31  # 2 GiB: only authenticated peers get to send frames
MAX_HELLO = 1 << 16  # the first message (hello), read under the handshake's deadline
_HEADER = struct.Struct("!Q")
_SEQ = struct.Struct("!Q")


class ChannelClosed(ConnectionError):
    """The peer closed the connection."""


class SecurityError(SparkTFError, ConnectionError):
    """A peer failed sparktf's authentication of its channels (the job secret, or a frame's
    MAC). Nothing the peer sent after that was used."""


class AuthenticationError(SecurityError):
    """The peer did not prove it holds this job's secret."""


class FrameRejected(SecurityError):
    """A frame failed its MAC: forged, altered, replayed or reordered on the wire. The
    connection is closed and nothing of the frame was used."""


class TurnedAway(ConnectionError):
    """The server closed the connection, or said it is busy, before accepting ours (it holds
    too many unauthenticated connections, or our handshake ran past its deadline): not a
    wrong secret. :func:`connect` tries again."""


_TurnedAway = TurnedAway  # the name before issue 38


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def _mac(secret: bytes, label: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, label + b"".join(parts), hashlib.sha256).digest()


class FrameMac:
    """One direction of a connection: the MAC of each frame under this direction's key, over
    its sequence number (counted here, never sent) and its bytes."""

    __slots__ = ("_base", "seq", "_label")

    def __init__(self, key: bytes, label: str) -> None:
        self._base = hmac.new(key, digestmod=hashlib.sha256)
        self.seq = 0
        self._label = label

    def _next(self, parts) -> bytes:
        h = self._base.copy()
        h.update(_SEQ.pack(self.seq))
        for part in parts:
            h.update(part)
        self.seq += 1
        return h.digest()

    def seal(self, *parts) -> bytes:
        """The tag of the next frame sent, whose bytes are ``parts`` one after the other."""
        return self._next(parts)

    def verify(self, tag, *parts) -> None:
        """Check the next frame received; :class:`FrameRejected` if its tag is wrong."""
        seq = self.seq
        if not hmac.compare_digest(self._next(parts), bytes(tag)):
            raise FrameRejected(
                f"frame {seq} on the {self._label} failed its MAC: forged, altered, replayed "
                "or reordered on the wire (someone between the two ends, or a peer without "
                "this job's secret); the connection was closed and the frame not used"
            )


class Session:
    """The frame keys of one authenticated connection, from one end's point of view."""

    __slots__ = ("sending", "receiving")

    def __init__(self, send_key: bytes, recv_key: bytes, what: str = "connection") -> None:
        self.sending = FrameMac(send_key, what)
        self.receiving = FrameMac(recv_key, what)

    @classmethod
    def derive(
        cls,
        secret: bytes,
        server_nonce: bytes,
        client_nonce: bytes,
        server: bool,
        what: str = "connection",
    ) -> Session:
        c2s = _mac(secret, b"sparktf frames c2s", server_nonce, client_nonce)
        s2c = _mac(secret, b"sparktf frames s2c", server_nonce, client_nonce)
        return cls(s2c, c2s, what) if server else cls(c2s, s2c, what)


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


def recv_before(sock: socket.socket, n: int, deadline: float, buf=None):
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


# ------------------------------------------------------------------------------ handshake
def _greeting() -> tuple[bytes, bytes]:
    nonce = secrets.token_bytes(NONCE_LEN)
    return nonce, MAGIC + nonce


def _verdict(
    secret: bytes, server_nonce: bytes, reply: bytes, what: str
) -> tuple[bytes, Session | None]:
    """The server's answer to the client's ``reply``, and the session if it proved the
    secret."""
    client_nonce = reply[MAC_LEN:]
    if not hmac.compare_digest(reply[:MAC_LEN], _mac(secret, b"client", server_nonce)):
        return DENIED, None
    return (
        GRANTED + _mac(secret, b"server", client_nonce, server_nonce),
        Session.derive(secret, server_nonce, client_nonce, server=True, what=what),
    )


def server_handshake(
    sock: socket.socket, secret: bytes, deadline: float, what: str = "connection"
) -> Session:
    """Authenticate the client on ``sock`` (the server side, blocking) before ``deadline``;
    raises on any failure. (Servers with many peers use :class:`Gatekeeper`.)"""
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    nonce, greeting = _greeting()
    sock.sendall(greeting)
    answer, session = _verdict(secret, nonce, bytes(recv_before(sock, REPLY_LEN, deadline)), what)
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    sock.sendall(answer)
    if session is None:
        raise AuthenticationError("client failed the challenge: wrong or missing job secret")
    return session


def client_handshake(
    sock: socket.socket, secret: bytes, timeout: float, what: str = "connection"
) -> Session:
    """Prove we hold ``secret`` and check that the server does too. :class:`TurnedAway` when
    the server closed the connection or was busy before its verdict (try again),
    :class:`AuthenticationError` when it refused the secret or failed its own proof."""
    sock.settimeout(timeout)
    try:
        hello = _recv_exact(sock, GREETING_LEN)
    except (ChannelClosed, ConnectionResetError) as exc:
        raise TurnedAway(f"the server closed the connection before its greeting: {exc}") from None
    if hello[: len(MAGIC)] != MAGIC:
        raise AuthenticationError(
            f"the peer is not a sparktf endpoint of this version (it greeted with "
            f"{hello[: len(MAGIC)]!r}, not {MAGIC!r}): are the driver and the executors "
            "running the same sparktf?"
        )
    server_nonce = hello[len(MAGIC) :]
    nonce = secrets.token_bytes(NONCE_LEN)
    sock.sendall(_mac(secret, b"client", server_nonce) + nonce)
    try:
        verdict = _recv_exact(sock, 1)
        if verdict == GRANTED:
            proof = _recv_exact(sock, MAC_LEN)
    except (ChannelClosed, ConnectionResetError) as exc:
        raise TurnedAway(
            "the server closed the connection before its verdict (our handshake ran past its "
            f"deadline, or it made room for others under a flood), not a wrong secret: {exc}"
        ) from None
    if verdict == BUSY:
        raise TurnedAway("the server takes no more peers now")
    if verdict != GRANTED:
        raise AuthenticationError("the server refused this job secret")
    if not hmac.compare_digest(proof, _mac(secret, b"server", nonce, server_nonce)):
        raise AuthenticationError("the server failed the challenge: wrong job secret")
    sock.settimeout(None)
    return Session.derive(secret, server_nonce, nonce, server=False, what=what)


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


# ------------------------------------------------------------------------------ serving
#: ``accept()`` errors that say the process or the system ran out of something for a while.
RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: ``accept()`` errors about one queued connection only (reset while it waited, or a network
#: error Linux passes on from it: accept(2) says to treat these like EAGAIN).
TRANSIENT_ERRORS = frozenset(
    {
        errno.ECONNABORTED,
        errno.EPROTO,
        errno.EPERM,
        errno.ENETDOWN,
        errno.ENOPROTOOPT,
        errno.EHOSTDOWN,
        errno.ENONET,
        errno.EHOSTUNREACH,
        errno.EOPNOTSUPP,
        errno.ENETUNREACH,
    }
)
#: Unauthenticated connections younger than this are not dropped to make room for others.
EVICT_AFTER = 1.0
#: Seconds between two log lines of one kind about refused connections (a flood logs little).
LOG_EVERY = 5.0


class _Pending:
    __slots__ = ("nonce", "since", "deadline", "got")

    def __init__(self, nonce: bytes, now: float, timeout: float) -> None:
        self.nonce, self.since, self.deadline, self.got = nonce, now, now + timeout, b""


class _Throttle:
    """Log lines of each kind at most every ``LOG_EVERY`` seconds, with a count of the rest."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._quiet: dict[str, int] = {}

    def warn(self, kind: str, message: str, *args) -> None:
        now = time.monotonic()
        if now - self._last.get(kind, -LOG_EVERY) < LOG_EVERY:
            self._quiet[kind] = self._quiet.get(kind, 0) + 1
            return
        quiet = self._quiet.pop(kind, 0)
        self._last[kind] = now
        log.warning(message + (f" ({quiet} more since the last such line)" if quiet else ""), *args)


class Gatekeeper:
    """Accepts the connections of ``listener`` and authenticates them, all in one thread that
    never blocks on a peer: every handshake is a small state machine under ``poll``, with its
    own deadline (``handshake_timeout`` for the whole handshake, however slowly the peer
    dribbles). A flood of silent connections costs a descriptor each and no thread.

    At most ``max_pending`` connections are unauthenticated at once. When a new one comes and
    that many wait, the oldest one older than ``EVICT_AFTER`` is dropped (those that sent
    nothing first); if none is that old, the new one is turned away before the greeting. Real
    clients try again in either case (:func:`connect`): a dropped or late handshake is never
    answered as a wrong secret. ``accept()`` running out of descriptors or memory (EMFILE,
    ENFILE, ENOBUFS, ENOMEM) drops the oldest unauthenticated connection and pauses accepting
    with backoff; errors about one queued connection (ECONNABORTED, ...) are skipped. Any other
    failure of the thread goes to ``on_fatal`` (and the log), never unseen.

    Each authenticated peer is handed to ``admit(sock, session, deadline)`` (a blocking socket;
    ``deadline``: the handshake's, for the peer's first message), from this thread: it must not
    block. Where ``capacity()`` says no more peers fit, an authenticated peer is told ``BUSY``
    (it tries again).
    """

    def __init__(
        self,
        listener: socket.socket,
        secret: bytes,
        admit: Callable[[socket.socket, Session, float], None],
        *,
        what: str,
        handshake_timeout: float = 10.0,
        max_pending: int = 256,
        capacity: Callable[[], bool] | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._listener = listener
        self._secret = secret
        self._admit = admit
        self._what = what
        self._timeout = handshake_timeout
        self._max_pending = max_pending
        self._capacity = capacity
        self._on_fatal = on_fatal
        self._pending: dict[socket.socket, _Pending] = {}  # in order of arrival
        self._throttle = _Throttle()
        self._closed = False
        self._listening = True
        self._backoff = 0.0
        self._resume_at = 0.0
        self.failure: BaseException | None = None
        self.authenticated = self.wrong_secret = self.timed_out = self.evicted = 0
        self.closed_early = self.turned_away = self.busy = self.accept_errors = 0
        # made here, not in the thread: they need descriptors, which may be short later
        self._wake_r, self._wake_w = socket.socketpair()
        try:
            listener.setblocking(False)
            self._sel = selectors.DefaultSelector()
            self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
            self._sel.register(listener, selectors.EVENT_READ, "listen")
            self.thread = threading.Thread(
                target=self._run, daemon=True, name=f"sparktf-{what}-accept".replace(" ", "-")
            )
            self.thread.start()
        except BaseException:
            if hasattr(self, "_sel"):
                self._sel.close()
            for s in (self._wake_r, self._wake_w):
                _close_quietly(s)
            raise

    @property
    def rejected(self) -> int:
        """Connections dropped during their handshake, for whatever reason."""
        return self.wrong_secret + self.timed_out + self.evicted + self.closed_early

    @property
    def pending(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------------- the loop
    def _run(self) -> None:
        sel = self._sel
        try:
            while not self._closed:
                self._turn(sel)
        except BaseException as exc:
            if not self._closed:
                self.failure = exc
                log.error(
                    "sparktf: the %s stopped accepting connections: %s: %s",
                    self._what,
                    type(exc).__name__,
                    exc,
                )
                if self._on_fatal is not None:
                    self._on_fatal(exc)
        finally:
            for conn in list(self._pending):
                _close_quietly(conn)
            self._pending.clear()
            sel.close()

    def _turn(self, sel: selectors.BaseSelector) -> None:
        now = time.monotonic()
        timeout = 1.0
        if self._pending:
            timeout = min(timeout, next(iter(self._pending.values())).deadline - now)
        if not self._listening:
            timeout = min(timeout, self._resume_at - now)
        for key, _ in sel.select(max(0.0, timeout)):
            if key.data == "wake":
                self._wake_r.recv(64)
            elif key.data == "listen":
                self._accept_some(sel)
            elif key.fileobj in self._pending:
                self._advance(sel, key.fileobj)
        now = time.monotonic()
        while self._pending:
            conn, p = next(iter(self._pending.items()))
            if p.deadline > now:
                break
            self.timed_out += 1
            self._drop(sel, conn)
            self._throttle.warn(
                "timeout",
                "sparktf: the %s dropped a connection whose handshake was not "
                "complete within %gs (a silent or stalled peer; a real one tries again)",
                self._what,
                self._timeout,
            )
        if not self._listening and now >= self._resume_at and not self._closed:
            sel.register(self._listener, selectors.EVENT_READ, "listen")
            self._listening = True

    def _accept_some(self, sel: selectors.BaseSelector) -> None:
        for _ in range(64):  # then the handshakes under way get their turn
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if self._closed:
                    return
                self.accept_errors += 1
                if exc.errno in RESOURCE_ERRORS:
                    self._backoff = min(1.0, max(0.05, self._backoff * 2))
                    self._throttle.warn(
                        "accept",
                        "sparktf: the %s cannot accept (%s); dropping its oldest "
                        "unauthenticated connection, retrying in %.2fs",
                        self._what,
                        exc,
                        self._backoff,
                    )
                    if self._pending:
                        self.evicted += 1
                        self._drop(sel, next(iter(self._pending)))
                    sel.unregister(self._listener)
                    self._listening = False
                    self._resume_at = time.monotonic() + self._backoff
                    return
                if exc.errno in TRANSIENT_ERRORS:
                    log.debug("sparktf: the %s skipped a queued connection: %s", self._what, exc)
                    continue
                raise
            self._backoff = 0.0
            self._greet(sel, conn)

    def _greet(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        now = time.monotonic()
        if len(self._pending) >= self._max_pending:
            victim = self._victim(now)
            if victim is None:
                self.turned_away += 1
                _close_quietly(conn)  # before the greeting: a real client tries again
                self._throttle.warn(
                    "full",
                    "sparktf: the %s turned connections away: %d handshakes under way "
                    "already (a flood?)",
                    self._what,
                    len(self._pending),
                )
                return
            self.evicted += 1
            self._drop(sel, victim)
        nonce, greeting = _greeting()
        try:
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            complete = conn.send(greeting) == len(greeting)  # an empty buffer takes it
        except OSError:
            complete = False
        if not complete:
            self.closed_early += 1
            _close_quietly(conn)
            return
        self._pending[conn] = _Pending(nonce, now, self._timeout)
        sel.register(conn, selectors.EVENT_READ, "peer")

    def _victim(self, now: float) -> socket.socket | None:
        """The connection to drop for a new one: the oldest silent one older than
        ``EVICT_AFTER``, else the oldest older than that (None if all are younger)."""
        oldest = None
        for conn, p in self._pending.items():
            if now - p.since < EVICT_AFTER:
                break
            if not p.got:
                return conn
            oldest = oldest or conn
        return oldest

    def _advance(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        p = self._pending[conn]
        try:
            chunk = conn.recv(REPLY_LEN - len(p.got))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.closed_early += 1
            self._drop(sel, conn)
            return
        p.got += chunk
        if len(p.got) < REPLY_LEN:
            return
        del self._pending[conn]
        sel.unregister(conn)
        answer, session = _verdict(self._secret, p.nonce, p.got, self._what)
        if session is None:
            self.wrong_secret += 1
            self._throttle.warn(
                "secret", "sparktf: the %s refused a peer without this job's secret", self._what
            )
            _refuse(conn, DENIED)
            return
        if self._capacity is not None and not self._capacity():
            self.busy += 1
            _refuse(conn, BUSY)
            return
        try:
            if conn.send(answer) != len(answer):
                raise ConnectionError("the verdict did not fit the peer's buffer")
            conn.setblocking(True)
            self.authenticated += 1
            self._admit(conn, session, p.deadline)
        except Exception as exc:
            self.closed_early += 1
            log.warning("sparktf: the %s dropped an authenticated connection: %s", self._what, exc)
            _close_quietly(conn)

    def _drop(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        self._pending.pop(conn, None)
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        _close_quietly(conn)

    def close(self) -> None:
        """Stop accepting and drop the handshakes under way (not the listener, not the
        peers handed on). Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout=5)
        for s in (self._wake_r, self._wake_w):
            _close_quietly(s)


def _refuse(conn: socket.socket, verdict: bytes) -> None:
    try:
        conn.send(verdict)
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    _close_quietly(conn)


def _close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
