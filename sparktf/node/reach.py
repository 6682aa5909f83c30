"""Node side: can this node reach every other node's TensorFlow port?

TensorFlow's own connections to a peer that a firewall silently drops retry for many minutes
(gRPC's backoff; a collective's or a session's wait), so a job on a firewalled cluster would
hang instead of failing. When its process starts, before ``main_fn``, each node tries a TCP
connection to every peer's address from TF_CONFIG (not beside ``main_fn``: TensorFlow's
blocking calls, such as MultiWorkerMirroredStrategy's start, hold the GIL while they wait for
peers, and a thread beside them never runs again). An answer of any
kind (accepted, or refused: the port is reserved but TensorFlow not listening yet) means the
host and port are reachable, and that peer is not tried again. Only silence (every try timing
out, or the host reported unreachable) for ``UNREACHABLE_AFTER`` seconds fails the node with
an :class:`~sparktf.errors.UnreachableError` naming the peer and ``spark.sparktf.portRange``.
A peer that refuses for ever (main_fn starts no TF server) is fine: nothing is asked of it.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable

from sparktf.common import topology
from sparktf.errors import UnreachableError

#: Seconds of silence from a peer's port before the node fails (a SYN is answered by the
#: peer's kernel however loaded its host is: silence means dropped packets).
UNREACHABLE_AFTER = 30.0
#: Seconds one connection attempt waits for an answer.
TRY_TIMEOUT = 5.0
#: connect() errors that say nothing answers from there (silence, or an ICMP "unreachable").
SILENT = frozenset(
    {errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.EACCES}
)


def peers(cluster_spec: dict, me: str) -> dict[str, str]:
    """Every other node's TF address in ``cluster_spec``, by node name (``job:index``)."""
    found = {}
    for job, addresses in cluster_spec.items():
        for index, address in enumerate(addresses):
            name = f"{job}:{index}"
            if name != me:
                found[name] = address
    return found


def answers(address: str, timeout: float) -> bool:
    """Whether ``address`` (host:port) answers a TCP connection within ``timeout``: accepted
    or refused both count; a timeout or an unreachable host does not."""
    host, port = topology.split_address(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except ConnectionRefusedError:
        return True  # the host answered: the port is reserved, TF not listening yet
    except TimeoutError:
        return False
    except OSError as exc:
        return exc.errno not in SILENT


def unreachable(
    targets: dict[str, str],
    bound: float = UNREACHABLE_AFTER,
    try_timeout: float = TRY_TIMEOUT,
    stop: threading.Event | None = None,
    answer: Callable[[str, float], bool] = answers,
) -> dict[str, str]:
    """The peers of ``targets`` that stayed silent for ``bound`` seconds (empty when every
    one answered, or ``stop`` was set)."""
    left = dict(targets)
    deadline = time.monotonic() + bound
    while left and not (stop is not None and stop.is_set()):
        for name, address in list(left.items()):
            if answer(address, max(0.1, min(try_timeout, deadline - time.monotonic()))):
                del left[name]
        if not left or time.monotonic() >= deadline:
            break
        if stop is not None:
            stop.wait(0.5)
        else:
            time.sleep(0.5)
    return left if time.monotonic() >= deadline else {}


def describe(me: str, silent: dict[str, str], bound: float, port_range: object) -> str:
    """The message of the :class:`UnreachableError` for ``silent`` peers of node ``me``."""
    where = ", ".join(f"{name} at {address}" for name, address in sorted(silent.items()))
    advice = (
        f"the nodes' ports are in spark.sparktf.portRange={port_range}: open that range "
        "between the executors' hosts"
        if port_range
        else "TensorFlow's ports are picked at random: set spark.sparktf.portRange=LO-HI to a "
        "range the firewall opens between the executors' hosts"
    )
    return (
        f"sparktf node {me} cannot reach {where}: no answer in {bound:g}s (its packets are "
        f"dropped: a firewall between the executors' hosts, or a network partition); {advice}"
    )


def check(
    me: str,
    cluster_spec: dict,
    port_range: object,
    stop: threading.Event | None = None,
    bound: float = UNREACHABLE_AFTER,
) -> UnreachableError | None:
    """The error for this node if a peer stays silent for ``bound`` seconds, else None (at
    once where every peer answers: a refused connection is an answer)."""
    silent = unreachable(peers(cluster_spec, me), bound, stop=stop)
    return UnreachableError(describe(me, silent, bound, port_range)) if silent else None
