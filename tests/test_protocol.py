"""The driver's control server over real loopback sockets: authenticated peers get through,
rogue peers (no secret, wrong secret, garbage, a huge length prefix, silence) are refused
without harming the peers that belong to the job."""

import socket
import struct
import threading

import pytest

from sparktf import protocol
from sparktf.control import ControlServer


class Recorder:
    def __init__(self):
        self.events = []
        self.cond = threading.Condition()

    def _add(self, *event):
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def on_connect(self, node, role, chan, hello):
        self.chan = chan
        self._add("connect", node, role)

    def on_message(self, node, role, message):
        self._add("message", node, role, message)

    def on_disconnect(self, node, role):
        self._add("disconnect", node, role)

    def wait_for(self, n, timeout=10):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.events) >= n, timeout), self.events
            return list(self.events)


@pytest.fixture
def server():
    rec = Recorder()
    secret = protocol.new_secret()
    srv = ControlServer("127.0.0.1", "127.0.0.1", secret, rec, handshake_timeout=1.0)
    yield srv, rec, secret
    srv.close()


def hello(chan, node="worker:0"):
    chan.send({"type": "hello", "role": "node", "node": node})


def test_authenticated_round_trip(server):
    srv, rec, secret = server
    chan = protocol.connect(srv.address, secret)
    hello(chan)
    chan.send({"type": "done", "value": {"loss": 0.1}})
    events = rec.wait_for(2)
    assert events[0] == ("connect", "worker:0", "node")
    assert events[1] == ("message", "worker:0", "node", {"type": "done", "value": {"loss": 0.1}})
    rec.chan.send({"type": "stop"})  # the driver can talk back
    assert chan.recv() == {"type": "stop"}
    chan.close()
    assert rec.wait_for(3)[2] == ("disconnect", "worker:0", "node")
    assert srv.rejected == 0


def test_client_refuses_a_driver_without_the_secret(server):
    srv, _, _ = server
    with pytest.raises(protocol.AuthenticationError):
        protocol.connect(srv.address, protocol.new_secret())


def _raw(srv):
    s = socket.create_connection(srv.address, timeout=5)
    greeting = s.recv(len(protocol.MAGIC) + protocol.NONCE_LEN)
    assert greeting.startswith(protocol.MAGIC)
    return s


def _closed_by_server(s):
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("payload", [
    b"",                                   # connects, says nothing
    b"\x00" * 64,                          # zeros where the MAC goes
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3,  # garbage
    struct.pack("!Q", 2**62) + b"x" * 56,  # a huge length prefix, as if authenticated
])
def test_rogue_clients_are_rejected_and_the_job_goes_on(server, payload):
    srv, rec, secret = server
    rogue = _raw(srv)
    rogue.sendall(payload)
    assert _closed_by_server(rogue)  # dropped: by the MAC check or the 1 s handshake timeout
    rogue.close()
    assert srv.rejected == 1
    assert rec.events == []  # nothing from the rogue reached the job
    chan = protocol.connect(srv.address, secret)  # a real node still gets through
    hello(chan)
    assert rec.wait_for(1)[0] == ("connect", "worker:0", "node")
    chan.close()


def test_wrong_secret_is_rejected(server):
    srv, rec, _ = server
    with pytest.raises((protocol.AuthenticationError, ConnectionError, OSError)):
        chan = protocol.connect(srv.address, protocol.new_secret())
        hello(chan)
        chan.recv()
    assert srv.rejected == 1
    assert rec.events == []


def test_a_silent_client_does_not_block_others(server):
    srv, rec, secret = server
    silent = socket.create_connection(srv.address)  # holds a connection open, sends nothing
    chan = protocol.connect(srv.address, secret)
    hello(chan)
    assert rec.wait_for(1)[0][0] == "connect"
    chan.close()
    silent.close()


def test_authenticated_peer_must_say_hello(server):
    srv, rec, secret = server
    chan = protocol.connect(srv.address, secret)
    chan.send({"type": "log", "line": "no hello first"})
    with pytest.raises((protocol.ChannelClosed, OSError)):
        chan.sock.settimeout(5)
        chan.recv()
    assert srv.rejected == 1 and rec.events == []


def test_close_is_idempotent_and_frees_the_port(server):
    srv, _, _ = server
    port = srv.address[1]
    srv.close()
    srv.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
