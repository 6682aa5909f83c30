"""The local feed framing over a real socket pair (no Spark)."""

import json
import pickle
import socket
import threading

from sparktf.common import feedwire


def test_frames_round_trip():
    a, b = socket.socketpair()
    feedwire.send_frame(a, feedwire.PICKLED, pickle.dumps([1, 2, 3]))
    feedwire.send_frame(a, feedwire.END, json.dumps({"rows": 3}).encode())
    assert feedwire.recv_frame(b) == (feedwire.PICKLED, bytearray(pickle.dumps([1, 2, 3])))
    kind, payload = feedwire.recv_frame(b)
    assert kind == feedwire.END and json.loads(payload) == {"rows": 3}


def test_scatter_gather_parts_survive_partial_sends():
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # force many partial sendmsg calls
    parts = [bytes([i]) * (1000 + 7777 * i) for i in range(40)]
    sender = threading.Thread(target=feedwire.send_buffers, args=(a, feedwire.multi_frame(parts)))
    sender.start()
    kind, payload = feedwire.recv_frame(b)
    sender.join()
    assert kind == feedwire.MULTI
    assert [bytes(p) for p in feedwire.unpack_parts(payload)] == parts


def test_an_arrow_frame_is_received_and_replayed_into_arrow_memory_unchanged(tmp_path):
    """Arrow batches (tens of MB each) land in Arrow's memory pool, whose pages are reused,
    not in a new zero-filled bytearray each; the bytes and the batch are the same."""
    import socket

    import pyarrow as pa

    from sparktf.node.feed import batches
    from sparktf.node.feed.spool import Spool

    batch = pa.RecordBatch.from_pydict({"x": list(range(1000)), "y": [1.5] * 1000})
    payload = batch.serialize()
    ours, theirs = socket.socketpair()
    try:
        before = pa.total_allocated_bytes()
        feedwire.send_frame(theirs, feedwire.ARROW, payload)
        kind, got = feedwire.recv_frame(ours, batches.buffer_for)
        assert kind == feedwire.ARROW and isinstance(got, pa.Buffer)
        assert pa.total_allocated_bytes() - before >= payload.size
        assert got.equals(payload)
        assert batches.decode(kind, got, batch.schema).equals(batch)
        feedwire.send_frame(theirs, feedwire.END, b'{"rows": 1000}')
        kind, end = feedwire.recv_frame(ours, batches.buffer_for)
        assert kind == feedwire.END and isinstance(end, bytearray)  # json reads it
    finally:
        ours.close()
        theirs.close()
    spool = Spool(str(tmp_path / "s"), None, 2)
    spool.append(feedwire.ARROW, got, 1000)
    spool.flush()
    kind, again, rows = spool.read(0)
    assert isinstance(again, pa.Buffer) and again.equals(payload) and rows == 1000
    spool.close()


def test_a_partitions_arrow_batches_go_out_as_their_own_buffers_and_arrive_as_serialized():
    """The barrier task sends each record batch as its IPC message gathered from the batch's
    own buffers (no copy into one buffer first): the TF process gets the bytes
    ``batch.serialize()`` gives, for batches sliced, empty, of strings, or dictionary-encoded
    (serialized the old way where a stream would need a dictionary message first)."""
    import numpy as np
    import pyarrow as pa

    from sparktf.node.feed import batches
    from sparktf.task.frames import partition_frames

    n = 3000
    features = pa.FixedSizeListArray.from_arrays(
        pa.array(np.arange(n * 8, dtype="float32")), 8
    ).cast(pa.list_(pa.float32()))
    batch = pa.RecordBatch.from_arrays(
        [features, pa.array(np.arange(n)), pa.array([str(i) for i in range(n)])],
        ["features", "label", "name"],
    )
    sent = [batch, batch.slice(100, 1000), batch.slice(0, 0), batch]
    schema = batch.schema.serialize().to_pybytes()
    counted = [0]
    frames = list(partition_frames(iter(sent), "arrow", schema, 256, counted))
    assert counted == [sum(b.num_rows for b in sent)]
    assert len(frames[1]) > 3  # header + the batch's buffers, gathered
    big = max(frames[1][1:], key=lambda v: v.nbytes)
    assert big.nbytes >= n * 8 * 4  # the features' values, not a copy joined with the rest
    ours, theirs = socket.socketpair()
    try:
        got = []
        reader = threading.Thread(
            target=lambda: got.extend(feedwire.recv_frame(ours, batches.buffer_for) for _ in frames)
        )
        reader.start()
        for buffers in frames:
            feedwire.send_buffers(theirs, buffers)
        reader.join(10)
    finally:
        ours.close()
        theirs.close()
    assert got[0] == (feedwire.SCHEMA, bytearray(schema))
    for (kind, payload), b in zip(got[1:], sent):
        assert kind == feedwire.ARROW and payload.equals(b.serialize())
        assert batches.decode(kind, payload, batch.schema).equals(b)

    coded = pa.RecordBatch.from_arrays([pa.array(["a", "b", "a"]).dictionary_encode()], ["d"])
    other = pa.RecordBatch.from_arrays([pa.array(["c", "a"]).dictionary_encode()], ["d"])
    for b, (_header, *buffers) in zip(
        [coded, other], list(partition_frames(iter([coded, other]), "arrow", b"", 256, [0]))[1:]
    ):
        assert b"".join(bytes(v) for v in buffers) == b.serialize().to_pybytes()
