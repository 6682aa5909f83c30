"""The equalization bound as a node sees it: how many rows of each epoch every training node
is known to have, sent by the driver (``feed_bound`` messages, see
:meth:`sparktf.driver.state.JobState`), and the wait for it to grow.

Pure threading: no numpy, pyarrow or TensorFlow, so it is unit-tested in seconds.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from sparktf.errors import FeedError


class Bound:
    """The driver's word on how many rows every training node has: ``(value, final)``.

    ``value`` only grows; once ``final`` it is every epoch's exact length.
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
        #: held back once the bound has caught up with it.
        self.listener: Callable[[], None] | None = None

    def update(self, value: int, final: bool, peers_ended: bool = False,
               plan: dict | None = None) -> None:
        with self.cond:
            if plan and not self.plan:
                self.plan = dict(plan)  # before final is seen: the consumer reads both
            self.value, self.final = max(self.value, value), final or self.final
            self.peers_ended = self.peers_ended or peers_ended
            self.cond.notify_all()
        listener = self.listener
        if listener is not None:
            listener()

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
        return max(0, min(want, self.value - delivered))

    def wait_beyond(self, delivered: int, timeout: float) -> None:
        """Wait until the bound passes ``delivered`` or is final; :class:`FeedError` after
        ``timeout`` seconds without either (the other nodes' feeds made no progress)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.value <= delivered and not self.final:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise FeedError(
                        f"no progress from the other training nodes' feeds for "
                        f"feed_timeout={timeout:g}s")
                self.cond.wait(min(remaining, 1.0))
