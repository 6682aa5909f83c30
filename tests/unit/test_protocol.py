"""The driver's control server over real loopback sockets: authenticated peers get through,
rogue peers (no secret, wrong secret, garbage, a huge length prefix, silence) are refused
without harming the peers that belong to the job."""

import socket
import struct
import time

import pytest
from helpers.control import hello, raw_connection

from sparktf.common import protocol


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


def test_both_ends_send_small_messages_at_once(server):
    """Nagle's algorithm off on both ends: the driver's back-to-back small messages
    ('training_done' then 'stop') would otherwise wait for the peer's delayed ACK (40 ms on
    Linux) before the second one leaves."""
    srv, rec, secret = server
    chan = protocol.connect(srv.address, secret)
    hello(chan)
    rec.wait_for(1)
    for sock in (chan.sock, rec.chan.sock):
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    chan.close()


def test_client_refuses_a_driver_without_the_secret(server):
    srv, _, _ = server
    with pytest.raises(protocol.AuthenticationError):
        protocol.connect(srv.address, protocol.new_secret())


def _closed_by_server(s):
    """Whether the server hangs up (after its verdict, for a peer that sent a wrong MAC)."""
    s.settimeout(5)
    try:
        while s.recv(64):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # connects, says nothing
        b"\x00" * 64,  # zeros where the MAC goes
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3,  # garbage
        struct.pack("!Q", 2**62) + b"x" * 56,  # a huge length prefix, as if authenticated
    ],
)
def test_rogue_clients_are_rejected_and_the_job_goes_on(server, payload):
    srv, rec, secret = server
    rogue = raw_connection(srv)
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


def test_close_cannot_raise_even_on_a_broken_server(server):
    srv, _, _ = server
    time.sleep(0.2)  # the acceptor is blocked in accept(), which closing the fd does not wake
    # (private: nothing public breaks a server's listening socket under it)
    srv._sock.close()  # as if the socket had gone bad under it
    srv.close()
    srv.close()
    assert not srv._acceptor.is_alive()


def test_a_send_to_a_node_that_has_gone_leaves_its_last_words_readable():
    """A node sends its error and exits; the driver, answering another node, sends it a
    message that fails (the peer is gone). The node's error, already in the driver's receive
    buffer, is still read: closing the channel on that failed send lost it (the job then
    blamed the bare exit code instead of main_fn's exception)."""
    from sparktf.driver.attempt import send_quietly

    listener = socket.create_server(("127.0.0.1", 0))
    node_sock = socket.create_connection(listener.getsockname())
    conn, _ = listener.accept()
    driver_side, node_side = protocol.Channel(conn), protocol.Channel(node_sock)
    node_side.send({"type": "error", "message": "batch_size must be a positive int"})
    node_side.close()
    for _ in range(5):  # the first send may still go out; the next ones fail
        send_quietly(driver_side, {"type": "bound", "rows": 10})
        time.sleep(0.02)
    assert driver_side.recv() == {"type": "error", "message": "batch_size must be a positive int"}
    with pytest.raises((protocol.ChannelClosed, ConnectionResetError)):
        driver_side.recv()
    driver_side.close()
    listener.close()


def test_a_wrong_secret_is_said_so_at_once(server):
    srv, rec, _ = server
    start = time.monotonic()
    with pytest.raises(protocol.AuthenticationError, match="refused this job secret"):
        protocol.connect(srv.address, protocol.new_secret(), timeout=20)
    assert time.monotonic() - start < 5  # refused, not tried again until the timeout
    assert srv.gate.wrong_secret == 1


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


class FlakyListener(socket.socket):
    """A real listening socket whose accept() first fails with the errors the kernel gives
    under load. Faked, at the system call, because they cannot be caused on demand here
    (ENFILE needs the whole system out of files; ECONNABORTED and EPROTO a connection reset
    while queued, which Linux does not report from accept)."""

    def __init__(self, errors):
        super().__init__(socket.AF_INET, socket.SOCK_STREAM)
        self.errors = list(errors)
        self.bind(("127.0.0.1", 0))
        self.listen(16)

    def accept(self):
        if self.errors:
            import os

            code = self.errors.pop(0)
            raise OSError(code, os.strerror(code))
        return super().accept()


def test_the_acceptor_survives_transient_accept_errors(caplog):
    import errno

    listener = FlakyListener(
        [errno.ECONNABORTED, errno.ENFILE, errno.EPROTO, errno.EMFILE, errno.ECONNABORTED]
    )
    secret = protocol.new_secret()
    admitted = []
    gate = protocol.Gatekeeper(
        listener,
        secret,
        lambda s, session, d: admitted.append(s),
        what="test server",
        handshake_timeout=5,
    )
    try:
        with caplog.at_level("WARNING"):
            chan = protocol.connect(listener.getsockname(), secret, timeout=10)
        deadline = time.monotonic() + 5
        while not admitted and time.monotonic() < deadline:  # handed on after its verdict
            time.sleep(0.01)
        assert len(admitted) == 1 and gate.thread.is_alive()
        assert gate.accept_errors == 5 and listener.errors == []
        assert "cannot accept" in caplog.text  # ENFILE/EMFILE: logged, backed off, went on
        chan.close()
    finally:
        gate.close()
        listener.close()
        for s in admitted:
            s.close()
    assert not gate.thread.is_alive()
