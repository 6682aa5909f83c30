"""The server's side of the handshake: accepting connections, authenticating them under deadlines
and a cap on pending ones, and handing the authenticated ones on (Gatekeeper).
"""

from __future__ import annotations

import errno
import logging
import random
import selectors
import socket
import threading
import time
from collections.abc import Callable

from sparktf.common.protocol.auth import BUSY, DENIED, REPLY_LEN, Session, _greeting, _verdict

log = logging.getLogger(__name__)


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
    that many wait, one of them is dropped for it: the oldest silent one (it sent nothing)
    older than ``EVICT_AFTER``, else a silent one chosen at random, else the oldest older than
    ``EVICT_AFTER``; only when all have begun their answer and are young is the new one turned
    away before the greeting. The random choice is what keeps a flood from locking real
    clients out: a flooder that opens connections in bursts on a beat takes every slot that
    comes of age, so "turn the newcomer away while all are young" refused every real client
    arriving between bursts; a random drop gives each try a fair chance, and a real client,
    which answers within a round trip, is rarely the one dropped. Real clients try again in
    either case (:func:`connect`): a dropped or late handshake is never answered as a wrong
    secret. ``accept()`` running out of descriptors or memory (EMFILE,
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
        self._random = random.Random()
        self._closed = False
        self._listening = True
        self._backoff = 0.0
        self._resume_at = 0.0
        self.failure: BaseException | None = None
        self.wrong_secret = self.timed_out = self.evicted = 0
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
            self._throttle.warn(
                "evict",
                "sparktf: the %s dropped unauthenticated connections to make room for new "
                "ones: %d handshakes under way (a flood?)",
                self._what,
                len(self._pending),
            )
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
        """The connection to drop for a new one (see the class): None if all have begun
        their answer and are younger than ``EVICT_AFTER``."""
        oldest = None
        for conn, p in self._pending.items():
            if now - p.since < EVICT_AFTER:
                break
            if not p.got:
                return conn
            oldest = oldest or conn
        conns = list(self._pending)
        for _ in range(8):  # a silent one at random: in a flood, nearly all are
            conn = conns[self._random.randrange(len(conns))]
            if not self._pending[conn].got:
                return conn
        silent = [c for c in conns if not self._pending[c].got]
        if silent:
            return self._random.choice(silent)
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
