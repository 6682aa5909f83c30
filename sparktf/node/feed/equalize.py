"""The feed bound as a node sees it: how many rows of each epoch every training node is known
to have, sent by the driver (``feed_bound`` messages, from its
:class:`sparktf.driver.job.feedbound.FeedBound`), and the wait for it to grow.

Pure threading: no numpy, pyarrow or TensorFlow, so it is unit-tested in seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sparktf.errors import FeedError


class FeedBound:
    """The driver's word on how many rows every training node has: ``(value, final)``.

    ``value`` only grows; once ``final`` it is every epoch's exact length. Before that, the
    driver also sends ``others``: the fewest rows any *other* training node has reported. A
    node may hand out as many rows as it and every other node surely have, so its own
    :meth:`limit` is the smaller of its own count, fresh (``own``), and ``others``: its
    consumer does not wait for its own reports to go round the driver.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.value = 0
        self.final = False
        #: Some training node's share has ended: a node ahead of the bound may be a giver.
        self.peers_ended = False
        #: With the final bound, this node's part of a plan to move rows: ``{"give": [[taker,
        #: address, rows], ...]}`` or ``{"take": [[giver, rows], ...]}`` (see exchange).
        self.plan: dict = {}
        #: Called (without the lock) after every update: the feed sends a progress report it
        #: held back once the bound has caught up with it (see :meth:`follow`).
        self._on_update: Callable[[], None] | None = None
        #: The fewest rows another training node has reported (None: not known, or none).
        self.others: int | None = None
        #: This node's own rows received so far (see :meth:`follow`).
        self.own: Callable[[], int] | None = None
        #: The rows the consumer has handed out while it waits in :meth:`wait_beyond`.
        self._waiting_at: int | None = None
        #: When the driver last said anything of the feeds (monotonic): every ``feed_bound``
        #: message means some node's rows moved (the driver re-sends an unchanged bound at
        #: most every FLOW_EVERY seconds while rows flow: ``feed_timeout`` is an idle timeout).
        self.heard_at = time.monotonic()

    def follow(self, own: Callable[[], int], on_update: Callable[[], None]) -> None:
        """The node's feed follows this bound: ``own`` counts the rows it has received so
        far (its :meth:`limit` may pass the driver's value up to the others' count), and
        ``on_update`` is called after every update from the driver. The bound exists before
        the feed (the node's runtime hears the driver from its start), hence not in
        ``__init__``."""
        self.own, self._on_update = own, on_update

    def limit(self) -> int:
        """How many rows of this epoch this node may hand out now."""
        if self.final or self.others is None or self.own is None:
            return self.value
        return max(self.value, min(self.own(), self.others))

    def others_behind(self, reported: int) -> bool:
        """Whether another training node is known to have reported fewer rows than
        ``reported`` (this node's last report): then the bound is that node's, and a higher
        count from this node changes nothing until it catches up."""
        low = self.others if self.others is not None else self.value
        return low < reported

    def poke(self) -> None:
        """This node's own count grew: a consumer waiting at the limit goes on if that moved
        its limit. Called for every frame that arrives: a consumer held by the others' count
        is not woken (a thread woken for nothing costs more than the frame's bookkeeping)."""
        with self.cond:
            if self._waiting_at is not None and self.limit() > self._waiting_at:
                self.cond.notify_all()

    def update(
        self,
        value: int,
        final: bool,
        peers_ended: bool = False,
        plan: dict | None = None,
        others: int | None = None,
    ) -> None:
        with self.cond:
            self.heard_at = time.monotonic()
            if others is not None:
                self.others = max(self.others or 0, others)  # reports only grow
            if plan and not self.plan:
                self.plan = dict(plan)  # before final is seen: the consumer reads both
            self.value, self.final = max(self.value, value), final or self.final
            self.peers_ended = self.peers_ended or peers_ended
            self.cond.notify_all()
        on_update = self._on_update
        if on_update is not None:
            on_update()

    @property
    def gives(self) -> list:
        return self.plan.get("give", []) if self.final else []

    @property
    def takes(self) -> list:
        return self.plan.get("take", []) if self.final else []

    @property
    def rows_given(self) -> int:
        return sum(rows for _, _, rows in self.gives)

    @property
    def rows_taken(self) -> int:
        return sum(rows for _, rows in self.takes)

    def allows(self, delivered: int, want: int) -> int:
        """Of ``want`` more rows after ``delivered``, how many may be handed out now."""
        return max(0, min(want, self.limit() - delivered))

    def wait_beyond(self, delivered: int, timeout: float) -> None:
        """Wait until the bound passes ``delivered`` or is final; :class:`FeedError` after
        ``timeout`` seconds in which the driver said nothing of the feeds (no node's feed made
        progress: while any node's rows still flow, the driver says so)."""
        started = time.monotonic()
        with self.cond:
            self._waiting_at = delivered
            try:
                while self.limit() <= delivered and not self.final:
                    remaining = max(started, self.heard_at) + timeout - time.monotonic()
                    if remaining <= 0:
                        raise FeedError(
                            f"no progress from the other training nodes' feeds for "
                            f"feed_timeout={timeout:g}s"
                        )
                    self.cond.wait(min(remaining, 1.0))
            finally:
                self._waiting_at = None
