"""The equalization bound as a node sees it: how many rows of each epoch every training node
is known to have, sent by the driver (``feed_bound`` messages, see
:meth:`sparktf.driver.state.JobState`), and the wait for it to grow.

Pure threading: no numpy, pyarrow or TensorFlow, so it is unit-tested in seconds.
"""

from __future__ import annotations

import threading
import time

from sparktf.errors import FeedError


class Bound:
    """The driver's word on how many rows every training node has: ``(value, final)``.

    ``value`` only grows; once ``final`` it is every epoch's exact length.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.value = 0
        self.final = False

    def update(self, value: int, final: bool) -> None:
        with self.cond:
            self.value, self.final = max(self.value, value), final or self.final
            self.cond.notify_all()

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
