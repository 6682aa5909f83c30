"""How a node and its supervisor notice that their driver is gone without a word: its host
crashed, or the network between them split, so no FIN or RST ever comes.

Their control connection then watches the driver at the TCP level (the driver itself needs
do nothing): keepalive probes on an idle connection, and a user timeout on data that stays
unacknowledged (a node sends a heartbeat every second). Either closes the connection within
``DRIVER_SILENT_SECS``; the node's and the supervisor's readers see it end, and they stop
their processes, freeing GPUs and ports. A driver that is only paused (Ctrl-Z, a VM pause)
still has its kernel answer the probes, so its nodes wait for it.

Standard library only: used on the executors' side.
"""

from __future__ import annotations

import socket

#: The longest a node and its supervisor go on after their driver's host fell silent.
DRIVER_SILENT_SECS = 30
#: The longest the driver takes to see the connection of a node whose host fell silent (or
#: whose process exited during a network partition, its FIN lost) as closed.
NODE_SILENT_SECS = 30


def watch_peer(
    sock: socket.socket, seconds: int = DRIVER_SILENT_SECS, user_timeout: bool = True
) -> None:
    """Make ``sock`` (a TCP connection) fail within about ``seconds`` once its peer's host
    stops answering: keepalive probes after ``seconds / 3`` idle, and (``user_timeout``)
    ``TCP_USER_TIMEOUT`` for data unacknowledged that long. Other sockets are left alone;
    options a platform lacks are skipped.

    ``TCP_USER_TIMEOUT`` also ends a connection whose peer is alive but reads nothing (a
    paused driver) once its receive window has stayed shut that long: the driver's side
    (:mod:`sparktf.driver.control`) goes without it, and the nodes' pause limit is in
    docs/reliability.md."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle = max(1, seconds // 3)
    interval = max(1, seconds // 6)
    count = max(1, (seconds - idle) // interval)
    options = [("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", count)]
    if user_timeout:
        options.append(("TCP_USER_TIMEOUT", seconds * 1000))
    for name, value in options:
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
