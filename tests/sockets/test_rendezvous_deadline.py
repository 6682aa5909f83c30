"""A barrier task waiting at the rendezvous for every node's address gives up within a bound
when the driver never answers (the other tasks never came, a partition, a paused driver): a
typed error that says what to change, its reserved port released, and the driver told why
(sparktf/task/barrier.py). Real sockets: a real control server that reads the task's address
and never replies."""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from sparktf.common import ports
from sparktf.common.spec import LaunchSpec
from sparktf.common.topology import assign_roles
from sparktf.errors import RendezvousTimeoutError
from sparktf.task import barrier

TIMEOUT = 2.0


def launch_for(server, secret, port_range=None):
    srv = server
    return LaunchSpec(
        job_id="rdv",
        roles=assign_roles(2, 0, "chief", False),
        driver_address=srv.address,
        secret=secret,
        payload=b"",
        rendezvous_timeout=TIMEOUT,
        port_range=port_range,
    )


def test_a_rendezvous_the_driver_never_answers_ends_within_its_deadline(server):
    srv, rec, secret = server
    started = time.monotonic()
    with pytest.raises(RendezvousTimeoutError) as err:
        barrier.rendezvous(launch_for(srv, secret), "worker:0", "127.0.0.1", 40001)
    took = time.monotonic() - started
    assert TIMEOUT <= took < TIMEOUT + 10, took  # the bound: the deadline, not for ever
    text = str(err.value)
    assert "worker:0" in text and "spark.sparktf.reservationTimeout" in text
    assert f"{TIMEOUT:g}s" in text
    # the driver had the task's address: it was the answer that never came
    kinds = [e[3]["type"] for e in rec.wait_for(2) if e[0] == "message"]
    assert kinds == ["address"]


def free_port():
    with ports.PortReservation(host="127.0.0.1") as r:
        return r.port


def test_a_task_whose_rendezvous_expired_releases_its_port_and_tells_the_driver(server):
    srv, rec, secret = server
    port = free_port()
    only = ports.PortRange(port, port)
    launch = launch_for(srv, secret, port_range=only)
    with pytest.raises(RendezvousTimeoutError):
        list(barrier._steps(None, 1, "127.0.0.1", iter(()), launch, None, None))
    with ports.PortReservation(ports=only, what="the test") as again:  # released
        assert again.port == port
    errors = [e[3] for e in rec.wait_for(4) if e[0] == "message" and e[3]["type"] == "error"]
    assert errors and errors[0]["exc_type"] == "RendezvousTimeoutError"


def test_the_rendezvous_socket_is_watched_for_a_silent_driver():
    """A partition during the rendezvous: keepalive (and TCP_USER_TIMEOUT) ends the wait for
    a driver's host that stopped answering (tests/sockets/test_keepalive.py measures it)."""
    import inspect

    assert "keepalive.watch_peer(chan.sock)" in inspect.getsource(barrier.rendezvous)


PARTITION = textwrap.dedent('''
    import subprocess, threading, time
    from sparktf.common import keepalive, messages, protocol
    from sparktf.common.spec import LaunchSpec
    from sparktf.common.topology import assign_roles
    from sparktf.driver.control import ControlServer
    from sparktf.errors import RendezvousTimeoutError
    from sparktf.task import barrier

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # the watch's bound, 3 s here instead of 30 s (the kernel does the rest, for real)
    real_watch = keepalive.watch_peer
    keepalive.watch_peer = lambda sock, seconds=3, user_timeout=True: real_watch(
        sock, min(seconds, 3), user_timeout
    )
    got_address = threading.Event()

    class Driver:  # reads the address, never answers: the partition comes first
        def on_connect(self, node, peer, chan, hello):
            pass
        def on_message(self, node, peer, message):
            got_address.set()
        def on_disconnect(self, node, peer):
            pass

    secret = protocol.new_secret()
    server = ControlServer("127.0.0.1", "127.0.0.1", secret, Driver(), peer_silent_secs=600)
    launch = LaunchSpec(job_id="p", roles=assign_roles(2, 0, "chief", False),
                        driver_address=server.address, secret=secret, payload=b"",
                        rendezvous_timeout=120.0)

    def partition():
        got_address.wait(10)
        subprocess.run(["ip", "link", "set", "lo", "down"], check=True)

    threading.Thread(target=partition).start()
    started = time.monotonic()
    try:
        barrier.rendezvous(launch, "worker:0", "127.0.0.1", 40001)
        print("answered?")
    except RendezvousTimeoutError as exc:
        print(f"gave up after {time.monotonic() - started:.1f}s: {exc}")
''')

needs_netns = pytest.mark.skipif(
    shutil.which("unshare") is None
    or shutil.which("ip") is None
    or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0,
    reason="needs unshare -n and ip (a private network namespace)",
)


@needs_netns
def test_a_partition_during_the_rendezvous_ends_it_by_keepalive_before_the_deadline():
    """The driver's host falls silent (its loopback taken down in the test's own network
    namespace) after it read the task's address: the task's keepalive gives up within the
    watch's bound (3 s here, 30 s in use), long before reservationTimeout (120 s)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", PARTITION],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=root),
    )
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("gave up after"), line + out.stderr[-2000:]
    assert float(line.split()[3].rstrip("s:")) < 3 * 2.5, line
    assert "stopped answering" in line


def test_a_driver_nothing_listens_at_fails_the_rendezvous_naming_the_setting():
    """Where the driver (a Spark Connect client, say) advertised an address the executors
    cannot reach, the task's error says which setting names the address to advertise."""
    from sparktf.errors import SparkJobError

    launch = LaunchSpec(
        job_id="rdv",
        roles=assign_roles(2, 0, "chief", False),
        driver_address=("127.0.0.1", free_port()),  # nothing listens there
        secret=b"x" * 32,
        payload=b"",
        rendezvous_timeout=TIMEOUT,
        connect_timeout=1.0,
    )
    started = time.monotonic()
    with pytest.raises(SparkJobError) as err:
        barrier.rendezvous(launch, "worker:0", "127.0.0.1", 40001)
    assert time.monotonic() - started < 10
    text = str(err.value)
    assert "worker:0" in text and "spark.sparktf.controlHost" in text
