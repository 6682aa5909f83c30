"""The local data channel between a node's barrier task and its TF process (InputMode.SPARK).

A Unix socket in a private (0700) directory that only the barrier task and its descendants know;
frames are ``kind(1) | length(8) | payload``:

=======  ======================  ===========================================================
kind     direction               payload
=======  ======================  ===========================================================
``S``    task -> TF              Arrow schema (IPC message) of the DataFrame's batches
``A``    task -> TF              one Arrow record batch (IPC message, no schema)
``P``    task -> TF              a pickled list of RDD elements
``M``    task -> TF              several pickled lists, each ``length(4) | pickle``
``E``    task -> TF              end of the partition: JSON ``{"rows": n}``
``R``    TF -> task              pickled inference results for the rows of one batch
``F``    TF -> task              end of results
``T``    TF -> task              terminate: stop reading the partition
=======  ======================  ===========================================================

Imports neither pyspark nor tensorflow.
"""

from __future__ import annotations

import socket
import struct

from sparktf.protocol import recv_exact_into

HEADER = struct.Struct("!cQ")
PART = struct.Struct("!I")
SCHEMA, ARROW, PICKLED, MULTI, END, RESULT, RESULTS_END, TERMINATE = (
    b"S", b"A", b"P", b"M", b"E", b"R", b"F", b"T")
#: Spark's own pickled batches are ~64 KB; the task packs them into frames of about this size.
MULTI_BYTES = 1 << 20


def send_frame(sock: socket.socket, kind: bytes, payload) -> None:
    """Send one frame; ``payload`` is bytes or any buffer (an Arrow buffer is not copied)."""
    view = memoryview(payload).cast("B")
    sock.sendall(HEADER.pack(kind, view.nbytes))
    sock.sendall(view)


#: Socket buffers for the feed connection: a frame crosses in few context switches.
SOCKET_BUFFER = 4 << 20


def tune(sock: socket.socket) -> None:
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        except OSError:
            pass


def send_parts(sock: socket.socket, parts: list) -> None:
    """Several byte strings as one ``M`` frame, sent scatter-gather (no copy to join them)."""
    buffers = []
    for part in parts:
        buffers += [PART.pack(len(part)), part]
    total = sum(len(b) for b in buffers)
    buffers.insert(0, HEADER.pack(MULTI, total))
    while buffers:
        sent = sock.sendmsg(buffers)
        while buffers and sent >= len(buffers[0]):
            sent -= len(buffers[0])
            buffers.pop(0)
        if buffers and sent:
            buffers[0] = memoryview(buffers[0])[sent:]


def unpack_parts(payload) -> list:
    view, out, pos = memoryview(payload), [], 0
    while pos < len(view):
        (size,) = PART.unpack_from(view, pos)
        out.append(view[pos + PART.size:pos + PART.size + size])
        pos += PART.size + size
    return out


def recv_frame(sock: socket.socket) -> tuple[bytes, bytearray]:
    kind, size = HEADER.unpack(recv_exact_into(sock, HEADER.size))
    return kind, recv_exact_into(sock, size)
