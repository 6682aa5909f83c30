"""Attackers of sparktf's TCP channels, on loopback: a man in the middle, and a flood.

:class:`Mitm` listens where a client is told its server is, opens a connection to the real
server for every client that comes, relays the handshake byte for byte (so both real ends
authenticate each other through it, as an attacker on the path would let them), and then
relays frame by frame, handing each to ``tamper``, which may alter, drop, repeat, reorder or
inject frames. Real sockets and the real client and server code on both sides; only the
attacker is the test's.
"""

import socket
import struct
import threading
import time

from sparktf.common import feedwire, protocol

CONTROL = struct.Struct("!Q")  # the control channel's frame header: length
FEED = feedwire.HEADER  # the row exchange's: kind, length


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def frame_size(header_struct, header):
    return header_struct.unpack(header)[-1]


class Mitm:
    """``tamper(conn, direction, index, frame) -> list of frames to forward`` (``conn``: the
    connection's number, from 0; ``direction``: ``"c2s"`` or ``"s2c"``; ``index``: the frame's
    number in that direction, from 0; ``frame``: its bytes, header and MAC included).
    ``handshakes[conn]`` keeps what each side sent during the handshake, ``frames[conn]`` every
    frame as it came from its sender."""

    def __init__(self, target, header=CONTROL, tamper=None):
        self.target, self.header, self.tamper = target, header, tamper
        self.handshakes, self.frames = [], []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self.sockets = []
        self.errors = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                index = len(self.handshakes)
                self.handshakes.append({})
                self.frames.append([])
            threading.Thread(target=self._relay, args=(index, client), daemon=True).start()

    def _relay(self, conn, client):
        try:
            server = socket.create_connection(self.target, timeout=30)
        except OSError as exc:
            self.errors.append(exc)
            client.close()
            return
        with self._lock:
            self.sockets += [client, server]
        shake = self.handshakes[conn]
        try:
            shake["greeting"] = recv_exact(server, protocol.GREETING_LEN)
            client.sendall(shake["greeting"])
            shake["reply"] = recv_exact(client, protocol.REPLY_LEN)
            server.sendall(shake["reply"])
            verdict = recv_exact(server, 1)
            if verdict == protocol.GRANTED:
                verdict += recv_exact(server, protocol.MAC_LEN)
            shake["verdict"] = verdict
            client.sendall(verdict)
        except (EOFError, OSError) as exc:
            self.errors.append(exc)
            for s in (client, server):
                s.close()
            return
        pumps = [
            threading.Thread(target=self._pump, args=(conn, "c2s", client, server), daemon=True),
            threading.Thread(target=self._pump, args=(conn, "s2c", server, client), daemon=True),
        ]
        for t in pumps:
            t.start()

    def _pump(self, conn, direction, src, dst):
        index = 0
        try:
            while True:
                header = recv_exact(src, self.header.size)
                body = recv_exact(src, frame_size(self.header, header) + protocol.TAG_LEN)
                frame = header + body
                self.frames[conn].append((direction, frame))
                out = self.tamper(conn, direction, index, frame) if self.tamper else [frame]
                index += 1
                for f in out:
                    dst.sendall(f)
        except (EOFError, OSError):
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        self.listener.close()
        with self._lock:
            for s in self.sockets:
                try:
                    s.close()
                except OSError:
                    pass


def flip(frame, at=-protocol.TAG_LEN - 1):
    """``frame`` with one bit of its payload (by default its last byte) flipped."""
    b = bytearray(frame)
    b[at] ^= 0x01
    return bytes(b)


class Flood:
    """Silent connections at ``rate`` a second for ``seconds`` (a bounded loop), each closed
    by the flooder after ``hold`` seconds if the server has not dropped it first."""

    def __init__(self, address, rate=300, seconds=8.0, hold=3.0):
        self.address, self.rate, self.seconds, self.hold = address, rate, seconds, hold
        self.opened = self.failed = 0
        self.stopped = threading.Event()
        self.start = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        held = []
        while time.monotonic() - self.start < self.seconds and not self.stopped.is_set():
            tick = time.monotonic()
            for _ in range(self.rate // 20):
                try:
                    held.append((tick, socket.create_connection(self.address, timeout=2)))
                    self.opened += 1
                except OSError:
                    self.failed += 1
            while held and tick - held[0][0] > self.hold:
                held.pop(0)[1].close()
            time.sleep(max(0.0, 0.05 - (time.monotonic() - tick)))
        for _, s in held:
            s.close()

    def stop(self):
        self.stopped.set()
        self.thread.join(self.seconds + 10)

    join = stop
