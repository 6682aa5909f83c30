"""Unequal shares fed as they are, equalized by moving rows between nodes: two real
``DataFeed``s in one process, each fed the real feed wire over a Unix socket (what a barrier task
sends), the driver's real :class:`JobState` deciding the bound and the plan, and the rows
moving over real loopback TCP with the handshake. No Spark, no TensorFlow.

The consumers run in lockstep, as MultiWorkerMirroredStrategy's all-reduce makes them: neither
takes its next batch before the other has taken its own. The node that gives rows therefore
cannot wait for its consumer before sending them, and its partition must be read to its end
while its consumer waits for the other node.
"""

import os
import queue
import socket
import threading

import pyarrow as pa
import pytest
from helpers.feed_wire import serve_partition

from sparktf.common import feedwire, messages, protocol
from sparktf.common.spec import FeedConfig
from sparktf.common.topology import assign_roles
from sparktf.driver.job.state import JobState, Limits
from sparktf.errors import FeedError
from sparktf.node.feed.datafeed import DataFeed
from sparktf.node.feed.equalize import FeedBound

SECRET = b"s" * 32


def arrow_frames(ids, per_frame):
    batch = pa.RecordBatch.from_pydict({"id": pa.array(ids, type=pa.int64())})
    frames = [(feedwire.SCHEMA, batch.schema.serialize().to_pybytes(), 0)]
    for start in range(0, len(ids), per_frame):
        part = batch.slice(start, per_frame)
        frames.append((feedwire.ARROW, part.serialize().to_pybytes(), part.num_rows))
    return frames


def pickled_frames(ids, per_frame):
    import pickle

    return [
        (feedwire.PICKLED, pickle.dumps(ids[i : i + per_frame]), len(ids[i : i + per_frame]))
        for i in range(0, len(ids), per_frame)
    ]


class Driver:
    """The driver's side as the runner carries it out: JobState's replies to the nodes' Bounds."""

    def __init__(self, names):
        self.state = JobState(assign_roles(len(names), 0, "chief", False), Limits(), 0.0)
        self.bounds = {name: FeedBound() for name in names}
        self.lock = threading.Lock()
        self.reports = {name: [] for name in names}  # each node's feed_progress messages
        for name in names:
            self.state.apply(name, messages.NODE, messages.hello(messages.NODE, name, "h"), 0.0)

        # Replies go out from a thread of their own, as a node's control thread reads them:
        # updating a bound from the reporting thread (which holds its feed's report lock) would
        # take the other feed's report lock, and two feeds reporting at once would deadlock.
        self.outbox = queue.Queue()
        threading.Thread(target=self._deliver, daemon=True).start()

    def _deliver(self):
        while True:
            to, m = self.outbox.get()
            self.bounds[to].update(
                m["bound"],
                m["final"],
                m.get("ended", False),
                {k: m[k] for k in ("give", "take") if m.get(k)},
                m.get("others"),
            )  # as the node's runtime does

    def report(self, name):
        def apply(msg):
            with self.lock:
                if msg.get("type") == "feed_progress":
                    self.reports[name].append(msg)
                sends = self.state.apply(name, messages.NODE, msg, 1.0)
                for send in sends:
                    for to in send.to:
                        self.outbox.put((to, send.message))

        return apply


