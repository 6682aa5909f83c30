"""A node and its supervisor notice a driver whose host went silent (no FIN, no RST: a crash,
a network split) within a bound, and stop, freeing GPUs and ports.

Real TCP connections in a network namespace of the test's own (``unshare -n``: its loopback
is private, nothing else on the machine is touched), whose loopback is then taken down: the
driver's side of the connection never answers again, as a crashed host would not."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import socket, subprocess, sys, time
    from sparktf.common import keepalive

    sending, watched = sys.argv[1] == "sending", sys.argv[2] == "watched"
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    node = socket.create_connection(server.getsockname())
    driver, _ = server.accept()
    if watched:
        keepalive.watch_peer(node, 3)
    subprocess.run(["ip", "link", "set", "lo", "down"], check=True)  # the driver falls silent
    node.settimeout(0.2)
    started = time.monotonic()
    while time.monotonic() - started < 8:
        try:
            if sending:
                node.send(b"heartbeat")  # a node: one a second (faster here)
            data = node.recv(1)  # a supervisor: idle, waiting for the driver's word
            if data == b"":
                print(f"ended after {time.monotonic() - started:.1f}s: closed")
                break
        except OSError as exc:
            if isinstance(exc, socket.timeout) and exc.errno is None:
                continue  # settimeout's own: nothing yet
            print(f"ended after {time.monotonic() - started:.1f}s: {exc}")
            break
    else:
        print("still connected after 8 s")
''')

needs_netns = pytest.mark.skipif(
    shutil.which("unshare") is None
    or shutil.which("ip") is None
    or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0,
    reason="needs unshare -n and ip (a private network namespace)",
)


def _run(mode, watched):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", SCRIPT, mode, "watched" if watched else "plain"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=root),
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@needs_netns
@pytest.mark.parametrize("mode", ["sending", "idle"])
def test_a_connection_to_a_silent_driver_ends_within_the_bound(mode):
    line = _run(mode, watched=True)
    assert line.startswith("ended after"), line
    assert float(line.split()[2].rstrip("s:")) < 3 * 2.5, line


@needs_netns
def test_without_the_watch_a_silent_driver_is_waited_for_far_longer():
    """What the watch is for: the kernel alone retries for about 15 minutes."""
    assert _run("sending", watched=False) == "still connected after 8 s"


def test_every_connection_to_the_driver_is_watched():
    """The node's and the supervisor's connections to the driver get the watch."""
    import inspect

    from sparktf.node import process
    from sparktf.task import supervisor

    for module in (process, supervisor):
        assert "keepalive.watch_peer(chan.sock)" in inspect.getsource(module)
