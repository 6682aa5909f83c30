"""The driver's side of a control-channel test: a recorder of what the control server tells
its owner (connects, messages, disconnects), the hello a node sends first, and a raw connection to a control server that has read its
greeting (tests/conftest.py's ``server`` fixture starts one on loopback)."""

import socket
import threading


class Recorder:
    """What a ControlServer reports to its owner, in order; ``wait_for(n)`` waits for n events."""

    def __init__(self):
        self.events = []
        self.cond = threading.Condition()

    def _add(self, *event):
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def on_connect(self, node, role, chan, hello):
        self.chan = chan
        self._add("connect", node, role)

    def on_message(self, node, role, message):
        self._add("message", node, role, message)

    def on_disconnect(self, node, role):
        self._add("disconnect", node, role)

    def wait_for(self, n, timeout=10):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.events) >= n, timeout), self.events
            return list(self.events)


def hello(chan, node="worker:0"):
    chan.send({"type": "hello", "peer": "node", "node": node})


def raw_connection(srv):
    """A plain socket to ``srv`` that has read its greeting (and sent nothing)."""
    from sparktf.common import protocol

    s = socket.create_connection(srv.address, timeout=5)
    greeting = s.recv(len(protocol.MAGIC) + protocol.NONCE_LEN)
    assert greeting.startswith(protocol.MAGIC)
    return s
