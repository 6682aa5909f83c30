"""The time limits of one attempt (:class:`Limits`), with their defaults read from the settings
table. Pure: no sockets, no threads, no Spark."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparktf.common.settings import default

if TYPE_CHECKING:
    from sparktf.common.settings import Settings

#: After a node reports an error, how long to wait for its exit (and last output lines) before
#: failing the job with what is known; the same wait lets the nodes' own reports of a failed
#: Spark job arrive before Spark's less precise text is used.
ERROR_SETTLE_SECS = 3.0
#: A gap this long (seconds) between two steps of the monitor (which steps every 0.1 s) means
#: the driver was paused: what the nodes sent meanwhile is still unread.
PAUSED_SECS = 2.0
#: A silent worker's supervisor, told to kill its TF process so that it restarts in place,
#: asks for the restart within stop_grace plus this many seconds, or the worker is declared
#: hung (its supervisor, task or executor is frozen too).
KILL_WAIT_SECS = 10.0


@dataclass(frozen=True)
class Limits:
    """How long an attempt waits for each thing before it fails (seconds; None: no limit)."""

    reservation_timeout: float = default("reservation_timeout")
    heartbeat_timeout: float | None = default("heartbeat_timeout")
    progress_timeout: float | None = default("progress_timeout")
    error_settle: float = ERROR_SETTLE_SECS
    #: A lock-step trainer idle this long after a peer's main_fn returned fails the job
    #: (None: it is only named, after IDLE_SECS).
    collective_idle_timeout: float | None = default("collective_idle_timeout")
    #: A gap this long between two steps means the driver itself was paused (None: not
    #: looked for; the runner, which steps every 0.1 s, sets PAUSED_SECS).
    paused_after: float | None = None
    #: How often each worker's failed TF process may start again in place
    #: (spark.sparktf.workerRestarts, resolved: Settings.restarts_in_place).
    worker_restarts: int = 0
    #: How long a silent worker's supervisor, told to kill its TF process, has to ask for its
    #: restart in place (``stop_grace`` + KILL_WAIT_SECS) before the worker is declared hung.
    kill_wait: float = default("stop_grace") + KILL_WAIT_SECS

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The limits a job's resolved settings give each of its attempts (the monitor steps
        every 0.1 s, so a gap of PAUSED_SECS means the driver was paused)."""
        return cls(
            reservation_timeout=settings.reservation_timeout,
            heartbeat_timeout=settings.heartbeat_timeout,
            progress_timeout=settings.progress_timeout,
            collective_idle_timeout=settings.collective_idle_timeout,
            paused_after=PAUSED_SECS,
            worker_restarts=settings.restarts_in_place,
            kill_wait=settings.stop_grace + KILL_WAIT_SECS,
        )
