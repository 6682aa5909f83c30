"""The reader side of a node's feed (:class:`sparktf.node.feed.stream.Stream`) and the bound's
wake-ups, over the real feed wire on a Unix socket: what equalization costs a node per frame.
No Spark, no TensorFlow."""

import pickle
import threading
import time

from helpers.feed_wire import serve_partition

from sparktf.common import feedwire
from sparktf.common.spec import FeedConfig
from sparktf.node.feed import batches
from sparktf.node.feed.equalize import FeedBound
from sparktf.node.feed.spool import Spool
from sparktf.node.feed.stream import EOF, Stream


def multi_frames(ids, per_part, parts_per_frame):
    """Frames as the barrier task forwards Spark's own pickled batches (``M`` frames)."""
    parts = [pickle.dumps(ids[i : i + per_part], protocol=5) for i in range(0, len(ids), per_part)]
    frames = []
    for i in range(0, len(parts), parts_per_frame):
        group = parts[i : i + parts_per_frame]
        payload = b"".join(bytes(b) for b in feedwire.multi_frame(group)[1:])
        frames.append((feedwire.MULTI, payload, sum(len(pickle.loads(p)) for p in group)))
    return frames


def read_all(stream):
    chunks = []
    while True:
        item = stream.take()
        if item is EOF:
            return chunks
        assert not isinstance(item, BaseException), item
        chunks.append(item)


def test_rdd_frames_share_one_receive_buffer_and_every_element_is_its_own(tmp_path):
    """RDD frames are received into one reused buffer (no new zeroed memory per frame): the
    elements handed out, and a frame the consumer has not passed (kept for giving rows away),
    stay what was sent after later frames overwrite the buffer."""
    import numpy as np

    ids = [(np.full(64, i, dtype="float32"), i) for i in range(300)]
    path = str(tmp_path / "feed.sock")
    serve_partition(path, multi_frames(ids, per_part=7, parts_per_frame=5))
    stream = Stream(
        path,
        FeedConfig(equalize=True, exchange=True, feed_timeout=20),
        None,
        None,
        spool_factory=lambda: Spool(str(tmp_path / "spool"), None, 1),
    )
    try:
        chunks = read_all(stream)
        got = [e for chunk in chunks for e in chunk]
        assert [e[1] for e in got] == list(range(300))
        assert all((e[0] == e[1]).all() for e in got)
        assert len(stream.frame_rows) > 1
        kind, payload = stream.frame(0)  # held: the consumer released nothing
        first = batches.decode(kind, payload, None)
        assert [e[1] for e in first] == list(range(stream.frame_rows[0]))
        assert all((e[0] == e[1]).all() for e in first)
    finally:
        stream.close_spool()
        stream.close()


def test_rows_are_reported_when_the_next_frame_does_not_come_in_time(tmp_path):
    """A slow Spark side: rows that came in a burst are reported within PROGRESS_INTERVAL,
    not only when the next frame (or the end) finally arrives. The other nodes' consumers
    wait for this count; the end here comes only after the report (or 10 s)."""
    reports = feed_a_burst_then_pause(tmp_path)
    assert (40, False) in reports, reports  # before the end, not with it
    assert reports[-1] == (40, True)


def feed_a_burst_then_pause(tmp_path, check_stream=None):
    """40 rows in 4 frames back to back, then a pause that ends only once all 40 are reported
    (or after 10 s); every row is read. The (received, ended) reports, in order."""
    reports, reported_all = [], threading.Event()

    def report(msg):
        reports.append((msg["received"], msg["ended"]))
        if msg["received"] == 40:
            reported_all.set()

    frames = [
        (feedwire.PICKLED, pickle.dumps(list(range(i, i + 10))), 10) for i in range(0, 40, 10)
    ]
    path = str(tmp_path / "feed.sock")
    serve_partition(path, frames, before_end=lambda: reported_all.wait(10))
    stream = Stream(path, FeedConfig(equalize=True, feed_timeout=20), None, report)
    try:
        if check_stream is not None:
            check_stream(stream)
        assert [r for c in read_all(stream) for r in c] == list(range(40))
    finally:
        stream.close()
    return reports


class CountingCondition(threading.Condition):
    def __init__(self):
        super().__init__()
        self.notified = 0

    def notify_all(self):
        self.notified += 1
        super().notify_all()


