"""Reserve a TCP port for a TensorFlow server with no window for another process to take it.

The mechanism (Linux; tested in ``tests/spark/test_ports.py``): the barrier task binds a socket to
``0.0.0.0:0`` with ``SO_REUSEADDR`` and never calls ``listen()``; it publishes that port and
keeps the socket open until the node ends. While that placeholder exists:

* any ``bind()`` to the port without ``SO_REUSEADDR`` fails with ``EADDRINUSE``, IPv4 and IPv6;
* the kernel never hands the port out for ``bind(0)`` or for an outgoing connection's
  ephemeral port (a bound port is skipped by both allocators);
* TensorFlow's gRPC server, which binds with ``SO_REUSEADDR`` and then listens, *can* bind it,
  because a non-listening ``SO_REUSEADDR`` socket does not conflict with another one.

So the port is never free between publication and TensorFlow's bind: "bind, close, publish"
leaves exactly that gap. What remains is a process that binds this very port number with
``SO_REUSEADDR`` on purpose, between publication and TensorFlow's ``listen()``; ports are
drawn from the kernel's ephemeral range, which servers do not hard-code.

Firewalled clusters: with ``spark.sparktf.portRange=LO-HI`` every port sparktf opens (the
driver's control server, the TF servers' reservations, the row exchange's listener,
TensorBoard) is taken from that range instead (:class:`PortRange`). A port of the range is
claimed by binding an abstract Unix socket named after it (``\\0sparktf-port-<port>``), held by
the process that holds the port, as long as the port: two reservations never share a port (two
non-listening ``SO_REUSEADDR`` sockets could), and a listener never takes a port a reservation
holds for a TF server. A claim is no file: it lives in the host's network namespace (as the
port does), is shared by every user's jobs there, cannot be pre-created or redirected by a
symlink, and the kernel frees it when its process dies. A port some other program holds fails
the bind and is skipped; a range with no port left raises
:class:`~sparktf.errors.PortRangeError`, naming the setting.
"""

from __future__ import annotations

import errno
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass

from sparktf.errors import ConfigError, PortRangeError

#: The Spark conf key of the port range (named in every error about it).
SETTING = "spark.sparktf.portRange"


@dataclass(frozen=True)
class PortRange:
    """The ports ``low`` to ``high`` (both included) that sparktf may open."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        """``"40000-40100"`` as a range; a ConfigError (a ValueError) saying what is wrong
        otherwise (its message completes "spark.sparktf.portRange must ...")."""
        parts = str(text).strip().split("-")
        try:
            low, high = (int(p.strip()) for p in parts)
        except ValueError:
            raise ConfigError("be two port numbers as LOW-HIGH (e.g. 40000-40100)") from None
        if not 1 <= low <= high <= 65535:
            raise ConfigError("be ports 1 to 65535 as LOW-HIGH with LOW <= HIGH (e.g. 40000-40100)")
        return cls(low, high)

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"

    def __len__(self) -> int:
        return self.high - self.low + 1

    def candidates(self) -> list[int]:
        """Every port of the range, starting at a random one (jobs starting at once on one
        host do not all try the same port first)."""
        ports = list(range(self.low, self.high + 1))
        start = random.randrange(len(ports))
        return ports[start:] + ports[:start]


#: A claim on a port of the range: the abstract Unix socket bound to its name (None: no range).
Claim = socket.socket | None


def claim_name(port: int) -> str:
    """The abstract Unix socket name of ``port``'s claim (the leading NUL makes it abstract)."""
    return f"\0sparktf-port-{port}"


def _claim(port: int) -> socket.socket | None:
    """This process's claim on ``port``, or None if another sparktf socket in this network
    namespace (any user's) holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # never listens: a name only
    try:
        sock.bind(claim_name(port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        raise
    return sock


def _unclaim(claim: Claim) -> None:
    if claim is not None:
        claim.close()  # (the name goes with the last descriptor of the socket)


def exhausted(ports: PortRange, what: str) -> PortRangeError:
    return PortRangeError(
        f"no free port for {what} in {SETTING}={ports} on {socket.gethostname()}: all "
        f"{len(ports)} are taken (by this job's other nodes and servers, other sparktf jobs, "
        f"or other programs). Widen {SETTING}, or run fewer nodes on this host at once"
    )


def bind_in_range(
    sock_factory: Callable[[], socket.socket],
    host: str,
    ports: PortRange,
    what: str,
    listen: int | None,
) -> tuple[socket.socket, Claim]:
    """A socket from ``sock_factory()`` bound to ``host`` on a free port of ``ports`` (and
    listening with backlog ``listen``, unless None), and the claim on its port (closed with
    :func:`release`). Raises :class:`PortRangeError` when none is free."""
    for port in ports.candidates():
        claim = _claim(port)
        if claim is None:
            continue
        sock = sock_factory()
        try:
            sock.bind((host, port))
            if listen is not None:
                sock.listen(listen)
        except OSError as exc:
            sock.close()
            _unclaim(claim)
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                continue
            raise
        except BaseException:
            sock.close()
            _unclaim(claim)
            raise
        return sock, claim
    raise exhausted(ports, what)


def listening_socket(
    host: str, ports: PortRange | None, what: str, backlog: int
) -> tuple[socket.socket, Claim]:
    """A listening TCP socket on ``host``: on a port the kernel picks, or on one of ``ports``
    (then with its claim, to :func:`release` with the socket)."""
    family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
    if ports is None:
        return socket.create_server((host, 0), family=family, backlog=backlog), None

    def make() -> socket.socket:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as create_server does
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        return sock

    return bind_in_range(make, host, ports, what, backlog)


def release(claim: Claim) -> None:
    """Give up the claim on a port of the range (after its socket is closed)."""
    _unclaim(claim)


class PortReservation:
    """A placeholder socket holding a port; use as a context manager or call ``release()``."""

    def __init__(
        self, host: str = "0.0.0.0", ports: PortRange | None = None, what: str = "a TF server"
    ) -> None:
        self._claim: Claim = None

        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            return sock

        if ports is None:
            self._sock = make()
            try:
                self._sock.bind((host, 0))
            except BaseException:
                self._sock.close()
                raise
        else:
            self._sock, self._claim = bind_in_range(make, host, ports, what, None)
        self.port: int = self._sock.getsockname()[1]

    def release(self) -> None:
        self._sock.close()
        _unclaim(self._claim)
        self._claim = None

    def __enter__(self) -> PortReservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
