"""A flood of connections, hundreds a second for many seconds, against the driver's real
control server on loopback, while real clients keep connecting: none is locked out, and the
server holds no thread per flooding connection. Seconds of real traffic: the sockets tier,
not the unit tier."""

import threading
import time

from helpers import mitm
from helpers.control import Recorder, hello

from sparktf.common import protocol
from sparktf.driver.control import ControlServer


def test_a_sustained_flood_does_not_lock_real_clients_out():
    rec = Recorder()
    secret = protocol.new_secret()
    srv = ControlServer("127.0.0.1", "127.0.0.1", secret, rec, handshake_timeout=10.0)
    threads_before = threading.active_count()
    flood = mitm.Flood(srv.address, rate=300, seconds=60.0)
    got_in, failures, most_threads = [], [], 0
    try:
        assert wait_for(lambda: flood.opened >= 400)  # the unauthenticated slots are full
        # real clients one after another, for 8 s of flood and at least 10 of them
        while len(got_in) < 10 or time.monotonic() - flood.start < 8:
            try:
                chan = protocol.connect(srv.address, secret, timeout=15)
                hello(chan, f"worker:{len(got_in)}")
                got_in.append(chan)
            except Exception as exc:
                failures.append(exc)
            most_threads = max(most_threads, threading.active_count())
            time.sleep(0.3)
        assert flood.thread.is_alive()  # all of it under the flood
        flood.stop()
        assert failures == []
        assert len(rec.wait_for(len(got_in))) >= len(got_in)
        assert flood.opened >= 1500  # it was a flood: hundreds a second for the whole time
        assert srv.gate.evicted + srv.gate.turned_away + srv.gate.timed_out > 500
        assert srv.gate.wrong_secret == 0
        # no thread per flooding connection: the flooder's, and one per real client
        assert most_threads <= threads_before + 2 + len(got_in)
    finally:
        flood.stop()
        for chan in got_in:
            chan.close()
        srv.close()


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()