def run_lockstep(
    tmp_path, shares, epochs, make_frames, per_frame=10, batch=8, delays=None, **config
):
    """Feed each node its share (``delays``: seconds before each frame, per node), consume
    in lockstep; the ids each node took, per epoch."""
    names = [r.name for r in assign_roles(len(shares), 0, "chief", False)]
    driver = Driver(names)
    feeds = {}
    for i, (name, ids) in enumerate(zip(names, shares)):
        path = os.path.join(tmp_path, f"{name.replace(':', '')}.sock")
        serve_partition(path, make_frames(ids, per_frame), delays[i] if delays else 0.0)
        spool_dir = tmp_path / name.replace(":", "")
        spool_dir.mkdir()
        feeds[name] = DataFeed(
            path,
            train_mode=True,
            input_mapping=None,
            config=FeedConfig(
                num_epochs=epochs,
                equalize=True,
                exchange=True,
                read_ahead=2,
                feed_timeout=20,
                **config,
            ),
            spool_dir=str(spool_dir),
            report=driver.report(name),
            bound=driver.bounds[name],
            peer=(name, "127.0.0.1", SECRET),
        )
    step = threading.Barrier(len(names), timeout=30)
    out = {name: [[] for _ in range(epochs)] for name in names}
    errors = []

    def consume(name):
        feed = feeds[name]
        try:
            while not feed.should_stop():
                epoch = feed.epoch
                got = feed.next_batch(batch)
                ids = got["id"].tolist() if isinstance(got, dict) else list(got)
                out[name][epoch].extend(ids)
                step.wait()  # the all-reduce: nobody steps ahead
            feed.close()
        except BaseException as exc:
            errors.append((name, exc))
            step.abort()

    threads = [threading.Thread(target=consume, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a consumer hung"
    assert not errors, errors
    return out, feeds, driver


@pytest.mark.parametrize("epochs", [1, 3])
@pytest.mark.parametrize("make_frames", [arrow_frames, pickled_frames])
def test_the_surplus_moves_while_both_nodes_train_in_lockstep(tmp_path, epochs, make_frames):
    chief_ids, worker_ids = list(range(30)), list(range(1000, 1171))
    out, feeds, driver = run_lockstep(
        tmp_path, [chief_ids, worker_ids], epochs, make_frames, shuffle=epochs > 1
    )
    chief, worker = out["chief:0"], out["worker:0"]
    # the chief's own rows as they came, then the worker's last 70; the worker's first 100
    assert chief[0][:30] == chief_ids and sorted(chief[0][30:]) == list(range(1101, 1171))
    assert worker[0] == list(range(1000, 1100))
    for epoch in range(epochs):
        assert len(chief[epoch]) == len(worker[epoch]) == 100
        assert sorted(chief[epoch]) == sorted(chief[0])  # moved rows stay the chief's
        assert set(worker[epoch]) <= set(range(1000, 1101))  # one row a epoch held back
    assert driver.state.rows_moved == 70
    held = [feeds[n].rows_held_back for n in ("chief:0", "worker:0")]
    assert held == [0, epochs]


def test_three_nodes_one_giving_to_two(tmp_path):
    shares = [list(range(5)), list(range(100, 300)), list(range(1000, 1010))]
    out, feeds, driver = run_lockstep(tmp_path, shares, 2, arrow_frames, per_frame=7)
    # 215 rows: 71 each; worker:0 gives 66 to the chief and 61 to worker:1, holds back 2
    every = set()
    for name in out:
        assert [len(e) for e in out[name]] == [71, 71]
        every |= set(out[name][0])
    assert len(every) == 213 and every <= {i for s in shares for i in s}
    assert driver.state.rows_moved == 66 + 61
    assert [feeds[n].rows_held_back for n in ("chief:0", "worker:0", "worker:1")] == [0, 4, 0]


def test_equal_enough_shares_move_nothing_and_spool_nothing_for_one_epoch(tmp_path):
    out, feeds, driver = run_lockstep(
        tmp_path, [list(range(100)), list(range(100, 201))], 1, arrow_frames
    )
    assert [len(out[n][0]) for n in out] == [100, 100]
    assert driver.state.rows_moved == 0
    assert not os.path.exists(tmp_path / "chief0" / "epoch1.spool")


def test_the_exchange_turns_away_a_peer_without_the_job_secret(tmp_path):
    from sparktf.common.topology import split_address
    from sparktf.node.feed.exchange import Exchange

    ex = Exchange("chief:0", "127.0.0.1", SECRET, FeedBound(), timeout=5)
    try:
        sock = socket.create_connection(split_address(ex.address), timeout=5)
        with pytest.raises((protocol.AuthenticationError, ConnectionError, OSError)):
            protocol.client_handshake(sock, b"x" * 32, 5)
            feedwire.send_frame(sock, b"N", b"worker:0")
            feedwire.send_frame(sock, feedwire.PICKLED, b"junk")
            sock.recv(1)  # the exchange closes the connection
            raise ConnectionError("not turned away")
        sock.close()
        taken = ex.taken([["worker:0", 5]])
        ex.close()  # nothing came: a closed feed ends the wait with an error, not a hang
        with pytest.raises(FeedError, match="worker:0"):
            next(taken)
    finally:
        ex.close()


@pytest.mark.parametrize("make_frames", [arrow_frames, pickled_frames])
def test_an_empty_partition_gets_half_of_the_other(tmp_path, make_frames):
    out, feeds, driver = run_lockstep(tmp_path, [[], list(range(51))], 2, make_frames)
    assert [len(e) for e in out["chief:0"]] == [len(e) for e in out["worker:0"]] == [25, 25]
    assert sorted(out["chief:0"][0]) == list(range(26, 51))  # the worker's last 25
    assert out["worker:0"][0] == list(range(25))
    assert driver.state.rows_moved == 25


def test_a_node_ahead_of_the_bound_holds_its_progress_back_until_the_bound_reaches_it(tmp_path):
    """Each progress report costs the driver a round of bound messages to every node. While
    the bound is below what a node last reported, another node holds it back, and the node
    ahead need not say more until the bound reaches it (in lockstep, about every other frame of
    the slow node's); the slow node reports as its rows come. Every row still arrives, and nobody waits on a report held back: the worker's
    Spark side is slow (a frame every 10 ms), the chief's is not."""
    share = list(range(400))
    out, feeds, driver = run_lockstep(
        tmp_path, [share, [i + 1000 for i in share]], 1, pickled_frames, delays=[0.0, 0.01]
    )
    assert out["chief:0"][0] == share and out["worker:0"][0] == [i + 1000 for i in share]
    chief, worker = driver.reports["chief:0"], driver.reports["worker:0"]
    assert chief[-1]["ended"] and worker[-1]["ended"]
    # the chief is at most its read-ahead past the bound: it reports as the bound reaches
    # its last count, about every other frame of the worker's (0.5 of its reports; without
    # holding back, one a frame: as many). 0.75, not 0.6: on a loaded machine the worker's
    # frames bunch up and the ratio drifts (0.61 seen with two busy loops beside: issue 47 §6)
    assert len(chief) <= 0.75 * len(worker), (len(chief), len(worker))


def test_a_node_goes_as_far_as_its_own_fresh_count_and_the_others_reported():
    """Before the bound is final, a node may hand out as many rows as it has now and every
    other node surely has (the fewest another node reported): not only the driver's bound,
    which waits for the node's own report to come back. Never past the others, never lower
    than before, and exactly the final length once that is known."""
    bound, own = FeedBound(), [0]
    bound.follow(lambda: own[0], lambda: None)
    bound.update(0, False, others=40)
    assert bound.limit() == 0  # nothing of its own yet
    own[0] = 25
    assert bound.limit() == 25 and bound.allows(20, 10) == 5
    own[0] = 90
    assert bound.limit() == 40  # not past what another node surely has
    bound.update(30, False, others=35)  # a report overtaken by a newer one lowers nothing
    assert bound.limit() == 40
    bound.update(60, True)  # final: the epoch's exact length
    assert bound.limit() == 60

    waiting, own2 = FeedBound(), [0]
    waiting.follow(lambda: own2[0], lambda: None)
    waiting.update(0, False, others=100)
    consumer = threading.Thread(target=waiting.wait_beyond, args=(0, 10))
    consumer.start()
    own2[0] = 10
    waiting.poke()  # the node's own rows arrived: the consumer goes on at once
    consumer.join(5)
    assert not consumer.is_alive()


def test_rows_move_between_nodes_whose_sockets_are_numbered_above_1024(tmp_path, many_descriptors):
    """A TensorFlow process may hold over 1024 descriptors: the exchange's listener still
    accepts the rows a peer gives (select() would fail on it, and the taker wait in vain)."""
    out, feeds, driver = run_lockstep(tmp_path, [[], list(range(51))], 1, pickled_frames)
    assert [len(e) for e in out["chief:0"]] == [len(e) for e in out["worker:0"]] == [25]
    assert driver.state.rows_moved == 25


def _dealt_ids(sizes, trainers):
    """Ids 0.. in input partitions of ``sizes``, dealt out as the driver's shuffle does."""
    from sparktf.driver.partition import deal_slot

    shares, next_id = [[] for _ in range(trainers)], 0
    for index, size in enumerate(sizes):
        for position in range(size):
            shares[deal_slot(index, position, trainers)].append(next_id)
            next_id += 1
    return shares, next_id


@pytest.mark.parametrize(
    "sizes,trainers,epochs,shuffle",
    [
        ((333, 334, 333), 2, 1, False),  # the DataFrame: 501 and 499 rows
        ((333, 334, 333), 2, 3, True),  # ... over 3 shuffled epochs
        ((0, 5, 0, 95), 2, 2, False),  # empty and skewed partitions
        ((1, 1, 1, 1, 1), 3, 2, True),
        ((40, 0, 3, 0, 1, 17), 3, 3, False),
        ((0, 0, 9), 2, 2, True),
        ((7,), 2, 1, False),
    ],
)
def test_dealt_out_shares_hold_back_only_the_remainder_in_every_epoch(
    tmp_path, sizes, trainers, epochs, shuffle
):
    """The nodes' own feeds, epoch after epoch (replayed from the spool, shuffled or not),
    deliver every row but ``total % trainers``, each to one node once, equal counts."""
    shares, total = _dealt_ids(sizes, trainers)
    out, feeds, driver = run_lockstep(
        tmp_path, shares, epochs, arrow_frames, per_frame=7, batch=5, shuffle=shuffle
    )
    for epoch in range(epochs):
        per_node = [out[name][epoch] for name in out]
        delivered = [i for ids in per_node for i in ids]
        assert len(delivered) == len(set(delivered)) and set(delivered) <= set(range(total))
        assert [len(ids) for ids in per_node] == [total // trainers] * trainers
    held = sum(feed.rows_held_back for feed in feeds.values())
    assert held == epochs * (total % trainers)
