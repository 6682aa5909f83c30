"""The Spark side of a cluster on a Spark Connect session: :class:`ConnectContext` answers the
few things sparktf's driver asks of a SparkContext (job tags and their cancel, the master, the
settings, whether Spark has stopped) through Connect's own calls; :func:`thread` starts the
threads that submit the cluster's Spark jobs, on either kind of session.

What a Connect client cannot ask (Spark's status tracker: running jobs and tasks, free task
slots, the Hadoop configuration, broadcasts) is left unasked: the callers in
:mod:`~sparktf.driver.sparkjobs` already treat "Spark cannot be asked" as unknown, and the
nodes report to the driver's control server over TCP on either kind of session.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from sparktf.errors import ConfigError


class ConnectContext:
    """A Spark Connect session, seen as sparktf's driver sees a SparkContext."""

    def __init__(self, session: Any) -> None:
        """Built in the thread that calls ``sparktf.run``: its tags (``spark.addTag``: a
        notebook's cell, say) go on the cluster's operations too, so that interrupting them
        (``spark.interruptTag``) stops the cluster, as a job group does on a SparkContext."""
        self.session = session
        try:
            self.caller_tags: tuple[str, ...] = tuple(session.getTags())
        except Exception:  # (a session that cannot say: no tags to carry)
            self.caller_tags = ()

    @property
    def master(self) -> str:
        """The server's master (``spark.master`` of its conf; "" if it does not say)."""
        return str(self.session.conf.get("spark.master", "") or "")

    def conf(self) -> dict[str, str]:
        """The session's settings (the server's Spark conf and what ``spark.conf.set`` set)."""
        every = self.session.conf.getAll  # a property on Connect's RuntimeConf
        return {str(k): str(v) for k, v in (every() if callable(every) else every).items()}

    def addJobTag(self, tag: str) -> None:  # SparkContext's name
        """Tag the operations this thread starts from now on (Connect's tags are per thread)."""
        self.session.addTag(tag)

    def cancelJobsWithTag(self, tag: str) -> None:  # SparkContext's name
        """Interrupt every running operation of the session tagged ``tag``."""
        self.session.interruptTag(tag)

    def parse_ddl(self, ddl: str) -> Any:
        """A DDL string's Spark type, as the server parses it (no SparkContext here)."""
        return self.session._parse_ddl(ddl)

    def stopped(self) -> bool:
        return bool(getattr(self.session, "is_stopped", False))

    def client_address(self) -> str:
        """This machine's address on the route to the Connect server: where executors (which
        the server reaches) most likely reach this client too; loopback for a local server."""
        host = _server_host(self.session)
        if host is None or host in LOOPBACK:
            return "127.0.0.1"
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((host, 15002))  # a UDP "connect" sends nothing: it picks a route
                return str(s.getsockname()[0])
        except OSError:
            return socket.gethostbyname(socket.gethostname())


#: Host names a Connect client reaches a server on this machine by.
LOOPBACK = ("localhost", "127.0.0.1", "::1")


def local_master_here(session: Any) -> bool:
    """Whether a Connect session's executors run on this machine: its server's master is
    ``local[-cluster]`` and the client reaches the server on loopback."""
    try:
        master = ConnectContext(session).master
    except Exception:  # (a stopped session: nothing known)
        return False
    return master.startswith("local") and _server_host(session) in LOOPBACK


def _server_host(session: Any) -> str | None:
    """The Connect server's host, from the client's channel (None if it does not say)."""
    try:
        return str(session.client.host)
    except Exception:
        return None


def thread(sc: Any, target: Callable[[], None], name: str) -> threading.Thread:
    """A daemon thread (not started) for ``target``: on a classic SparkContext a PySpark
    ``InheritableThread``, so that the Spark jobs it submits carry the caller's properties
    (its job group: a notebook's cancel reaches them); on Connect a plain thread that adds
    the caller's tags (:attr:`ConnectContext.caller_tags`) and, in the job, its own
    (Connect's ``InheritableThread`` wants the process to be a Connect client only)."""
    if isinstance(sc, ConnectContext):

        def tagged() -> None:
            for tag in sc.caller_tags:  # (Connect's tags belong to the thread that adds them)
                sc.session.addTag(tag)
            target()

        return threading.Thread(target=tagged, daemon=True, name=name)
    from pyspark import InheritableThread

    return InheritableThread(target=target, daemon=True, name=name)


#: The port a ``sc://host`` URL without one means (Spark Connect's default).
CONNECT_PORT = 15002


def connect_address(url: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL (``sc://host[:port][/;param=value...]``)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.split(";", 1)[0])
    if parts.scheme != "sc" or not parts.hostname:
        raise ConfigError(
            f"a Spark Connect URL looks like sc://host:15002, got {url!r} (SPARK_REMOTE, "
            "--remote or spark.remote)"
        )
    try:
        port = parts.port or CONNECT_PORT
    except ValueError:
        raise ConfigError(f"the Spark Connect URL {url!r} has no valid port") from None
    return parts.hostname, port


def check_connect_server(url: str, timeout: float = 10.0) -> None:
    """Fail at once, naming the URL, where no Spark Connect server accepts connections at
    ``url``: pyspark's client retries a dead address for minutes without a word."""
    host, port = connect_address(url)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(
            f"no Spark Connect server answers at {url} ({host}:{port}: {exc}); start one "
            "(start-connect-server.sh) or fix SPARK_REMOTE / --remote"
        ) from None
