"""Every frame after the handshake is authenticated: a man in the middle on real loopback
sockets (:mod:`helpers.mitm`) between a real node-side client and the driver's real control server, or
between two nodes' real row exchanges, alters, replays, reorders, drops, splices or forges
frames, and each is refused before it is used, as a security error that fails the job."""

import pickle
import socket
import threading
import time

import pytest
from helpers import mitm
from helpers.control import Recorder, hello

from sparktf.common import protocol
from sparktf.driver.control import ControlServer
from sparktf.errors import SparkTFError


class Guard(Recorder):
    """The handler as the runner is: a refused frame is the job's failure."""

    def on_security_error(self, node, role, exc):
        self._add("security", node, role, exc)


@pytest.fixture
def relayed():
    """A control server, and a man in the middle in front of it; ``start(tamper)`` sets the
    attack and gives (client channel, server, guard)."""
    made = []

    def start(tamper=None, handler=None):
        guard = handler or Guard()
        secret = protocol.new_secret()
        srv = ControlServer("127.0.0.1", "127.0.0.1", secret, guard, handshake_timeout=5)
        proxy = mitm.Mitm(srv.address, tamper=tamper)
        made.append((srv, proxy))
        chan = protocol.connect(proxy.address, secret, timeout=10)
        hello(chan)
        return chan, srv, guard, proxy

    yield start
    for srv, proxy in made:
        proxy.close()
        srv.close()


def security_events(guard):
    return [e for e in guard.events if e[0] == "security"]


def messages_received(guard):
    return [e[3] for e in guard.events if e[0] == "message"]


def wait_refused(guard):
    events = guard.wait_for(2)
    with guard.cond:
        assert guard.cond.wait_for(lambda: security_events(guard), 10), guard.events
    [(_, node, role, exc)] = security_events(guard)
    assert (node, role) == ("worker:0", "node")
    assert isinstance(exc, protocol.FrameRejected) and isinstance(exc, SparkTFError)
    assert "failed its MAC" in str(exc) and "worker:0" in str(exc)
    return events


def test_frames_through_an_honest_relay_arrive_both_ways(relayed):
    chan, srv, guard, proxy = relayed()
    chan.send({"type": "heartbeat", "step": 1, "rows": 0})
    guard.wait_for(2)
    guard.chan.send({"type": "stop"})
    assert chan.recv() == {"type": "stop"}
    assert chan.session is not None and guard.chan.session is not None  # both ends keyed
    assert security_events(guard) == [] and srv.frames_rejected == 0
    # every frame on the wire carries a 32-byte MAC after its pickled payload
    for _, frame in proxy.frames[0]:
        (size,) = mitm.CONTROL.unpack(frame[:8])
        assert len(frame) == 8 + size + protocol.TAG_LEN
    chan.close()


def test_an_altered_frame_is_refused_and_is_the_jobs_failure(relayed):
    def alter(conn, direction, index, frame):
        return [mitm.flip(frame)] if (direction, index) == ("c2s", 1) else [frame]

    chan, srv, guard, _ = relayed(alter)
    chan.send({"type": "heartbeat", "step": 1, "rows": 0})  # altered on the way
    chan.send({"type": "heartbeat", "step": 2, "rows": 0})  # never read: the channel is closed
    wait_refused(guard)
    assert messages_received(guard) == []
    assert srv.frames_rejected == 1
    assert guard.wait_for(3)[-1][0] == "disconnect"  # the connection is closed
    chan.close()


def test_a_replayed_frame_is_refused(relayed):
    def replay(conn, direction, index, frame):
        return [frame, frame] if (direction, index) == ("c2s", 1) else [frame]

    chan, srv, guard, _ = relayed(replay)
    chan.send({"type": "done", "value": 1})  # delivered once, then replayed
    wait_refused(guard)
    assert messages_received(guard) == [{"type": "done", "value": 1}]
    chan.close()


def test_reordered_frames_are_refused(relayed):
    held = []

    def swap(conn, direction, index, frame):
        if direction == "c2s" and index == 1:
            held.append(frame)
            return []
        return [frame, *held] if direction == "c2s" and index == 2 else [frame]

    chan, srv, guard, _ = relayed(swap)
    chan.send({"type": "heartbeat", "step": 1, "rows": 0})
    chan.send({"type": "heartbeat", "step": 2, "rows": 0})
    wait_refused(guard)
    assert messages_received(guard) == []  # step 2 came first and was refused
    chan.close()


def test_a_dropped_frame_makes_the_next_one_refused(relayed):
    def drop(conn, direction, index, frame):
        return [] if (direction, index) == ("c2s", 1) else [frame]

    chan, srv, guard, _ = relayed(drop)
    chan.send({"type": "heartbeat", "step": 1, "rows": 0})  # dropped
    chan.send({"type": "done", "value": 2})
    wait_refused(guard)
    assert messages_received(guard) == []
    chan.close()


