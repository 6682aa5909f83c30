"""The local data channel between a node's barrier task and its TF process (InputMode.SPARK).

A Unix socket in a private (0700) directory that only the barrier task and its descendants know;
frames are ``kind(1) | length(8) | payload``. The same frames carry rows between nodes over TCP
(:mod:`sparktf.node.feed.exchange`), each followed there by its MAC (see
:mod:`sparktf.common.protocol`):

=======  ======================  ===========================================================
kind     direction               payload
=======  ======================  ===========================================================
``S``    task -> TF              Arrow schema (IPC message) of the DataFrame's batches
``A``    task -> TF              one Arrow record batch (IPC message, no schema)
``P``    task -> TF              a pickled list of RDD elements
``M``    task -> TF              several pickled lists, each ``length(4) | pickle``
``E``    task -> TF              end of the partition: JSON ``{"rows": n}``
``E``    TF -> task              (reading Spark's socket itself) read to the data's end
``D``    task -> TF              the rest of the partition is Spark's own data section on the
                                 socket passed with this frame (SCM_RIGHTS), after these
                                 bytes; only as the first frame (see ``node.feed.sparkstream``)
``R``    TF -> task              pickled inference results for the rows of one batch
``F``    TF -> task              end of results
``T``    TF -> task              terminate: stop reading the partition
``I``    TF -> task              (reading Spark's socket itself) the consumer took nothing for
                                 ``feed_timeout``: JSON ``{"seconds": t}``
=======  ======================  ===========================================================

Imports neither pyspark nor tensorflow.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any

from sparktf.common.protocol import TAG_LEN, ChannelClosed, recv_exact_into

HEADER = struct.Struct("!cQ")
PART = struct.Struct("!I")
SCHEMA, ARROW, PICKLED, MULTI, END, RESULT, RESULTS_END, TERMINATE = (
    b"S",
    b"A",
    b"P",
    b"M",
    b"E",
    b"R",
    b"F",
    b"T",
)
SPARK_SOCKET, IDLE = b"D", b"I"
#: Spark's own pickled batches are ~64 KB; the task packs them into frames of about this size.
MULTI_BYTES = 1 << 20


def frame(kind: bytes, payload: Any) -> list:
    """One frame as a list of buffers (an Arrow buffer is not copied)."""
    return parts_frame(kind, [payload])


def parts_frame(kind: bytes, parts: list) -> list:
    """One frame whose payload is ``parts`` one after the other (buffers; none is copied)."""
    views = [memoryview(p).cast("B") for p in parts]
    return [HEADER.pack(kind, sum(v.nbytes for v in views)), *views]


def multi_frame(parts: list) -> list:
    """Several byte strings as one ``M`` frame's buffers (no copy to join them)."""
    buffers = []
    for part in parts:
        buffers += [PART.pack(len(part)), part]
    buffers.insert(0, HEADER.pack(MULTI, sum(len(b) for b in buffers)))
    return buffers


def _advance(buffers: list, sent: int) -> list:
    buffers = list(buffers)
    while buffers and sent >= len(buffers[0]):
        sent -= len(buffers[0])
        buffers.pop(0)
    if buffers and sent:
        buffers[0] = memoryview(buffers[0])[sent:]
    return buffers


def send_buffers(sock: socket.socket, buffers: list) -> None:
    """Send every buffer, scatter-gather, blocking (the socket's timeout applies)."""
    while buffers:
        buffers = _advance(buffers, sock.sendmsg(buffers[:_IOV_MAX]))


def send_some(sock: socket.socket, buffers: list) -> list:
    """Send what fits now without blocking; returns what is left (``buffers`` itself, the same
    object, when nothing could be sent)."""
    try:
        sent = sock.sendmsg(buffers[:_IOV_MAX], [], socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return buffers
    return _advance(buffers, sent) if sent else buffers


def send_frame(sock: socket.socket, kind: bytes, payload: Any, mac: Any = None) -> None:
    """Send one frame; ``payload`` is bytes or any buffer (an Arrow buffer is not copied).
    With ``mac`` (a :class:`~sparktf.common.protocol.FrameMac`, over TCP between nodes), the
    frame's MAC follows it."""
    buffers = frame(kind, payload)
    if mac is not None:
        buffers.append(mac.seal(*buffers))
    send_buffers(sock, buffers)


_IOV_MAX = 512  # buffers per sendmsg call (Linux allows 1024)


#: Socket buffers for the feed connection: a frame crosses in few context switches.
SOCKET_BUFFER = 4 << 20


def tune(sock: socket.socket) -> None:
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        except OSError:
            pass


def unpack_parts(payload: Any) -> list:
    view, out, pos = memoryview(payload), [], 0
    while pos < len(view):
        (size,) = PART.unpack_from(view, pos)
        out.append(view[pos + PART.size : pos + PART.size + size])
        pos += PART.size + size
    return out


def send_frame_with_fd(sock: socket.socket, kind: bytes, payload: Any, fd: int) -> None:
    """One frame, with a copy of the descriptor ``fd`` passed along with its header."""
    view = memoryview(payload).cast("B")
    socket.send_fds(sock, [HEADER.pack(kind, view.nbytes)], [fd])
    send_buffers(sock, [view])


def recv_first_frame(sock: socket.socket, buffer_for: Any = None) -> tuple[bytes, Any, int | None]:
    """The connection's first frame (see :func:`recv_frame`) and the descriptor passed with it,
    if one was (the caller owns it; it is not inherited by child processes)."""
    head, fds, _, _ = socket.recv_fds(sock, HEADER.size, 1)
    fd = fds[0] if fds else None
    for extra in fds[1:]:
        os.close(extra)
    if fd is not None:
        os.set_inheritable(fd, False)
    try:
        if not head:
            raise ChannelClosed("connection closed before its first frame")
        if len(head) < HEADER.size:
            head += recv_exact_into(sock, HEADER.size - len(head))
        return *_payload(sock, head, buffer_for), fd
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise


def recv_frame(
    sock: socket.socket, buffer_for: Any = None, mac: Any = None, max_size: int | None = None
) -> tuple[bytes, Any]:
    """One frame: its kind and its payload, received into ``buffer_for(kind, size)`` (by
    default a new ``bytearray``). With ``mac``, the frame's MAC is read after it and checked
    (:class:`~sparktf.common.protocol.FrameRejected` if it fails) before the frame is returned;
    with ``max_size``, a larger frame is refused before anything is allocated for it."""
    header = recv_exact_into(sock, HEADER.size)
    kind, payload = _payload(sock, header, buffer_for, max_size)
    if mac is not None:
        mac.verify(recv_exact_into(sock, TAG_LEN), header, payload)
    return kind, payload


def _payload(sock: socket.socket, header, buffer_for, max_size=None) -> tuple[bytes, Any]:
    """The frame of ``header``: its kind and its payload, received as :func:`recv_frame` says."""
    kind, size = HEADER.unpack(header)
    if max_size is not None and size > max_size:
        raise ConnectionError(f"a frame of {size} bytes is over the {max_size} limit")
    return kind, recv_exact_into(sock, size, buffer_for(kind, size) if buffer_for else None)
