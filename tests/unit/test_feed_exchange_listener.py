"""The row exchange's listener (each training node's, for rows moved to it) over real loopback
sockets: its unauthenticated connections are capped, its givers too, and its thread cannot die
unseen: a failure there fails the node's taking of rows with the cause."""

import socket
import time

import pytest

from sparktf.common import protocol
from sparktf.common.topology import split_address
from sparktf.errors import FeedError
from sparktf.node.feed import exchange
from sparktf.node.feed.equalize import FeedBound
from sparktf.node.feed.exchange import Exchange

SECRET = b"s" * 32


@pytest.fixture
def ex():
    node = Exchange("chief:0", "127.0.0.1", SECRET, FeedBound(), timeout=5)
    yield node
    node.close()


def wait(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def test_silent_connections_are_capped_and_a_giver_still_gets_in(ex):
    address = split_address(ex.address)
    flood = [socket.create_connection(address) for _ in range(exchange.MAX_PENDING + 40)]
    try:
        # turned away, or (on a loaded machine, where opening them takes over a second)
        # the oldest dropped for them
        # (private: the listener's gate and connections are internal; their counts are the point)
        assert wait(lambda: ex._gate.turned_away + ex._gate.evicted >= 40), vars(ex._gate)
        assert ex._gate.pending <= exchange.MAX_PENDING
        time.sleep(protocol.EVICT_AFTER + 0.1)  # old enough now to be dropped for a newcomer
        evicted = ex._gate.evicted
        chan = protocol.connect(address, SECRET, timeout=10, what="row exchange")
        assert ex._gate.evicted > evicted
        chan.close()
    finally:
        for s in flood:
            s.close()


def test_givers_over_the_cap_are_told_to_try_again(ex, monkeypatch):
    monkeypatch.setattr(exchange, "MAX_PEERS", 2)
    address = split_address(ex.address)
    first = protocol.connect_once(address, SECRET, 5)
    second = protocol.connect_once(address, SECRET, 5)
    assert wait(lambda: len(ex._conns) == 2)
    with pytest.raises(protocol.TurnedAway, match="no more peers"):
        protocol.connect_once(address, SECRET, 5)
    first.close()  # a giver done: room for the next
    assert wait(lambda: len(ex._conns) == 1)
    third = protocol.connect_once(address, SECRET, 5)
    for chan in (second, third):
        chan.close()
    assert ex._gate.busy == 1


def test_a_failed_listener_fails_the_taking_with_the_cause(ex):
    # a real failure of accept(): the listening socket shut down under the thread (EINVAL)
    ex._listener.shutdown(socket.SHUT_RDWR)
    assert wait(lambda: not ex._gate.thread.is_alive())
    taken = ex.taken([["worker:0", 5]])
    start = time.monotonic()
    with pytest.raises(FeedError, match="row exchange's listener of chief:0 failed"):
        next(taken)
    assert time.monotonic() - start < 2  # at once, not after the feed timeout (5 s)
