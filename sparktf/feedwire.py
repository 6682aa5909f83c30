"""The local data channel between a node's barrier task and its TF process (InputMode.SPARK).

A Unix socket in a private (0700) directory that only the barrier task and its descendants know;
frames are ``kind(1) | length(8) | payload``:

=======  ======================  ===========================================================
kind     direction               payload
=======  ======================  ===========================================================
``S``    task -> TF              Arrow schema (IPC message) of the DataFrame's batches
``A``    task -> TF              one Arrow record batch (IPC message, no schema)
``P``    task -> TF              a pickled list of RDD elements
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

HEADER = struct.Struct("!cQ")
SCHEMA, ARROW, PICKLED, END, RESULT, RESULTS_END, TERMINATE = (
    b"S", b"A", b"P", b"E", b"R", b"F", b"T")


def send_frame(sock: socket.socket, kind: bytes, payload) -> None:
    """Send one frame; ``payload`` is bytes or any buffer (an Arrow buffer is not copied)."""
    view = memoryview(payload).cast("B")
    sock.sendall(HEADER.pack(kind, view.nbytes))
    sock.sendall(view)


def recv_exact_into(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError(f"feed connection closed after {got} of {n} bytes")
        got += k
    return buf


def recv_frame(sock: socket.socket) -> tuple[bytes, bytearray]:
    kind, size = HEADER.unpack(recv_exact_into(sock, HEADER.size))
    return kind, recv_exact_into(sock, size)
