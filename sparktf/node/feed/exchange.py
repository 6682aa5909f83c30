"""Rows moved between training nodes after the first pass, when shares fed as they are turn out
unequal (the driver's plan: :func:`sparktf.driver.partition.moves`).

Data already partitioned one partition per training node is fed as it is: no Spark job counts
it first, no shuffle deals it out. Each node keeps its first pass in its spool and listens here
for rows from its peers. Once every share has ended, the driver knows their sizes; when
equalizing them would hold back more than a few rows, the final bound comes with a plan. A node
with more than the target *gives* the last rows of its share, read from its spool, to nodes
with fewer, which *take* them as the rest of their first epoch (after their own rows, giver by
giver in the plan's order) and keep them in their spool for later epochs. Only those rows cross
the network, node to node over TCP, each connection authenticated with the job's secret like
the control channel (:mod:`sparktf.common.protocol`).

On the wire, after the handshake: the giver's name (``N``), its rows as data frames (``A`` or
``P``, see :mod:`sparktf.common.feedwire`), then ``E`` with ``{"rows": n}``.

Never imports pyspark or tensorflow.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Iterator

from sparktf.common import feedwire, protocol, topology
from sparktf.errors import FeedError
from sparktf.node.feed import batches
from sparktf.node.feed.equalize import Bound
from sparktf.node.feed.stream import Stream

GIVER = b"N"


class Exchange:
    """This node's side of the moves: a listener for rows given to it, and the sending of the
    rows it gives once the driver's final bound says so."""

    def __init__(self, name: str, host: str, secret: bytes, bound: Bound,
                 timeout: float) -> None:
        self._name = name  # this node's, as givers introduce themselves
        self._secret = secret
        self._stream: Stream | None = None  # this node's partition: its frames, the spool
        self._bound = bound
        self._timeout = timeout
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, 0), family=family, backlog=16)
        self.address = topology.format_address(host, self._listener.getsockname()[1])
        self._cond = threading.Condition()
        self._frames: dict[str, list[int]] = {}  # giver -> its frames' places in the spool
        self._ends: dict[str, int] = {}  # giver -> the rows it said it sent, at its end
        self._broken: dict[str, str] = {}  # giver -> why its connection broke off
        self._closed = False
        self._conns: list[socket.socket] = []
        self._give_error: BaseException | None = None
        self._giving = threading.Thread(target=self._give, name="sparktf-feed-give",
                                        daemon=True)
        threading.Thread(target=self._accept, name="sparktf-feed-take", daemon=True).start()
        self._giving.start()

    def attach(self, stream: Stream) -> None:
        """The stream of this node's partition (rows are given or taken only once it ended)."""
        self._stream = stream

    # ------------------------------------------------------------------------------ taking
    def _accept(self) -> None:
        while not self._closed:
            try:
                # polled: closing a socket does not wake a blocked accept() on Linux
                if not protocol.wait_readable(self._listener, 0.2):
                    continue
                conn, _ = self._listener.accept()
            except (OSError, ValueError):
                return
            threading.Thread(target=self._receive, args=(conn,), name="sparktf-feed-take",
                             daemon=True).start()

    def _receive(self, conn: socket.socket) -> None:
        name = None
        try:
            with self._cond:
                self._conns.append(conn)
            protocol.server_handshake(conn, self._secret,  # a stranger gets 30 s at most
                                      time.monotonic() + min(self._timeout, 30.0))
            conn.settimeout(self._timeout)
            feedwire.tune(conn)
            kind, payload = feedwire.recv_frame(conn)
            if kind != GIVER:
                raise FeedError(f"unexpected frame {kind!r} before the giver's name")
            name = payload.decode()
            with self._cond:
                self._frames.setdefault(name, [])
            while True:
                kind, payload = feedwire.recv_frame(conn)
                if kind == feedwire.END:
                    with self._cond:
                        self._ends[name] = json.loads(payload)["rows"]
                        self._cond.notify_all()
                    return
                n = batches.rows(batches.decode(kind, payload, self._stream.schema))
                with self._cond:
                    spool = self._stream.spool()  # on disk: takers never hold senders up
                    spool.append(kind, payload, n)
                    spool.flush()
                    self._frames[name].append(len(spool.frames) - 1)
                    self._cond.notify_all()
        except BaseException as exc:  # noqa: BLE001 - the consumer is told, with the cause
            if name is not None:
                with self._cond:
                    self._broken[name] = f"{type(exc).__name__}: {exc}"
                    self._cond.notify_all()
        finally:
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
                        frames = self._frames.get(giver, [])
                        if i < len(frames) or giver in self._ends or giver in self._broken \
                                or self._closed:
                            break
                        if time.monotonic() >= deadline:
                            raise FeedError(
                                f"no rows from {giver} for feed_timeout={self._timeout:g}s: "
                                f"equalizing moves {rows} of its rows to this node")
                        self._cond.wait(min(1.0, max(0.0, deadline - time.monotonic())))
                    if i < len(frames):
                        index = frames[i]
                    elif giver in self._ends:
                        break
                    else:
                        raise FeedError(f"the rows moved from {giver} to this node broke off "
                                        f"after {got} of {rows}: "
                                        f"{self._broken.get(giver, 'the feed was closed')}")
                i += 1
                kind, payload, _ = self._stream.spool().read(index)
                chunk = batches.decode(kind, payload, self._stream.schema)
                got += batches.rows(chunk)
                yield chunk
            if got != rows or self._ends[giver] != rows:
                raise FeedError(f"{giver} moved {got} rows to this node; the plan was {rows}")

    def frames_taken(self, takes: list) -> list[int]:
        """The spool's frames taken, in the plan's order (for later epochs)."""
        with self._cond:
            return [i for giver, _ in takes for i in self._frames.get(giver, [])]

    # ------------------------------------------------------------------------------ giving
    def _give(self) -> None:
        bound = self._bound
        with bound.cond:
            while not bound.final and not self._closed:
                bound.cond.wait(1.0)
        try:
            if bound.gives and not self._closed:
                self._send_all(bound.gives)
        except BaseException as exc:  # noqa: BLE001 - raised where the node closes its feed
            self._give_error = exc

    def _send_all(self, gives: list) -> None:
        """The last rows of this node's share, in order, to each taker in the plan's order."""
        start = self._stream.total - self._bound.rows_given
        for taker, address, rows in gives:
            sock = protocol.connect_once(topology.split_address(address), self._secret,
                                         self._timeout).sock
            try:
                sock.settimeout(self._timeout)
                feedwire.tune(sock)
                feedwire.send_frame(sock, GIVER, self._name.encode())
                for kind, payload in self._pieces(start, rows):
                    feedwire.send_frame(sock, kind, payload)
                feedwire.send_frame(sock, feedwire.END, json.dumps({"rows": rows}).encode())
            finally:
                sock.close()
            start += rows

    def _pieces(self, start: int, n: int) -> Iterator[tuple[bytes, bytes]]:
        """Rows ``start .. start + n`` of the spooled share as data frames: whole frames as
        they were received, the ends of the range cut out of theirs."""
        pos = 0
        for index, rows in enumerate(list(self._stream.frame_rows)):
            lo, hi = max(start, pos), min(start + n, pos + rows)
            if lo < hi:
                kind, payload = self._stream.frame(index)
                if hi - lo == rows and kind != feedwire.MULTI:
                    yield kind, payload
                else:
                    chunk = batches.decode(kind, payload, self._stream.schema)
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
            raise FeedError(f"moving this node's surplus rows to its peers failed: "
                            f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        with self._cond:
            self._closed = True
            conns, self._conns = self._conns, []
            self._cond.notify_all()
        with self._bound.cond:
            self._bound.cond.notify_all()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._listener.close()
