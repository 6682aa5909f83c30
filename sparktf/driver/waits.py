"""How a :class:`~sparktf.driver.cluster.Cluster`'s calls wait on its job: an interruption, an
error or an expired timeout stops every node and Spark job before it propagates.

Runs on the driver; each function takes the job's :class:`~sparktf.driver.runner.Runner`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from sparktf.driver.runner import Runner
from sparktf.errors import ClusterStateError, ClusterTimeoutError


@contextlib.contextmanager
def stopping_on_error(runner: Runner) -> Iterator[None]:
    """Any exception or interruption in the block stops every node and Spark job first."""
    try:
        yield
    except BaseException as exc:
        what = type(exc).__name__
        runner.abort(
            ClusterStateError(
                f"interrupted ({what}); every node was stopped"
                if isinstance(exc, KeyboardInterrupt)
                else f"the driver raised {what}: {exc}; every node was stopped"
            )
        )
        runner.teardown()
        raise


def wait(runner: Runner, predicate: Callable, deadline: float | None) -> bool:
    """Wait for ``predicate(state)`` (False: ``deadline`` passed first); raise the job's
    failure (after teardown)."""
    ok = runner.wait(predicate, deadline)
    if runner.failure is not None:
        runner.teardown()
        raise runner.failure
    return ok


def wait_until(runner: Runner, predicate: Callable, deadline: float | None, expired: str) -> None:
    """Wait for ``predicate(state)``; past ``deadline``, stop every node and raise a
    :class:`~sparktf.errors.ClusterTimeoutError` saying ``expired``."""
    with stopping_on_error(runner):
        if wait(runner, predicate, deadline):
            return
        state = runner.state
        running = [n.name for n in state.nodes.values() if n.exit is None] if state else []
        runner.abort(
            ClusterTimeoutError(
                f"{expired} expired with nodes {running} still running; every node was stopped"
            )
        )
    runner.teardown()
    if runner.failure is not None:  # else the job finished just as the deadline passed
        raise runner.failure
