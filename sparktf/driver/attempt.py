"""One attempt of a job: what one launch of the whole cluster owns (its control server and
secret, launch spec, stage, state, channels and Spark job thread), the messages it sends on
its channels, and the control server's handler that tags its events with its number."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sparktf.common import messages
from sparktf.common.spec import LaunchSpec
from sparktf.driver.control import ControlServer
from sparktf.driver.job.records import Send
from sparktf.driver.job.state import JobState
from sparktf.errors import SparkTFError

log = logging.getLogger(__name__)


@dataclass
class Attempt:
    """What one launch of the cluster owns besides its state."""

    number: int
    job_id: str
    server: ControlServer
    launch: LaunchSpec
    stage: Callable[[], Any]
    state: JobState
    channels: dict  # (node, peer) -> Channel
    thread: threading.Thread | None = None
    finalizer: Any = None
    #: When its Spark job's thread started (monotonic).
    started_at: float = 0.0
    #: What Spark's UI says of its job (:func:`~sparktf.driver.sparkjobs.describe`).
    description: str = ""
    #: Stage id -> whether it is a barrier stage, as Spark's status store showed it.
    barrier_stages: dict = dataclasses.field(default_factory=dict)

    def perform(self, actions: list[Send]) -> None:
        """Send each action's message to the nodes it names, on their open channels."""
        for action in actions:
            for node in action.to:
                chan = self.channels.get((node, action.channel))
                if chan is not None:
                    send_quietly(chan, action.message)

    def abort_supervisors(self) -> None:
        """Tell every supervisor to stop its process tree."""
        for (_, peer), chan in list(self.channels.items()):
            if peer == messages.SUPERVISOR:
                send_quietly(chan, messages.make("abort"))

    def wait_supervisors(self, cond: threading.Condition, timeout: float) -> None:
        """Wait until every supervisor has ended (its channel closed; ``cond``: the lock
        under which the channels change): a cancelled Spark job ends before its tasks have
        stopped their processes. Supervisors of nodes out of reach
        (:meth:`JobState.out_of_reach`) are not waited for: nothing can be heard from them."""
        deadline = time.monotonic() + timeout
        with cond:
            while any(
                peer == messages.SUPERVISOR
                and node not in self.state.out_of_reach(time.monotonic())
                for node, peer in self.channels
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning(
                        "sparktf: supervisors of %s still running after %.0fs: %s",
                        self.job_id,
                        timeout,
                        sorted(self.channels),
                    )
                    return
                cond.wait(min(0.1, remaining))

    def close(self) -> None:
        """Close its control server; the finalizer has nothing left to do."""
        self.server.close()
        self.finalizer.detach()


def send_quietly(chan: Any, message: dict) -> None:
    """Send ``message`` on ``chan``; a peer gone is not an error here."""
    try:
        chan.send(message)
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
        # The peer is gone. What it sent last (a node's error report) may still wait in
        # our receive buffer: its reader reads that, then the end, which tells the state.
        pass
    except OSError:
        chan.close()  # frozen with a full buffer (the send timed out): cut it off


class Events(Protocol):
    """What takes an attempt's events (the runner)."""

    def on_connect(self, number: int, node: str, peer: str, chan: Any, hello: dict) -> None: ...

    def on_message(self, number: int, node: str, peer: str, message: dict) -> None: ...

    def on_disconnect(self, number: int, node: str, peer: str, incarnation: int = 0) -> None: ...

    def abort(self, failure: SparkTFError) -> None: ...


class AttemptHandler:
    """The control server's handler for one attempt: events carry the attempt's number, and
    an exception in handling one (a bug) becomes the job's failure instead of a dropped
    connection."""

    def __init__(self, runner: Events, number: int) -> None:
        self._runner = runner
        self._number = number
        # Which TF process a connection's thread serves (its hello's incarnation), for the
        # connection's end: a worker restarted in place connects again under the same name.
        self._local = threading.local()

    def _guard(self, call: Callable[..., None], *args: Any) -> None:
        try:
            call(self._number, *args)
        except Exception as exc:
            log.exception("sparktf: handling a control message failed")
            self._runner.abort(
                SparkTFError(f"sparktf's control handler failed: {type(exc).__name__}: {exc}")
            )

    def on_connect(self, node: str, peer: str, chan: Any, hello: dict) -> None:
        self._local.incarnation = hello.get("incarnation", 0)
        self._guard(self._runner.on_connect, node, peer, chan, hello)

    def on_message(self, node: str, peer: str, message: dict) -> None:
        self._guard(self._runner.on_message, node, peer, message)

    def on_security_error(self, node: str, peer: str, exc: SparkTFError) -> None:
        """A frame from ``node`` failed its MAC: the job fails with that error, and no restart
        starts after it (a forger would only be given another secret to attack)."""
        self._runner.abort(exc)

    def on_disconnect(self, node: str, peer: str) -> None:
        incarnation = getattr(self._local, "incarnation", 0)
        self._guard(self._runner.on_disconnect, node, peer, incarnation)


def abort_quietly(sc: Any, job_id: str, server: ControlServer, exiting: threading.Event) -> None:
    """The finalizer of an attempt whose runner is collected, or whose interpreter exits,
    with its job running: cancel its Spark job and close its server."""
    exiting.set()
    try:
        sc.cancelJobsWithTag(job_id)
    except Exception:
        pass
    server.close()
