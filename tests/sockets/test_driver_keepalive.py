"""The driver sees the control connection of a node whose host fell silent (a crash, a
partition: no FIN, no RST; or a node that exits during a partition, its FIN lost) as closed
within a bound: keepalive on the driver's side of every control connection
(sparktf/driver/control.py). Without it the driver's idle socket waits for ever.

A real ControlServer and a real node connection in a network namespace of the test's own
(``unshare -n``: its loopback is private), whose loopback is then taken down."""

import os
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import subprocess, sys, threading, time
    from sparktf.common import messages, protocol
    from sparktf.driver.control import ControlServer

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    seconds = int(sys.argv[1])
    events = {"connect": threading.Event(), "disconnect": threading.Event()}

    class Handler:
        def on_connect(self, node, peer, chan, hello):
            events["connect"].set()
        def on_message(self, node, peer, message):
            pass
        def on_disconnect(self, node, peer):
            events["disconnect"].set()

    secret = protocol.new_secret()
    server = ControlServer("127.0.0.1", "127.0.0.1", secret, Handler(), peer_silent_secs=seconds)
    chan = protocol.connect(server.address, secret)
    chan.send(messages.hello(messages.SUPERVISOR, "worker:0", "h"))
    assert events["connect"].wait(10)
    subprocess.run(["ip", "link", "set", "lo", "down"], check=True)  # the node's host: silent
    started = time.monotonic()
    if events["disconnect"].wait(60):
        print(f"closed after {time.monotonic() - started:.1f}s")
    else:
        print("still open after 60 s")
''')

needs_netns = pytest.mark.skipif(
    shutil.which("unshare") is None
    or shutil.which("ip") is None
    or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0,
    reason="needs unshare -n and ip (a private network namespace)",
)


@needs_netns
def test_the_driver_sees_a_silent_nodes_connection_closed_within_the_bound():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", SCRIPT, "3"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=root),
    )
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("closed after"), line
    assert float(line.split()[2].rstrip("s")) < 3 * 2.5, line


def test_the_drivers_side_has_keepalive_but_no_user_timeout():
    """No TCP_USER_TIMEOUT on the driver's side: a node that is only stopped still answers
    the probes and is left to heartbeat_timeout; the driver's sends have SEND_TIMEOUT."""
    import inspect

    from sparktf.driver import control

    source = inspect.getsource(control.ControlServer._hello)
    assert "keepalive.watch_peer(conn, self._peer_silent_secs, user_timeout=False)" in source


def test_every_connection_to_the_driver_has_a_large_receive_buffer(server):
    """A paused driver reads nothing: what its nodes write meanwhile waits in its receive
    buffer, and once that is full their TCP_USER_TIMEOUT ends the connection 30 s later. The
    buffer is as large as the kernel allows up to RECV_BUFFER (docs/reliability.md)."""
    from sparktf.common import messages, protocol
    from sparktf.driver.control import RECV_BUFFER

    srv, rec, secret = server
    chan = protocol.connect(srv.address, secret)
    try:
        chan.send(messages.hello(messages.SUPERVISOR, "worker:0", "h"))
        rec.wait_for(1)
        with open("/proc/sys/net/core/rmem_max") as f:
            allowed = min(RECV_BUFFER, int(f.read()))
        got = rec.chan.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        assert got >= 2 * allowed, (got, allowed)  # the kernel doubles what it was asked
    finally:
        chan.close()
