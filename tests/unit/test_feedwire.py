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