class Payload:
    """Creates a file when unpickled: proof that a forged frame was (or was not) loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_frame_forged_without_the_secret_is_never_unpickled(relayed, tmp_path):
    witness = tmp_path / "unpickled"
    evil = pickle.dumps(Payload(str(witness)))
    forged = mitm.CONTROL.pack(len(evil)) + evil + b"\x00" * protocol.TAG_LEN

    def inject(conn, direction, index, frame):
        return [forged, frame] if (direction, index) == ("c2s", 1) else [frame]

    chan, srv, guard, _ = relayed(inject)
    chan.send({"type": "heartbeat", "step": 1, "rows": 0})
    wait_refused(guard)
    time.sleep(0.2)
    assert not witness.exists()
    assert messages_received(guard) == []
    chan.close()


def test_a_frame_spliced_from_another_connection_is_refused(relayed):
    """The same message at the same place in another connection of the same job (same
    secret, same sequence number) has another MAC: each connection has its own keys."""
    guard = Guard()
    secret = protocol.new_secret()
    srv = ControlServer("127.0.0.1", "127.0.0.1", secret, guard, handshake_timeout=5)
    recorded = {}

    def splice(conn, direction, index, frame):
        if direction == "c2s" and index == 1:
            if conn == 0:
                recorded["frame"] = frame
            else:
                return [recorded["frame"]]
        return [frame]

    proxy = mitm.Mitm(srv.address, tamper=splice)
    try:
        first = protocol.connect(proxy.address, secret, timeout=10)
        hello(first, "worker:0")
        first.send({"type": "heartbeat", "step": 7, "rows": 0})
        guard.wait_for(2)
        second = protocol.connect(proxy.address, secret, timeout=10)
        hello(second, "worker:1")
        second.send({"type": "heartbeat", "step": 7, "rows": 0})  # the same bytes of payload
        with guard.cond:
            assert guard.cond.wait_for(lambda: security_events(guard), 10), guard.events
        assert [e[1] for e in security_events(guard)] == ["worker:1"]
        assert [e[1] for e in guard.events if e[0] == "message"] == ["worker:0"]
        first.close()
        second.close()
    finally:
        proxy.close()
        srv.close()


def test_a_recorded_handshake_replayed_by_a_forger_is_refused():
    """A forger who recorded a whole real connection (through the man in the middle) and
    plays the client's bytes again gets nowhere: the server's fresh nonce makes the recorded
    proof wrong, and it is refused as a wrong secret before any frame is read."""
    guard = Guard()
    secret = protocol.new_secret()
    srv = ControlServer("127.0.0.1", "127.0.0.1", secret, guard, handshake_timeout=5)
    proxy = mitm.Mitm(srv.address)
    try:
        chan = protocol.connect(proxy.address, secret, timeout=10)
        hello(chan)
        chan.send({"type": "done", "value": 1})
        guard.wait_for(2)
        chan.close()
        guard.wait_for(3)
        shake = proxy.handshakes[0]
        frames = b"".join(f for d, f in proxy.frames[0] if d == "c2s")
        forger = socket.create_connection(srv.address, timeout=5)
        assert mitm.recv_exact(forger, protocol.GREETING_LEN) != shake["greeting"]
        forger.sendall(shake["reply"] + frames)
        assert forger.recv(1) == protocol.DENIED
        forger.close()
        time.sleep(0.2)
        assert srv.gate.wrong_secret == 1
        assert len(guard.events) == 3  # the real connection's, nothing from the forger
    finally:
        proxy.close()
        srv.close()


def test_a_frame_altered_on_its_way_to_a_node_is_refused_there_and_reported(relayed):
    def alter(conn, direction, index, frame):
        return [mitm.flip(frame)] if (direction, index) == ("s2c", 0) else [frame]

    chan, srv, guard, _ = relayed(alter)
    guard.wait_for(1)
    guard.chan.send({"type": "stop"})
    with pytest.raises(protocol.FrameRejected, match="failed its MAC"):
        chan.recv()
    with pytest.raises(protocol.FrameRejected):
        chan.recv()  # the channel stays refused
    # the node's side told the driver why, over its own (still sound) direction
    [event] = [e for e in guard.wait_for(2) if e[0] == "message"]
    assert event[3]["type"] == "error" and event[3]["exc_type"] == "FrameRejected"
    chan.close()


def test_a_handler_without_the_hook_gets_the_refusal_as_the_nodes_error(relayed):
    def alter(conn, direction, index, frame):
        return [mitm.flip(frame)] if (direction, index) == ("c2s", 1) else [frame]

    chan, srv, guard, _ = relayed(alter, handler=Recorder())
    chan.send({"type": "heartbeat", "step": 1, "rows": 0})
    events = guard.wait_for(2)
    assert events[1][:3] == ("message", "worker:0", "node")
    assert events[1][3]["type"] == "error" and events[1][3]["exc_type"] == "FrameRejected"
    chan.close()


def test_the_session_keys_differ_per_direction_and_per_connection():
    secret = protocol.new_secret()
    a_server = protocol.Session.derive(secret, b"s" * 32, b"c" * 32, server=True)
    a_client = protocol.Session.derive(secret, b"s" * 32, b"c" * 32, server=False)
    b_client = protocol.Session.derive(secret, b"s" * 32, b"d" * 32, server=False)
    frame = b"\x00" * 8 + b"payload"
    tag = a_client.sending.seal(frame)
    a_server.receiving.verify(tag, frame)  # the other end accepts it
    with pytest.raises(protocol.FrameRejected):
        a_client.receiving.verify(tag, frame)  # reflected back to its sender
    assert b_client.sending.seal(frame) != tag  # another connection: other keys


# ------------------------------------------------------------------------ the row exchange
def run_moves(tmp_path, shares, tamper):
    """Two real DataFeeds fed unequal shares (as test_feed_moves runs them), consumed in
    lockstep, with a man in the middle in front of each node's row exchange. Returns each
    consumer's error (None if it finished) and the proxies."""
    from helpers.feed_wire import serve_partition
    from test_feed_moves import SECRET, Driver, arrow_frames

    from sparktf.common.spec import FeedConfig
    from sparktf.common.topology import assign_roles, format_address, split_address
    from sparktf.node.feed.datafeed import DataFeed

    names = [r.name for r in assign_roles(len(shares), 0, "chief", False)]
    driver = Driver(names)
    proxies = {}
    # (The Driver harness delivers its bounds from a thread of its own, as over the control
    # channel.)
    lock = threading.Lock()

    def report(name):
        apply = driver.report(name)

        def through_proxy(msg):
            if msg.get("exchange"):
                with lock:
                    if name not in proxies:
                        proxies[name] = mitm.Mitm(split_address(msg["exchange"]), mitm.FEED, tamper)
                msg = dict(msg, exchange=format_address(*proxies[name].address))
            apply(msg)

        return through_proxy

    feeds = {}
    for name, ids in zip(names, shares):
        path = str(tmp_path / f"{name.replace(':', '')}.sock")
        serve_partition(path, arrow_frames(ids, 10))
        spool = tmp_path / name.replace(":", "")
        spool.mkdir()
        feeds[name] = DataFeed(
            path,
            train_mode=True,
            input_mapping=None,
            config=FeedConfig(
                num_epochs=1, equalize=True, exchange=True, read_ahead=2, feed_timeout=20
            ),
            spool_dir=str(spool),
            report=report(name),
            bound=driver.bounds[name],
            peer=(name, "127.0.0.1", SECRET),
        )
    step = threading.Barrier(len(names), timeout=30)
    errors = dict.fromkeys(names)

    def consume(name):
        feed = feeds[name]
        try:
            while not feed.should_stop():
                feed.next_batch(8)
                step.wait()
            feed.close()
        except threading.BrokenBarrierError:  # the other node failed: stop, as sparktf would
            feed.terminate()
            feed.close()
        except BaseException as exc:
            errors[name] = exc
            step.abort()
            feed.terminate()
            feed.close()

    threads = [threading.Thread(target=consume, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a consumer hung"
    for p in proxies.values():
        p.close()
    deadline = time.monotonic() + 10  # every feed's and exchange's thread is gone
    while (
        any(t.name.startswith("sparktf") for t in threading.enumerate())
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("sparktf")]
    return errors, proxies


@pytest.mark.parametrize("attack", ["alter", "replay", "forge"])
def test_a_row_frame_tampered_between_nodes_fails_the_taking_nodes_feed(tmp_path, attack):
    witness = tmp_path / "unpickled"
    evil = pickle.dumps([Payload(str(witness))])

    def tamper(conn, direction, index, frame):
        if direction != "c2s" or index != 2:  # 0: the giver's name, 1..: rows
            return [frame]
        if attack == "alter":
            return [mitm.flip(frame)]
        if attack == "replay":
            return [frame, frame]
        return [mitm.FEED.pack(b"P", len(evil)) + evil + b"\x00" * protocol.TAG_LEN, frame]

    # the worker gives 70 of its rows to the chief, through the chief's man in the middle
    errors, proxies = run_moves(tmp_path, [list(range(30)), list(range(1000, 1171))], tamper)
    assert proxies["chief:0"].frames[0] and not proxies["worker:0"].frames
    exc = errors["chief:0"]
    assert isinstance(exc, protocol.FrameRejected), errors
    assert "failed its MAC" in str(exc) and "from worker:0" in str(exc)
    assert not witness.exists()


def test_rows_moved_through_an_honest_relay_arrive(tmp_path):
    errors, proxies = run_moves(tmp_path, [list(range(30)), list(range(1000, 1171))], None)
    assert errors == {"chief:0": None, "worker:0": None}
    frames = [f for d, f in proxies["chief:0"].frames[0] if d == "c2s"]
    assert frames[0][:1] == b"N" and frames[-1][:1] == b"E" and len(frames) >= 9
