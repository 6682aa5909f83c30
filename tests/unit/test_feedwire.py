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
