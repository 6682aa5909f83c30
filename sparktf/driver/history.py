"""What a job leaves behind on the driver: every node's whole output as a file, and the
metrics its nodes reported as TensorBoard scalars.

Runs on the driver; imports neither pyspark nor tensorflow (the event files are written with
the ``tensorboard`` package alone, in :mod:`sparktf.driver.scalars`).

Layout, under ``spark.sparktf.nodeLogDir`` (default: ``sparktf-<user>/logs`` in the driver's
temp directory)::

    <job id>/attempt-0/chief-0.log      # every line the node's processes wrote, in order
    <job id>/attempt-0/worker-1.log
    <job id>/attempt-1/...              # a restart's

File names use ``-`` for the ``:`` of a node's name (HDFS refuses ``:`` in a name). When the
job's ``log_dir`` is on Hadoop (``hdfs://...``), the job's directory is copied there at the end
of the job, to ``<log_dir>/sparktf-logs/<job id>``. Writing never fails the job: a file that
cannot be written is logged once and left.
"""

from __future__ import annotations

import getpass
import logging
import os
import tempfile
import threading
from typing import IO

log = logging.getLogger(__name__)


def default_root() -> str:
    """Where node logs go unless ``spark.sparktf.nodeLogDir`` says: the driver's temp
    directory, one folder per user (it outlives the job and the console)."""
    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid())
    return os.path.join(tempfile.gettempdir(), f"sparktf-{user}", "logs")


def file_name(node: str) -> str:
    """``worker:1`` -> ``worker-1`` (HDFS refuses ``:`` in a name)."""
    return node.replace(":", "-")


class NodeLogs:
    """The log files of one job: ``write`` a node's line, ``path`` of its file, ``close``."""

    def __init__(self, root: str | None, job_id: str) -> None:
        self.job_dir = os.path.join(os.path.abspath(root or default_root()), job_id)
        self.job_id = job_id
        self._lock = threading.Lock()
        self._files: dict[tuple[int, str], IO[str]] = {}
        self._failed = False
        self._closed = False

    def path(self, attempt: int, node: str) -> str:
        return os.path.join(self.job_dir, f"attempt-{attempt}", f"{file_name(node)}.log")

    def write(self, attempt: int, node: str, line: str) -> None:
        with self._lock:
            if self._failed or self._closed:
                return
            try:
                f = self._files.get((attempt, node))
                if f is None:
                    path = self.path(attempt, node)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    f = self._files[(attempt, node)] = open(
                        path, "a", encoding="utf-8", errors="replace", buffering=1
                    )
                f.write(line + "\n")
            except OSError as exc:
                self._failed = True
                log.warning(
                    "sparktf: cannot write the nodes' log files in %s: %s", self.job_dir, exc
                )

    def close(self, mirror_to: str | None = None) -> None:
        """Close every file; with a Hadoop ``mirror_to`` (the job's ``log_dir``), copy the
        job's directory to ``<mirror_to>/sparktf-logs/<job id>``. Idempotent; never raises."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            files, self._files = list(self._files.values()), {}
        for f in files:
            try:
                f.close()
            except OSError:
                pass
        if mirror_to and os.path.isdir(self.job_dir):
            self.mirror(mirror_to)

    def mirror(self, log_dir: str) -> None:
        from sparktf import fs

        if not fs.is_hadoop(log_dir):
            return
        remote = f"{log_dir.rstrip('/')}/sparktf-logs/{self.job_id}"
        try:
            fs.upload(self.job_dir, remote)
        except Exception as exc:
            log.warning("sparktf: could not copy the nodes' logs to %s: %s", remote, exc)
