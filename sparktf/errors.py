"""Exceptions raised by sparktf.

Every exception a user can meet derives from :class:`SparkTFError`
(``tests/unit/test_raise_sites.py`` keeps it so). Errors about bad input also derive from
``ValueError`` (:class:`ConfigError`), and from ``TypeError`` too for a wrong type
(:class:`ConfigTypeError`), so that generic handlers keep working; every message says what to
change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class SparkTFError(Exception):
    """Root of every error sparktf raises."""


class ConfigError(SparkTFError, ValueError):
    """An argument or a Spark setting is invalid; the message says what to change.

    ``problems`` lists every problem found, when a preflight check found several at once.
    """

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems) or [message]

    @classmethod
    def from_problems(cls, problems: Sequence[str]) -> ConfigError:
        if len(problems) == 1:
            return cls(problems[0], problems)
        lines = "\n".join(f"  - {p}" for p in problems)
        return cls(f"sparktf cannot start this job ({len(problems)} problems):\n{lines}", problems)


class ConfigTypeError(ConfigError, TypeError):
    """An argument has the wrong type: a ConfigError that is also a TypeError, as Python's own
    calls raise for one."""


class ClusterStateError(SparkTFError, RuntimeError):
    """The cluster was used in a state that does not allow it (e.g. after shutdown)."""


class NodeError(SparkTFError, RuntimeError):
    """A TensorFlow node failed: its ``main_fn`` raised, or its process died.

    Attributes
    ----------
    node : str
        The node's name, ``"job:index"`` (e.g. ``"worker:1"``).
    host : str or None
        The host the node ran on.
    exc_type : str or None
        The name of the original exception type, when ``main_fn`` raised.
    exc_message : str or None
        The original exception's message.
    output_tail : list of str
        The last lines the node wrote to stdout/stderr.
    log_file : str or None
        The file on the driver that holds the node's whole output
        (``spark.sparktf.nodeLogDir``).
    """

    def __init__(
        self,
        node: str,
        host: str | None,
        reason: str,
        *,
        exc_type: str | None = None,
        exc_message: str | None = None,
        traceback_text: str | None = None,
        output_tail: Sequence[str] = (),
        others: Sequence[str] = (),
        log_file: str | None = None,
    ) -> None:
        self.node = node
        self.host = host
        self.reason = reason
        self.exc_type = exc_type
        self.exc_message = exc_message
        self.traceback_text = traceback_text
        self.output_tail = list(output_tail)
        self.others = list(others)
        self.log_file = log_file
        super().__init__(self._format())

    def _format(self) -> str:
        where = f"{self.node} on host {self.host}" if self.host else self.node
        text = f"sparktf node {where} failed: {self.reason}"
        cause = f"{self.exc_type}: {self.exc_message}"
        if self.exc_type and not self.reason.endswith(cause):  # (not twice)
            text += f"\n  {cause}"
        if self.others:
            text += "\n  also failed: " + ", ".join(self.others)
        if self.output_tail:
            lines = "\n".join(f"    {line}" for line in self.output_tail)
            text += f"\n  last {len(self.output_tail)} lines of {self.node}'s output:\n{lines}"
        if self.log_file:
            text += f"\n  {self.node}'s whole output is in {self.log_file} (on the driver)"
        return text

    def with_log_file(self, path: str | None) -> NodeError:
        """The same error, naming the file that holds the node's whole output (None: no
        file, e.g. for a node that never started)."""
        return self._but(log_file=path)

    def with_output_tail(self, lines: Sequence[str]) -> NodeError:
        """The same error, with ``lines`` as the tail of the node's output."""
        return self._but(output_tail=lines)

    def _but(self, **changes: Any) -> NodeError:
        fields: dict[str, Any] = {
            "exc_type": self.exc_type,
            "exc_message": self.exc_message,
            "traceback_text": self.traceback_text,
            "output_tail": self.output_tail,
            "others": self.others,
            "log_file": self.log_file,
        }
        fields.update(changes)
        return NodeError(self.node, self.host, self.reason, **fields)

    def __reduce__(self):  # keep the error picklable with all its fields
        return (
            _rebuild_node_error,
            (
                self.node,
                self.host,
                self.reason,
                self.exc_type,
                self.exc_message,
                self.traceback_text,
                self.output_tail,
                self.others,
                self.log_file,
            ),
        )


def _rebuild_node_error(node, host, reason, exc_type, exc_message, tb, tail, others, log_file=None):
    return NodeError(
        node,
        host,
        reason,
        exc_type=exc_type,
        exc_message=exc_message,
        traceback_text=tb,
        output_tail=tail,
        others=others,
        log_file=log_file,
    )


class SparkJobError(SparkTFError, RuntimeError):
    """The Spark job that holds the TensorFlow nodes failed before any node reported why.

    ``cancelled``: someone cancelled it (its job group, every job, the Spark UI); sparktf
    does not restart a cluster for that."""

    def __init__(self, message: str, cancelled: bool = False) -> None:
        super().__init__(message)
        self.cancelled = cancelled


class ClusterTimeoutError(SparkTFError, TimeoutError):
    """A wait (reservation, shutdown) ran past its timeout; the cluster was stopped."""


class ReservationTimeoutError(ClusterTimeoutError):
    """Not every node of an attempt started within ``reservation_timeout``; the message says
    which, and what held Spark's task slots if its barrier stage never launched.

    ``restartable``: every node missing had its barrier task reach the rendezvous and was sent
    the cluster's addresses, then fell silent (its host lost or partitioned): a whole-cluster
    restart (``max_restarts``) may run on the hosts left. A node whose task never reached the
    driver (slots held by other jobs, too few executors) would wait the same again."""

    def __init__(self, message: str, restartable: bool = False) -> None:
        super().__init__(message)
        self.restartable = restartable

    def __reduce__(self):  # keep restartable when pickled
        return (type(self), (str(self), self.restartable))


class RendezvousTimeoutError(ClusterTimeoutError):
    """A barrier task did not get every node's address from the driver within
    ``reservation_timeout`` (the driver unreachable from its executor, or silent: a network
    partition, a firewall, a paused driver): the task fails, its reserved port released."""


class FeedError(SparkTFError, RuntimeError):
    """InputMode.SPARK: the data feed failed (timeout, lost connection, bad data, outputs
    that do not match the input rows).

    ``reason``: :data:`BROKEN` when the connection from Spark broke (the other side's own
    report, if any, says why), else None."""

    #: ``reason`` of a feed whose connection from Spark broke.
    BROKEN = "broken"

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):  # keep the reason when pickled
        return (type(self), (str(self), self.reason))


class PortRangeError(SparkTFError, RuntimeError):
    """Every port of ``spark.sparktf.portRange`` on a host is taken: widen the range, or run
    fewer nodes (or jobs) on that host at once."""


class UnsafePathError(SparkTFError, PermissionError):
    """A directory or file sparktf would keep a user's private data in (the nodes' log files)
    is a symlink or belongs to another user: sparktf neither follows nor uses it. The message
    names the path and what to do (remove it, or choose another place)."""


class UnreachableError(SparkTFError, ConnectionError):
    """A node's packets to another node's TensorFlow port go unanswered (dropped: a firewall
    between the executors' hosts, a network partition): the message names both nodes, the
    address and what to set (``spark.sparktf.portRange`` to a range the firewall opens)."""
