"""The barrier task's feed failure, shared by the feeder's modules."""

from __future__ import annotations

from sparktf.errors import FeedError


class TaskFeedError(FeedError):
    """Feeding the partition to the TF process, or taking its outputs back, failed."""


def _took_no_data(timeout: float) -> TaskFeedError:
    return TaskFeedError(f"the TF process took no data for feed_timeout={timeout:g}s")
