"""Local directories mirrored to Hadoop paths, for what TensorFlow writes or reads only locally:
SyncedDir, export_dir.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from sparktf.errors import ClusterStateError, ConfigError
from sparktf.fs.backends import _call, backend
from sparktf.fs.files import _download_file, _put_file, delete, exists, upload
from sparktf.fs.paths import _TMP_MARK, HadoopFSError, _fspath, _local, _split, is_hadoop


# ------------------------------------------------------------------------ mirrored dirs
class SyncedDir:
    """A local directory mirrored to a Hadoop path, for what TensorFlow can only write (or
    read) locally: checkpoints, TensorBoard event files, a SavedModel.

    ``with sparktf.fs.SyncedDir("hdfs://nn/user/me/model") as local:`` yields a local
    directory that starts with what is at the remote path, if anything. ``direction="up"``
    (the default) copies new and changed files up on :meth:`sync`, every ``interval``
    seconds if given, and when the block ends (even by an error: what was complete is kept);
    files removed locally (old checkpoints) are removed there too. ``direction="down"``
    fetches what appears remotely instead (an evaluator following a chief's checkpoints).
    Each file travels under a temporary name and is renamed in place, and TensorFlow's
    ``checkpoint`` index file goes last, so a reader never sees an index that points at
    files not there yet. For a local path it is the path itself, and nothing is copied.
    """

    INDEX_FILES = ("checkpoint",)

    def __init__(
        self,
        remote: str,
        direction: str = "up",
        interval: float | None = None,
        download_first: bool = True,
    ) -> None:
        remote = _fspath(remote, "remote")
        if direction not in ("up", "down"):
            raise ConfigError(f"direction must be 'up' or 'down', got {direction!r}")
        if interval is not None and interval <= 0:
            raise ConfigError(f"interval must be > 0 seconds, got {interval!r}")
        self.remote = remote
        self.direction = direction
        self.interval = interval
        self.download_first = download_first
        self.local: str | None = None
        self._seen: dict[str, tuple] = {}  # relative path -> (size, mtime) last copied
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tmp: str | None = None
        self.error: BaseException | None = None  # the background sync's last failure

    def __enter__(self) -> str:
        if not is_hadoop(self.remote):
            self.local = _local(self.remote)
            os.makedirs(self.local, exist_ok=True)
            return self.local
        self._tmp = self.local = tempfile.mkdtemp(prefix="sparktf-synced-")
        if self.direction == "down" or self.download_first:
            self.pull()
        if self.interval:
            self._thread = threading.Thread(target=self._loop, name="sparktf-fs-sync", daemon=True)
            self._thread.start()
        return self.local

    def __exit__(self, *exc) -> None:
        if self._tmp is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self.direction == "up":
                self.push()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def sync(self) -> None:
        """Copy what changed, in this mirror's direction (nothing for a local path)."""
        if self._tmp is None:
            return
        self.push() if self.direction == "up" else self.pull()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
                self.error = None
            except Exception as exc:
                self.error = exc

    def _ordered(self, names):
        return sorted(names, key=lambda n: (os.path.basename(n) in self.INDEX_FILES, n))

    def _here(self) -> str:
        """The local directory (``__enter__`` made it)."""
        if self.local is None:
            raise ClusterStateError("a synced directory is used inside its with block only")
        return self.local

    def push(self) -> None:
        here = self._here()
        with self._lock:
            local_files = {}
            for root, _, files in os.walk(here):
                for name in files:
                    full = os.path.join(root, name)
                    st = os.stat(full)
                    local_files[os.path.relpath(full, here)] = (st.st_size, st.st_mtime_ns)
            for rel in self._ordered(local_files):
                if self._seen.get(rel) != local_files[rel]:
                    with builtins.open(os.path.join(here, rel), "rb") as f:
                        _put_file(self._remote(rel), f)
                    self._seen[rel] = local_files[rel]
            for rel in sorted(set(self._seen) - set(local_files)):
                delete(self._remote(rel))
                del self._seen[rel]

    def pull(self) -> None:
        here = self._here()
        with self._lock:
            if not exists(self.remote):
                return
            remote_files = dict(self._walk_remote(""))
            b = backend(self.remote)
            for rel in self._ordered(remote_files):
                if self._seen.get(rel) != remote_files[rel]:
                    target = os.path.join(here, rel)
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    try:
                        _download_file(b, self._remote(rel), _split(self._remote(rel))[3], target)
                    except HadoopFSError:
                        if exists(self._remote(rel)):
                            raise
                        continue  # removed meanwhile (an old checkpoint)
                    st = os.stat(target)
                    self._seen[rel] = remote_files[rel]
                    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))

    def _walk_remote(self, rel: str):
        b = backend(self.remote)
        base = self._remote(rel) if rel else self.remote
        for name, kind, size in _call(base, "list", b.scan, _split(base)[3]):
            if _TMP_MARK in name:
                continue  # another writer's file in flight
            child = f"{rel}/{name}" if rel else name
            if kind == "dir":
                yield from self._walk_remote(child)
            elif kind == "file":
                yield child, (size,)

    def _remote(self, rel: str) -> str:
        return self.remote.rstrip("/") + "/" + rel.replace(os.sep, "/")


@contextlib.contextmanager
def export_dir(path: str) -> Iterator[str]:
    """A local directory to save a model into; when the block ends without an error its
    contents are put at ``path`` (local or Hadoop) at once, replacing what was there, by a
    rename from a temporary name beside it. After an error nothing is written. The model
    that was there is renamed aside before the new one is renamed in, and removed after; if
    the new one cannot be renamed in, the old one is put back and the error raised (if even
    that fails, the error says where the old one is)."""
    path = _fspath(path)
    tmp = tempfile.mkdtemp(prefix="sparktf-export-")
    try:
        target = os.path.join(tmp, "model")
        os.makedirs(target)
        yield target
        upload(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def keras_sync_callback(synced: SyncedDir) -> Any:
    """A tf-keras callback that calls ``synced.sync()`` after every epoch (so the epoch's
    checkpoint and logs are on HDFS before the next epoch starts)."""
    import tensorflow as tf

    class SyncAfterEpoch(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            synced.sync()

    return SyncAfterEpoch()
