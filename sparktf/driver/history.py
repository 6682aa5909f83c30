"""What a job leaves behind on the driver: every node's whole output as a file, and the
metrics its nodes reported, as a series and as TensorBoard scalars.

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

The files are the user's alone (:mod:`sparktf.common.private`): directories 0700, files 0600
opened without following a symlink; a symlink or another user's directory where the root or
the default's ``sparktf-<user>`` should be fails the job before it starts
(:class:`~sparktf.errors.UnsafePathError`). A file past ``spark.sparktf.nodeLogMaxBytes`` is
rotated: its output so far becomes ``worker-1.log.1`` (replacing an older one) and the new
file starts with a line saying so. Only the last ``spark.sparktf.nodeLogKeepJobs`` jobs'
directories under the root are kept; older ones are removed when a job starts.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
from typing import IO, Any

from sparktf.common import logfilter, private, settings
from sparktf.driver.scalars import Scalars, file_name
from sparktf.errors import NodeError, UnsafePathError

log = logging.getLogger(__name__)


#: The defaults of spark.sparktf.nodeLogMaxBytes and spark.sparktf.nodeLogKeepJobs (the table's).
DEFAULT_MAX_BYTES: int = settings.default("node_log_max_bytes")
DEFAULT_KEEP_JOBS: int = settings.default("node_log_keep_jobs")
#: A job's directory, as :func:`sparktf.driver.launch` names it: the only ones pruned.
JOB_DIR = re.compile(r"sparktf-[0-9a-f]{12}")
REMEDY = (
    "Remove it (if it is not yours, ask its owner or an administrator), or set "
    "spark.sparktf.nodeLogDir to a directory of your own."
)


def default_root() -> str:
    """Where node logs go unless ``spark.sparktf.nodeLogDir`` says: the driver's temp
    directory, one folder per user (it outlives the job and the console)."""
    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid())
    return os.path.join(tempfile.gettempdir(), f"sparktf-{user}", "logs")


def private_root(root: str | None) -> str:
    """The root of the node logs, made and checked (:mod:`sparktf.common.private`): the
    default's ``sparktf-<user>`` and ``logs`` are made 0700; a given ``nodeLogDir`` keeps its
    mode (the job's own directory in it is 0700). :class:`UnsafePathError` for a symlink or
    another user's directory."""
    if root is None:
        root = default_root()
        private.directory(os.path.dirname(root), remedy=REMEDY)
        return private.directory(root, remedy=REMEDY)
    return private.directory(os.path.abspath(root), private=False, remedy=REMEDY)


def prune(root: str, keep: int, current: str) -> None:
    """Remove all but the newest ``keep`` jobs' directories under ``root``, ``current``
    counted among them (and never removed): only this user's directories named as a job's,
    never through a symlink. Never raises."""
    try:
        entries = []
        for name in os.listdir(root):
            if JOB_DIR.fullmatch(name) and name != current:
                st = os.lstat(os.path.join(root, name))
                if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
                    entries.append((st.st_mtime, name))
    except OSError as exc:
        log.warning("sparktf: cannot list the old jobs' node logs in %s: %s", root, exc)
        return
    for _, name in sorted(entries, reverse=True)[max(keep - 1, 0) :]:
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)  # (never follows a link)


class CappedFile:
    """One node's log file of one attempt, 0600, rotated to ``<name>.1`` past ``max_bytes``."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._f: IO[str] = private.open_append(path)
        self._size = os.fstat(self._f.fileno()).st_size

    def write(self, line: str) -> None:
        data = line + "\n"
        size = len(data.encode("utf-8", "replace"))
        if size > self.max_bytes // 2:  # a line longer than half the cap: its start only
            data = data[: self.max_bytes // 8] + " [sparktf: line cut, too long]\n"
            size = len(data.encode("utf-8", "replace"))
        if self._size + size > self.max_bytes and self._size > 0:
            self._rotate()
        self._f.write(data)
        self._size += size

    def _rotate(self) -> None:
        self._f.close()
        os.replace(self.path, self.path + ".1")
        self._f = private.open_append(self.path)
        marker = (
            f"[sparktf: this file reached spark.sparktf.nodeLogMaxBytes={self.max_bytes} "
            f"bytes; the output before this line is in {os.path.basename(self.path)}.1, "
            "anything older was dropped]\n"
        )
        self._f.write(marker)
        self._size = len(marker.encode())

    def close(self) -> None:
        self._f.close()


class NodeLogs:
    """The log files of one job: ``write`` a node's line, ``path`` of its file, ``close``.

    Makes the root and the job's directory at once (:func:`private_root`, which raises
    :class:`UnsafePathError`), and prunes older jobs' directories to ``keep_jobs``."""

    def __init__(
        self,
        root: str | None,
        job_id: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep_jobs: int = DEFAULT_KEEP_JOBS,
    ) -> None:
        self.job_id = job_id
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._files: dict[tuple[int, str], CappedFile] = {}
        self._failed = False
        self._closed = False
        self.job_dir = os.path.join(os.path.abspath(root or default_root()), job_id)
        try:
            parent = private_root(root)
            private.directory(self.job_dir)
        except OSError as exc:
            if isinstance(exc, UnsafePathError):
                raise
            self._failed = True
            log.warning("sparktf: cannot write the nodes' log files in %s: %s", self.job_dir, exc)
            return
        prune(parent, keep_jobs, job_id)

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
                    private.directory(os.path.dirname(path))
                    f = self._files[(attempt, node)] = CappedFile(path, self._max_bytes)
                f.write(line)
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
            # each attempt's folder, not the job's: the scalars beside them (a Hadoop log_dir's
            # local copy, see scalars_root) have a place of their own there
            for name in sorted(os.listdir(self.job_dir)):
                if name.startswith("attempt-"):
                    under = f"sparktf-logs/{self.job_id}/{name}"
                    copy_to_hadoop(os.path.join(self.job_dir, name), mirror_to, under, "logs")


