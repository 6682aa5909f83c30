"""The node's side of the equalization bound (pure threading): ``feed_timeout`` is an idle
timeout; it runs only while nothing of the other nodes' feeds moves."""

import threading
import time

import pytest

from sparktf.errors import FeedError
from sparktf.node.feed.equalize import FeedBound


def test_a_wait_for_the_bound_lasts_while_the_driver_says_rows_flow():
    bound = FeedBound()
    bound.update(5, False, others=5)
    stop = threading.Event()

    def driver():  # the same bound, re-sent: another node's rows still flow
        while not stop.wait(0.1):
            bound.update(5, False, others=5)

    t = threading.Thread(target=driver)
    t.start()
    started = time.monotonic()
    try:
        threading.Timer(1.2, lambda: bound.update(9, True)).start()
        bound.wait_beyond(5, timeout=0.5)  # would have failed at 0.5 s
    finally:
        stop.set()
        t.join()
    assert bound.final and time.monotonic() - started >= 1.1


def test_a_wait_for_the_bound_fails_once_nothing_flows_for_feed_timeout():
    bound = FeedBound()
    bound.update(5, False, others=5)
    started = time.monotonic()
    with pytest.raises(FeedError, match="feed_timeout=0.3s"):
        bound.wait_beyond(5, timeout=0.3)
    assert time.monotonic() - started < 2
