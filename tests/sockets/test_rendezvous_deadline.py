"""A barrier task waiting at the rendezvous for every node's address gives up within a bound
when the driver never answers (the other tasks never came, a partition, a paused driver): a
typed error that says what to change, its reserved port released, and the driver told why
(sparktf/task/barrier.py). Real sockets: a real control server that reads the task's address
and never replies."""

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
