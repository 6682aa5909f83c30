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
"""

from __future__ import annotations

import socket


class PortReservation:
    """A placeholder socket holding a port; use as a context manager or call ``release()``."""

    def __init__(self, host: str = "0.0.0.0") -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._sock.bind((host, 0))
        except BaseException:
            self._sock.close()
            raise
        self.port: int = self._sock.getsockname()[1]

    def release(self) -> None:
        self._sock.close()

    def __enter__(self) -> PortReservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
