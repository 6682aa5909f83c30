"""spark.sparktf.portRange on one host: ports of the range are claimed so that reservations
(non-listening SO_REUSEADDR sockets, which the kernel lets share a port) and listeners never
share one, and an exhausted range says which setting to widen. Real sockets on loopback."""

import os
import socket
import stat
import subprocess
import sys
import tempfile

import pytest

from sparktf.common import ports
from sparktf.common.ports import PortRange, PortReservation
from sparktf.errors import PortRangeError
from sparktf.node.feed.equalize import FeedBound
from sparktf.node.feed.exchange import Exchange


def free_block(size):
    for low in range(48100, 52000, 89):
        try:
            held = [socket.create_server(("0.0.0.0", p)) for p in range(low, low + size)]
        except OSError:
            continue
        for s in held:
            s.close()
        return PortRange(low, low + size - 1)
    pytest.skip(f"no {size} free consecutive ports")


@pytest.mark.parametrize(
    "text, expected",
    [("40000-40100", PortRange(40000, 40100)), (" 5 - 5 ", PortRange(5, 5))],
)
def test_a_range_parses(text, expected):
    assert PortRange.parse(text) == expected
    assert len(expected) == expected.high - expected.low + 1


@pytest.mark.parametrize("text", ["40000", "a-b", "10-5", "0-10", "1-65536", "1-2-3"])
def test_a_bad_range_says_what_is_valid(text):
    with pytest.raises(ValueError, match="LOW-HIGH"):
        PortRange.parse(text)


def test_reservations_in_a_range_never_share_a_port_and_exhaust_it_clearly():
    block = free_block(4)
    held = [PortReservation("127.0.0.1", block) for _ in range(4)]
    try:
        assert sorted(r.port for r in held) == list(range(block.low, block.high + 1))
        with pytest.raises(PortRangeError, match=f"spark.sparktf.portRange={block}"):
            PortReservation("127.0.0.1", block)
        with pytest.raises(PortRangeError, match="control server"):
            ports.listening_socket("127.0.0.1", block, "the driver's control server", 8)
    finally:
        for r in held:
            r.release()
    again = PortReservation("127.0.0.1", block)  # released: free again
    again.release()


def test_a_listener_never_takes_a_port_reserved_for_a_tf_server():
    block = free_block(2)
    reservation = PortReservation("127.0.0.1", block)
    sock, claim = ports.listening_socket("127.0.0.1", block, "a listener", 8)
    try:
        assert sock.getsockname()[1] != reservation.port
        assert block.low <= sock.getsockname()[1] <= block.high
    finally:
        sock.close()
        ports.release(claim)
        reservation.release()


def test_a_port_another_program_listens_on_is_skipped():
    block = free_block(2)
    with socket.create_server(("0.0.0.0", block.low)):
        r = PortReservation("127.0.0.1", block)
        try:
            assert r.port == block.high
        finally:
            r.release()


def test_the_row_exchange_listens_in_the_range():
    block = free_block(2)
    node = Exchange("chief:0", "127.0.0.1", b"s" * 32, FeedBound(), timeout=5, ports=block)
    try:
        port = int(node.address.rsplit(":", 1)[1])
        assert block.low <= port <= block.high
    finally:
        node.close()
    sock, claim = ports.listening_socket("127.0.0.1", PortRange(port, port), "again", 8)
    sock.close()
    ports.release(claim)


def abstract_names():
    """The abstract Unix socket names bound on this host's network namespace (the kernel's
    list: ``@name`` in /proc/net/unix)."""
    with open("/proc/net/unix") as f:
        return {line.split()[-1] for line in f if line.split()[-1].startswith("@")}


def test_a_claim_is_an_abstract_socket_held_as_long_as_the_port(tmp_path, monkeypatch):
    """A claim is no file: an abstract Unix socket named after the port, which the kernel
    frees with its process (no lock file in a shared directory another user can own)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    block = free_block(2)
    r = PortReservation("127.0.0.1", block)
    try:
        assert f"@sparktf-port-{r.port}" in abstract_names()
    finally:
        r.release()
    assert f"@sparktf-port-{r.port}" not in abstract_names()
    assert os.listdir(tmp_path) == []  # nothing written to the temp directory


def test_a_planted_lock_directory_is_neither_followed_nor_changed(tmp_path, monkeypatch):
    """Another user's symlink where the lock directory was, to a 0700 directory: the claim
    never touches it (it used to chmod the target 1777 and create files in it)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    target = tmp_path / "victim"
    target.mkdir(mode=0o700)
    (tmp_path / "sparktf-ports").symlink_to(target)
    block = free_block(1)
    sock, claim = ports.listening_socket("127.0.0.1", block, "a listener", 8)
    sock.close()
    ports.release(claim)
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert list(target.iterdir()) == []


def test_a_claim_dies_with_its_process():
    """A process killed while holding a port leaves no claim behind."""
    block = free_block(1)
    code = (
        "import sys, time\n"
        "from sparktf.common.ports import PortRange, PortReservation\n"
        f"r = PortReservation('127.0.0.1', PortRange({block.low}, {block.low}))\n"
        "print(r.port, flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert int(proc.stdout.readline()) == block.low
        with pytest.raises(PortRangeError):
            PortReservation("127.0.0.1", block)  # held by the other process
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    PortReservation("127.0.0.1", block).release()  # the kernel freed its claim
