"""Rows moved between training nodes after the first pass, when their shares turn out unequal
(the driver's plan: :func:`sparktf.driver.job.feedbound.moves`).

Data already partitioned one partition per training node is fed as it is: no Spark job counts
it first, no shuffle deals it out; other data is dealt out without counting it either, each
input partition from its own offset, so shares may differ there too. Each node keeps its first
pass in its spool and listens here for rows from its peers. Once every share has ended, the
driver knows their sizes; when a share has fewer than ``total // trainers`` rows, the final
bound comes with a plan, so that only ``total % trainers`` rows are held back. A node
with more than the target *gives* the last rows of its share, read from its spool, to nodes
with fewer, which *take* them as the rest of their first epoch (after their own rows, giver by
giver in the plan's order) and keep them in their spool for later epochs. Only those rows cross
the network, node to node over TCP, each connection authenticated with the job's secret like
the control channel, and each frame with its MAC (:mod:`sparktf.common.protocol`): a frame
that fails it fails the taking node's feed with a :class:`~sparktf.common.protocol.FrameRejected`.

On the wire, after the handshake: the giver's name (``N``), its rows as data frames (``A`` or
``P``, see :mod:`sparktf.common.feedwire`), then ``E`` with ``{"rows": n}``, every frame followed
by its MAC.

The listener is a :class:`~sparktf.common.protocol.Gatekeeper`: at most ``MAX_PENDING``
unauthenticated connections (the oldest dropped first), at most ``MAX_PEERS`` givers at once
(more are told to try again), and a failure of its thread fails this node's taking of rows,
never unseen.

Never imports pyspark or tensorflow.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from sparktf.common import feedwire, protocol, topology
from sparktf.common import ports as ports_
from sparktf.errors import FeedError
from sparktf.node.feed import batches
from sparktf.node.feed.equalize import FeedBound
from sparktf.node.feed.stream import Stream

GIVER = b"N"
#: Unauthenticated connections the listener holds at once, and givers connected at once.
MAX_PENDING = 64
MAX_PEERS = 64
MAX_NAME = 1 << 10  # the giver's name frame


class Exchange:
    """This node's side of the moves: a listener for rows given to it, and the sending of the
    rows it gives once the driver's final bound says so."""

    def __init__(
        self,
        name: str,
        host: str,
        secret: bytes,
        bound: FeedBound,
        timeout: float,
        ports: ports_.PortRange | None = None,
    ) -> None:
        self._name = name  # this node's, as givers introduce themselves
        self._secret = secret
        self._stream: Stream | None = None  # this node's partition: its frames, the spool
        self._bound = bound
        self._timeout = timeout
        self._listener, self._claim = ports_.listening_socket(
            host, ports, f"{name}'s row exchange", backlog=64
        )
        self.address = topology.format_address(host, self._listener.getsockname()[1])
        self._cond = threading.Condition()
        self._frames: dict[str, list[int]] = {}  # giver -> its frames' places in the spool
        self._ends: dict[str, int] = {}  # giver -> the rows it said it sent, at its end
        self._broken: dict[str, str] = {}  # giver -> why its connection broke off
        self._error: BaseException | None = None  # fails every take: listener, security
        self._closed = False
        self._conns: list[socket.socket] = []
        self._give_error: BaseException | None = None
        self._giving = threading.Thread(target=self._give, name="sparktf-feed-give", daemon=True)
        try:
            self._gate = protocol.Gatekeeper(
                self._listener,
                secret,
                self._admit,
                what="row exchange",
                handshake_timeout=min(timeout, 30.0),  # a stranger gets 30 s at most
                max_pending=MAX_PENDING,
                capacity=self._has_room,
                on_fatal=self._failed,
            )
        except BaseException:
            self._listener.close()
            ports_.release(self._claim)
            raise
        self._giving.start()

    def attach(self, stream: Stream) -> None:
        """The stream of this node's partition (rows are given or taken only once it ended)."""
        with self._bound.cond:  # the final bound may come first: its giving waits for this
            self._stream = stream
            self._bound.cond.notify_all()

    # ------------------------------------------------------------------------------ taking
    def _has_room(self) -> bool:
        with self._cond:
            return len(self._conns) < MAX_PEERS

    def _failed(self, exc: BaseException) -> None:
        """The listener's thread failed: every take still to come fails with the cause."""
        with self._cond:
            if self._error is None:
                self._error = exc
            self._cond.notify_all()

    def _admit(self, conn: socket.socket, session: protocol.Session, deadline: float) -> None:
        with self._cond:
            if self._closed:
                conn.close()
                return
            self._conns.append(conn)
        try:
            threading.Thread(
                target=self._receive, args=(conn, session), name="sparktf-feed-take", daemon=True
            ).start()
        except BaseException:
            with self._cond:
                self._conns.remove(conn)
            raise

    def _receive(self, conn: socket.socket, session: protocol.Session) -> None:
        name = None
        mac = session.receiving
        try:
            conn.settimeout(self._timeout)
            feedwire.tune(conn)
            kind, payload = feedwire.recv_frame(conn, mac=mac, max_size=MAX_NAME)
            if kind != GIVER:
                raise FeedError(f"unexpected frame {kind!r} before the giver's name")
            name = payload.decode()
            with self._bound.cond:  # a giver may come before this node's stream is attached
                if not self._bound.cond.wait_for(lambda: self._stream is not None, self._timeout):
                    raise FeedError("this node's stream was never attached")
            stream = self._attached()
            with self._cond:
                self._frames.setdefault(name, [])
            while True:
                kind, payload = feedwire.recv_frame(conn, mac=mac, max_size=protocol.MAX_FRAME)
                if kind == feedwire.END:
                    with self._cond:
                        self._ends[name] = json.loads(payload)["rows"]
                        self._cond.notify_all()
                    return
                n = batches.rows(batches.decode(kind, payload, stream.schema))
                with self._cond:
                    spool = stream.spool()  # on disk: takers never hold senders up
                    spool.append(kind, payload, n)
                    spool.flush()
                    self._frames[name].append(len(spool.frames) - 1)
                    self._cond.notify_all()
        except protocol.FrameRejected as exc:  # every take fails: the job's failure
            with self._cond:
                if self._error is None:
                    self._error = protocol.FrameRejected(
                        f"rows moved to {self._name} from {name or 'a peer'}: {exc}"
                    )
                self._cond.notify_all()
        except BaseException as exc:
            if name is not None:
                with self._cond:
                    self._broken[name] = f"{type(exc).__name__}: {exc}"
                    self._cond.notify_all()
        finally:
            with self._cond:
                if conn in self._conns:
                    self._conns.remove(conn)
            conn.close()

    def taken(self, takes: list) -> Iterator:
        """The chunks given to this node, giver by giver in the plan's order; a
        :class:`FeedError` if a giver's rows stop coming for the feed timeout, break off, or
        are not as many as the plan says."""
        for giver, rows in takes:
            got, i = 0, 0
            while True:
                with self._cond:
                    deadline = time.monotonic() + self._timeout
                    while True:
                        self._raise_error()
                        frames = self._frames.get(giver, [])
                        if (
                            i < len(frames)
                            or giver in self._ends
                            or giver in self._broken
                            or self._closed
                        ):
                            break
                        if time.monotonic() >= deadline:
                            raise FeedError(
                                f"no rows from {giver} for feed_timeout={self._timeout:g}s: "
                                f"equalizing moves {rows} of its rows to this node"
                            )
                        self._cond.wait(min(1.0, max(0.0, deadline - time.monotonic())))
                    if i < len(frames):
                        index = frames[i]
                    elif giver in self._ends:
                        break
                    else:
                        raise FeedError(
                            f"the rows moved from {giver} to this node broke off "
                            f"after {got} of {rows}: "
                            f"{self._broken.get(giver, 'the feed was closed')}"
                        )
                i += 1
                stream = self._attached()  # a giver's frames came after it was
                kind, payload, _ = stream.spool().read(index)
                chunk = batches.decode(kind, payload, stream.schema)
                got += batches.rows(chunk)
                yield chunk
            if got != rows or self._ends[giver] != rows:
                raise FeedError(f"{giver} moved {got} rows to this node; the plan was {rows}")

    def _attached(self) -> Stream:
        """This node's stream, which givers' frames and this node's giving wait for."""
        stream = self._stream
        if stream is None:
            raise FeedError("this node's stream was never attached")
        return stream

    def _raise_error(self) -> None:
        """The listener's failure, or a frame refused: this node cannot take its rows."""
        exc = self._error
        if exc is None:
            return
        if isinstance(exc, protocol.SecurityError):
            raise exc
        raise FeedError(
            f"the row exchange's listener of {self._name} failed, so rows moved "
            f"to it cannot arrive: {type(exc).__name__}: {exc}"
        ) from exc

    def frames_taken(self, takes: list) -> list[int]:
        """The spool's frames taken, in the plan's order (for later epochs)."""
        with self._cond:
            return [i for giver, _ in takes for i in self._frames.get(giver, [])]

    # ------------------------------------------------------------------------------ giving
    def _give(self) -> None:
        bound = self._bound
        with bound.cond:
            while not (bound.final and self._stream is not None) and not self._closed:
                bound.cond.wait(1.0)
        try:
            if bound.gives and not self._closed:
                self._send_all(bound.gives)
        except BaseException as exc:
            self._give_error = exc

    def _send_all(self, gives: list) -> None:
        """The last rows of this node's share, in order, to each taker in the plan's order."""
        stream = self._attached()  # _give waited for it
        start = stream.total - self._bound.rows_given
        for _taker, address, rows in gives:
            # tried again while the taker is busy (a flood, or many givers at once)
            chan = protocol.connect(
                topology.split_address(address), self._secret, self._timeout, what="row exchange"
            )
            sock, session = chan.sock, chan.session
            try:
                if session is None:  # connect() authenticates: its channels have frame keys
                    raise FeedError(f"the row exchange's channel to {address} has no frame keys")
                mac = session.sending
                sock.settimeout(self._timeout)
                feedwire.tune(sock)
                feedwire.send_frame(sock, GIVER, self._name.encode(), mac)
                for kind, payload in self._pieces(stream, start, rows):
                    feedwire.send_frame(sock, kind, payload, mac)
                feedwire.send_frame(sock, feedwire.END, json.dumps({"rows": rows}).encode(), mac)
            finally:
                sock.close()
            start += rows

    @staticmethod
    def _pieces(stream: Stream, start: int, n: int) -> Iterator[tuple[bytes, Any]]:
        """Rows ``start .. start + n`` of the spooled share as data frames: whole frames as
        they were received (bytes or any buffer), the ends of the range cut out of theirs."""
        pos = 0
        for index, rows in enumerate(list(stream.frame_rows)):
            lo, hi = max(start, pos), min(start + n, pos + rows)
            if lo < hi:
                kind, payload = stream.frame(index)
                if hi - lo == rows and kind != feedwire.MULTI:
                    yield kind, payload
                else:
                    chunk = batches.decode(kind, payload, stream.schema)
                    yield batches.encode(batches.cut(chunk, lo - pos, hi - lo))
            pos += rows
            if pos >= start + n:
                return

    def finish(self) -> None:
        """Wait until this node's rows are given (the feed timeout bounds each send); a
        :class:`FeedError` says why not."""
        self._giving.join()
        if self._give_error is not None:
            exc = self._give_error
            raise FeedError(
                f"moving this node's surplus rows to its peers failed: {type(exc).__name__}: {exc}"
            ) from exc

    def close(self) -> None:
        with self._cond:
            self._closed = True
            conns, self._conns = self._conns, []
            self._cond.notify_all()
        self._gate.close()
        with self._bound.cond:
            self._bound.cond.notify_all()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._listener.close()
        ports_.release(self._claim)
        self._claim = None
