"""The driver's control server under slow and flooding peers, over real loopback sockets, for
seconds at a time (moved from tests/unit/test_protocol.py to keep the unit tier quick): one
handshake deadline however slowly a peer dribbles, floods of silent connections, a client
slowed past the deadline, the acceptor out of file descriptors."""

import socket
import threading
import time

import pytest
from helpers.control import Recorder, hello, raw_connection

from sparktf.common import protocol
from sparktf.driver.control import ControlServer


def test_the_handshake_has_one_deadline_however_slowly_a_peer_dribbles(server):
    srv, rec, secret = server  # handshake_timeout=1.0
    rogue = raw_connection(srv)
    start = time.monotonic()
    closed = False
    for _ in range(10):  # a byte every 0.3 s would pass any per-read timeout of 1 s
        try:
            rogue.sendall(b"\x00")
        except OSError:
            closed = True
            break
        time.sleep(0.3)
        if _peer_closed(rogue):
            closed = True
            break
    assert closed and time.monotonic() - start < 2.5
    rogue.close()
    assert srv.rejected == 1 and rec.events == []


def _peer_closed(s):
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def test_a_flood_of_silent_connections_cannot_lock_out_a_real_node():
    rec = Recorder()
    secret = protocol.new_secret()
    srv = ControlServer(
        "127.0.0.1", "127.0.0.1", secret, rec, handshake_timeout=30.0, max_pending=16
    )
    flood = []
    try:
        for _ in range(40):  # far over the cap, each held open and silent
            flood.append(socket.create_connection(srv.address))
        time.sleep(1.2)  # they are old now: room is made by dropping them
        chan = protocol.connect(srv.address, secret, timeout=10)
        hello(chan)
        assert rec.wait_for(1)[0] == ("connect", "worker:0", "node")
        chan.close()
        assert srv.rejected + srv.turned_away >= 24
    finally:
        for s in flood:
            s.close()
        srv.close()


def test_a_fresh_flood_of_silent_peers_makes_room_for_a_real_client_at_once():
    rec = Recorder()
    secret = protocol.new_secret()
    srv = ControlServer(
        "127.0.0.1", "127.0.0.1", secret, rec, handshake_timeout=30.0, max_pending=8
    )
    flood = [socket.create_connection(srv.address) for _ in range(8)]
    try:
        # the cap is full of young silent connections: one of them, at random, is dropped
        # for the client (turning it away until they aged let a flood in bursts lock it out)
        chan = protocol.connect_once(srv.address, secret, 5)
        hello(chan)
        assert rec.wait_for(1)[0][0] == "connect"
        chan.close()
        assert srv.turned_away == 0
        assert srv.rejected >= 1  # the one dropped for it
    finally:
        for s in flood:
            s.close()
        srv.close()


EMFILE_SCRIPT = r"""
import resource, socket, sys, threading, time
sys.path.insert(0, sys.argv[1])
from sparktf.common import protocol
from sparktf.driver.control import ControlServer

class H:
    def __init__(self): self.connected = threading.Event()
    def on_connect(self, *a): self.connected.set()
    def on_message(self, *a): pass
    def on_disconnect(self, *a): pass

h = H()
secret = protocol.new_secret()
srv = ControlServer("127.0.0.1", "127.0.0.1", secret, h, handshake_timeout=30)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
clients = []
try:
    while True:  # fill every descriptor: the server's accept() meets EMFILE
        clients.append(socket.create_connection(srv.address, timeout=2))
except OSError:
    pass
time.sleep(1.0)
for c in clients:
    c.close()
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
time.sleep(0.5)
chan = protocol.connect(srv.address, secret, timeout=10)
chan.send({"type": "hello", "peer": "node", "node": "worker:0"})
print("ACCEPTOR ALIVE" if h.connected.wait(10) else "ACCEPTOR DEAD", flush=True)
chan.close()
srv.close()
"""


def test_the_acceptor_survives_running_out_of_file_descriptors(tmp_path):
    import pathlib
    import subprocess
    import sys

    root = str(pathlib.Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-c", EMFILE_SCRIPT, root], capture_output=True, text=True, timeout=60
    )
    assert "ACCEPTOR ALIVE" in out.stdout, out.stdout + out.stderr
    assert "cannot accept" in out.stderr  # it met EMFILE, logged it, and went on


# ------------------------------------------------------------- floods, slow peers, accept()
class SlowSocket(socket.socket):
    """A real client socket whose sends wait first: a node stalled in its handshake (a
    loaded host, a GC pause), past the server's handshake deadline."""

    delay = 1.5

    def sendall(self, data, *args):
        time.sleep(self.delay)
        return super().sendall(data, *args)


_create_connection = socket.create_connection


def slow_socket(address):
    plain = _create_connection(address, timeout=10)
    return SlowSocket(fileno=plain.detach())


def test_a_client_slowed_past_the_deadline_is_told_to_retry_not_wrong_secret(server):
    srv, rec, secret = server  # handshake_timeout=1.0
    sock = slow_socket(srv.address)
    with pytest.raises(protocol.TurnedAway) as info:
        protocol.client_handshake(sock, secret, 10)
    assert not isinstance(info.value, protocol.AuthenticationError)
    assert "not a wrong secret" in str(info.value)
    sock.close()
    assert srv.gate.timed_out == 1 and srv.gate.wrong_secret == 0


def test_connect_gets_in_after_a_slowed_first_try(server, monkeypatch):
    srv, rec, secret = server
    tries = []

    def create_connection(address, timeout=None):
        tries.append(address)
        if len(tries) == 1:
            return slow_socket(address)
        return _create_connection(address, timeout=timeout)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    chan = protocol.connect(srv.address, secret, timeout=20)
    hello(chan)
    assert rec.wait_for(1)[0][0] == "connect" and len(tries) == 2
    chan.close()


def test_a_flood_in_regular_bursts_cannot_lock_out_a_real_node():
    # Bursts of silent connections on a fixed beat, as a flooder's loop makes them: with a full
    # cap, each burst took every slot as it came of age, so a real client, arriving between
    # bursts, was turned away every time (seen in CI: 15 s of tries, none got in).
    rec = Recorder()
    secret = protocol.new_secret()
    srv = ControlServer(
        "127.0.0.1", "127.0.0.1", secret, rec, handshake_timeout=30.0, max_pending=8
    )
    stop = threading.Event()

    def bursts():
        held = []
        while not stop.is_set():
            tick = time.monotonic()
            held += [socket.create_connection(srv.address) for _ in range(12)]
            while len(held) > 60:
                held.pop(0).close()
            stop.wait(max(0.0, 0.1 - (time.monotonic() - tick)))
        for s in held:
            s.close()

    flooder = threading.Thread(target=bursts, daemon=True)
    flooder.start()
    try:
        time.sleep(1.5)  # the cap is full and its oldest are of age
        got_in = []
        for i in range(5):
            chan = protocol.connect(srv.address, secret, timeout=5)
            hello(chan, f"worker:{i}")
            got_in.append(chan)
        assert len(rec.wait_for(5)) == 5
        for chan in got_in:
            chan.close()
    finally:
        stop.set()
        flooder.join(10)
        srv.close()