class JobHistory:
    """What the driver keeps of one job's output, every attempt's: the nodes' log files
    (:class:`NodeLogs`), the series of their ``ctx.report`` metrics and those as TensorBoard
    scalars, copied to a Hadoop ``log_dir`` by :meth:`close`. Safe from any thread."""

    def __init__(
        self,
        node_log_dir: str | None,
        log_dir: str | None,
        job_id: str,
        tf_startup_logs: bool,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep_jobs: int = DEFAULT_KEEP_JOBS,
    ) -> None:
        #: Every node's whole output, as files on the driver (spark.sparktf.nodeLogDir).
        self.logs = NodeLogs(node_log_dir, job_id, max_bytes, keep_jobs)
        self.job_id = job_id
        self._log_dir = log_dir  # a Hadoop one gets a copy of the logs at the end
        self._tf_startup_logs = tf_startup_logs
        self._lock = threading.Lock()
        #: Node -> every ctx.report with metrics, oldest first (cluster.metrics()).
        self._series: dict[str, list[dict]] = {}
        self.scalars = Scalars(scalars_root(log_dir, self.logs.job_dir, job_id))

    def write(self, attempt: int, node: str, line: str) -> None:
        """Append one line of ``node``'s output to its log file of ``attempt``."""
        self.logs.write(attempt, node, line)

    def record(self, attempt: int, node: str, reports: list[tuple[Any, float, dict]]) -> None:
        """Keep a heartbeat's ``ctx.report`` calls as the node's series, and as scalars."""
        points = [
            {"step": step, "time": wall, "values": dict(values), "attempt": attempt}
            for step, wall, values in reports
        ]
        with self._lock:
            self._series.setdefault(node, []).extend(points)
        self.scalars.add(node, reports)

    def metrics(self) -> dict[str, list[dict]]:
        """Each node's series of ``ctx.report`` metrics, oldest first, every attempt's."""
        with self._lock:
            return {node: [dict(p) for p in points] for node, points in self._series.items()}

    def shown(self, err: NodeError, attempt: int) -> NodeError:
        """A node's error as the user reads it: its tail without TensorFlow's start-up
        chatter, as the console shows it (spark.sparktf.tfStartupLogs=true keeps it; the log
        file keeps every line), naming the node's log file only where one was written (a
        node that failed before it started wrote none)."""
        if not self._tf_startup_logs:
            tail = [line for line in err.output_tail if not logfilter.is_startup_chatter(line)]
            err = err.with_output_tail(tail)
        path = self.logs.path(attempt, err.node)
        return err.with_log_file(path if os.path.isfile(path) else None)

    def close(self) -> None:
        """Close the scalars and the log files; with a Hadoop ``log_dir``, copy both there.
        Never raises."""
        self.scalars.close()
        if self._log_dir and os.path.isdir(self.scalars.root):
            copy_to_hadoop(self.scalars.root, self._log_dir, f"sparktf/{self.job_id}", "metrics")
        self.logs.close(mirror_to=self._log_dir)


def scalars_root(log_dir: str | None, job_dir: str, job_id: str) -> str:
    """Where the driver writes the nodes' metrics as TensorBoard scalars: a local ``log_dir``'s
    ``sparktf/<job id>``; else beside the job's node logs (a Hadoop ``log_dir`` gets a copy
    at the end)."""
    from sparktf import fs

    if log_dir and not fs.is_hadoop(log_dir):
        local = log_dir[len("file://") :] if log_dir.startswith("file://") else log_dir
        return os.path.join(local, "sparktf", job_id)
    return os.path.join(job_dir, "tensorboard")


def copy_to_hadoop(local: str, log_dir: str, under: str, what: str) -> None:
    """Copy the directory ``local`` to ``<log_dir>/<under>`` where ``log_dir`` is a Hadoop
    path (nothing otherwise); a failure is a warning naming ``what`` (the nodes' logs or
    metrics), never an error: the job's outcome stands."""
    from sparktf import fs

    if not fs.is_hadoop(log_dir):
        return
    remote = f"{log_dir.rstrip('/')}/{under}"
    try:
        fs.upload(local, remote)
    except Exception as exc:
        log.warning("sparktf: could not copy the nodes' %s to %s: %s", what, remote, exc)
