"""What a node's process owns besides ``main_fn``: its channel to the driver, the events the
driver's messages set, the feed bound, the heartbeat and listener threads, the data feed and
the TF server. ``ctx`` (:mod:`sparktf.node.context`) is the small public facade over it.

Runs in the TF process; never imports pyspark.
"""

from __future__ import annotations

import collections
import os
import pickle
import sys
import threading
import time
from typing import Any

from sparktf.common import messages, protocol
from sparktf.common.spec import NodeSpec
from sparktf.node import synchronous
from sparktf.node.feed.equalize import FeedBound

#: The TF process's exit code when it loses the driver.
EXIT_DRIVER_LOST = 75


#: ctx.report calls a heartbeat carries at most (the oldest go first when a node reports
#: faster than this per heartbeat_interval).
MAX_PENDING_REPORTS = 10_000


class NodeRuntime:
    """One node process's connection to the job, and the threads that keep it."""

    def __init__(self, spec: NodeSpec, chan: protocol.Channel) -> None:
        self.spec = spec
        self.chan = chan
        self.stop = threading.Event()  # the job is over: serve() returns, the process exits
        self.training_done = threading.Event()  # every chief/worker main_fn has returned
        self.bound = FeedBound()  # the driver's word on the rows every trainer may hand out
        self.feed: Any = None  # the DataFeed, once main_fn asked for it
        self.server: Any = None  # the TF server, once started
        self.step: int | None = None  # ctx.report / ctx.report_progress
        self.metrics: dict[str, float] = {}  # ctx.report
        #: Every ctx.report with metrics since the last heartbeat: (step, time, metrics); the
        #: driver keeps them as a series (cluster.metrics(), TensorBoard scalars).
        self.reports: collections.deque = collections.deque(maxlen=MAX_PENDING_REPORTS)
        # 'stop' ends the process from the control thread, whatever the main thread does: a
        # parameter server run by sparktf, which has nothing to finish (not even its start).
        self._exit_on_stop = False
        self._stop_lock = threading.Lock()  # 'stop' and leave_on_stop(), whichever comes first

    def start(self) -> None:
        """Listen to the driver and send heartbeats, on threads of their own."""
        threading.Thread(target=self._listen, name="sparktf-control", daemon=True).start()
        threading.Thread(target=self._heartbeats, name="sparktf-heartbeat", daemon=True).start()

    def send(self, message: dict) -> None:
        self.chan.send(message)

    def report_state(self, state: str) -> None:
        self.chan.send(messages.make("state", state=state))

    def _listen(self) -> None:
        """Apply the driver's messages; exit the process if the driver goes away."""
        try:
            while True:
                msg = self.chan.recv()
                kind = msg.get("type")
                if kind == "training_done":
                    self.training_done.set()
                elif kind == "stop":
                    self.training_done.set()
                    with self._stop_lock:
                        self.stop.set()
                        leave = self._exit_on_stop
                    if leave:
                        self._leave()
                elif kind == "tokens":
                    self._take_tokens(msg["data"])
                elif kind == "feed_bound":
                    plan = {k: msg[k] for k in ("give", "take") if msg.get(k)}
                    self.bound.update(
                        msg["bound"], msg["final"], msg.get("ended", False), plan, msg.get("others")
                    )
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        if not self.stop.is_set():
            print(
                f"sparktf: {self.spec.name} lost its connection to the driver; exiting",
                file=sys.stderr,
                flush=True,
            )
            os._exit(EXIT_DRIVER_LOST)

    def _take_tokens(self, data: bytes) -> None:
        """The delegation tokens the driver holds now (Spark renewed them): this process's
        from now on (:func:`sparktf.fs.tokens.install`, in the node's private directory)."""
        from sparktf.fs import tokens  # (only on a secure cluster: sparktf.fs is not light)

        work_dir = self.spec.work_dir
        if not work_dir:
            return
        try:
            opened = protocol.open_payload(self.spec.launch.secret, messages.TOKENS_PURPOSE, data)
            tokens.install(opened, work_dir)
        except (OSError, protocol.SecurityError) as exc:  # (HadoopFSError too) it keeps its own
            print(
                f"sparktf: {self.spec.name} could not keep the delegation tokens the driver "
                f"sent: {exc}",
                file=sys.stderr,
                flush=True,
            )

    def leave_on_stop(self) -> None:
        """From now on, the driver's 'stop' ends this process at once, from the control thread,
        whatever the main thread is doing; and if 'stop' came already, end it now. For a node
        with nothing to finish: a parameter server of sparktf's own, still starting."""
        with self._stop_lock:
            self._exit_on_stop = True
            stopped = self.stop.is_set()
        if stopped:
            self._leave()

    def _leave(self) -> None:
        """Exit now, with this node's (empty) result: the main thread may be in the middle of
        ``import tensorflow``, seconds that shutdown() would otherwise wait for."""
        try:
            self.chan.send(messages.done(None))
        except OSError:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(0)

    def _heartbeats(self) -> None:
        """Every heartbeat interval until the process exits, whatever the node is doing
        (running, serving, finished and waiting, evaluating after training ended): alive, and
        how far (``ctx.report_progress``, rows fed)."""
        while True:
            time.sleep(self.spec.launch.heartbeat_interval)
            try:
                self.beat()
            except OSError:
                return

    def beat(self) -> None:
        """One heartbeat now (also sent last thing before ``done``: the final progress)."""
        feed = self.feed
        extra: dict[str, Any] = {"metrics": dict(self.metrics)} if self.metrics else {}
        reports = []
        while self.reports:
            reports.append(self.reports.popleft())
        if reports:
            extra["reports"] = reports
        if feed is not None:  # after the last epoch the feed's counter is one past it
            last = feed.first_epoch + max(0, feed.config.num_epochs - 1)
            extra["epoch"] = min(feed.epoch, last)
            extra["epoch_rows"] = feed.epoch_rows
            extra["feed_secs"] = feed.feeding_secs
        if synchronous.kind:
            extra["collective"] = synchronous.kind
        self.chan.send(
            messages.make(
                "heartbeat",
                step=self.step,
                rows=feed.rows_fed if feed is not None else None,
                cpu=time.process_time(),
                **extra,
            )
        )