def test_a_consumer_held_by_the_others_count_is_not_woken_by_its_own_rows():
    """Each frame that arrives pokes the bound; a consumer waiting for another node's count is
    not woken for it (a thread woken for nothing, per frame, was a good part of what
    equalizing cost a node). It goes on when the others' count moves, or its own does while
    it is the smaller."""
    bound, own = FeedBound(), [10]
    bound.follow(lambda: own[0], lambda: None)
    bound.cond = CountingCondition()
    bound.update(0, False, others=10)
    consumer = threading.Thread(target=bound.wait_beyond, args=(10, 10))
    consumer.start()
    deadline = time.monotonic() + 5
    # (private: threading.Condition has no public count of its waiters)
    while not bound.cond._waiters and time.monotonic() < deadline:
        time.sleep(0.001)
    before = bound.cond.notified
    for n in range(11, 60):
        own[0] = n
        bound.poke()
    assert bound.cond.notified == before and consumer.is_alive()
    bound.update(0, False, others=25)  # another node reported more rows
    consumer.join(5)
    assert not consumer.is_alive()

    own[0] = 30  # now its own count is the smaller: its rows wake it
    bound.update(0, False, others=100)
    consumer = threading.Thread(target=bound.wait_beyond, args=(30, 10))
    consumer.start()
    while not bound.cond._waiters and time.monotonic() < deadline + 5:
        time.sleep(0.001)
    own[0] = 31
    bound.poke()
    consumer.join(5)
    assert not consumer.is_alive()


def test_a_feed_whose_socket_is_numbered_above_1024_still_reports_and_reads(
    tmp_path, many_descriptors
):
    """select() fails on a descriptor numbered 1024 or more; the feed's waits use poll()."""

    def numbered_above_1024(stream):
        # (private: the stream's socket is internal; its descriptor number is the point)
        assert stream._sock.fileno() >= 1024

    reports = feed_a_burst_then_pause(tmp_path, numbered_above_1024)
    assert (40, False) in reports and reports[-1] == (40, True)


def test_waits_on_a_socket_numbered_above_1024(many_descriptors):
    import socket

    from sparktf.common import protocol

    a, b = socket.socketpair()
    try:
        assert b.fileno() >= 1024
        assert not protocol.wait_readable(b, 0.01)
        assert protocol.wait_writable(a, 0.01)
        a.sendall(b"x")
        assert protocol.wait_readable(b, 1.0)
    finally:
        a.close()
        b.close()


def test_a_full_read_ahead_waits_without_spinning_when_nobody_needs_progress(tmp_path):
    """Without equalization (nobody to report progress to) a reader whose read-ahead is full
    waits for the consumer; it used to loop on "rows not reported yet" with the GIL held,
    a core burnt for as long as the consumer was slower than Spark (asynchronous training)."""
    frames = [
        (feedwire.PICKLED, pickle.dumps(list(range(i, i + 10))), 10) for i in range(0, 200, 10)
    ]
    path = str(tmp_path / "feed.sock")
    serve_partition(path, frames)
    stream = Stream(path, FeedConfig(feed_timeout=20, read_ahead=2), None, None)
    try:
        assert stream.take() == list(range(10))
        time.sleep(0.2)  # the read-ahead fills
        cpu = time.process_time()
        time.sleep(1.0)
        assert time.process_time() - cpu < 0.3
        assert [r for c in read_all(stream) for r in c] == list(range(10, 200))
    finally:
        stream.close()


def test_an_equalizing_reader_reads_on_while_its_consumer_waits_for_a_peers_count(tmp_path):
    """Under equalization a consumer may hand out only the rows every other node is known to
    have, and that count comes round the driver some milliseconds late: several frames of
    Spark's ~350-row RDD batches at full speed. The default read-ahead covers such a lag, so
    the reader goes on reading Spark's socket meanwhile instead of stalling Spark's side
    (bench/feed_throughput.py (h); docs/benchmarks.md, session 26)."""
    frames = [
        (feedwire.PICKLED, pickle.dumps(list(range(i, i + 10))), 10) for i in range(0, 200, 10)
    ]
    path = str(tmp_path / "feed.sock")
    serve_partition(path, frames)
    reports = []
    stream = Stream(path, FeedConfig(feed_timeout=20, equalize=True), None, reports.append)
    try:
        deadline = time.monotonic() + 5
        while stream.received < 120 and time.monotonic() < deadline:
            time.sleep(0.01)  # the consumer takes nothing: held back by its peers' count
        assert stream.received >= 120, (
            f"the reader stopped after {stream.received} rows ({stream.received // 10} frames)"
        )
        assert reports and reports[-1]["received"] >= 100  # the peers hear of them
        assert [r for c in read_all(stream) for r in c] == list(range(200))
    finally:
        stream.close()
