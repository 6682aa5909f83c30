"""Hadoop paths (``hdfs://``, ``viewfs://``) from the driver, the executors and the TF nodes.

TensorFlow 2.21 has no ``hdfs://`` file system (and tensorflow-io does not load in it), so a
checkpoint, a SavedModel or a TensorBoard log meant for HDFS is written to a local directory
and copied with this module. Every function takes local paths too, so the same code runs with
``--model-dir /tmp/model`` and ``--model-dir hdfs://nn/model``.

Two ways to reach HDFS; the first that works is used, per NameNode:

- **libhdfs**: pyarrow's ``HadoopFileSystem``. Needs ``libhdfs.so`` (``ARROW_LIBHDFS_DIR``, or
  ``$HADOOP_HOME/lib/native``), a JVM (``JAVA_HOME``) and the Hadoop jars on ``CLASSPATH`` as
  explicit paths (``CLASSPATH=$(hadoop classpath --glob)``): what YARN nodes have.
- **webhdfs**: the ``hdfs`` package over the NameNode's HTTP port, from
  ``SPARKTF_WEBHDFS_URL`` (for the NameNode of ``fs.defaultFS``), else
  ``dfs.namenode.http-address`` (from ``$HADOOP_CONF_DIR``, or what the driver's Hadoop
  configuration said), else the NameNode's host on port 9870
  (Hadoop 3) or 50070 (Hadoop 2).

``SPARKTF_HDFS_BACKEND=libhdfs|webhdfs`` forces one. The user is ``HADOOP_USER_NAME``, else the
login name. A path without a host (``hdfs:///data``) goes to ``fs.defaultFS``.

Writes are atomic: a file or directory is written under a temporary name beside its target
and renamed into place, so a reader never sees a partial SavedModel or checkpoint. A directory
already there is renamed aside first and removed only once the new one is in; if the new one
cannot be renamed in, the old one is put back (a model is never lost to a failed export).

Imports pyarrow or hdfs only when a Hadoop path is used; never tensorflow or pyspark.
"""

from __future__ import annotations

import builtins
import contextlib
import getpass
import io
import os
import shutil
import tempfile
import threading
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from sparktf.errors import SparkTFError

HADOOP_SCHEMES = ("hdfs", "viewfs", "webhdfs")
#: Seconds to wait for a NameNode or WebHDFS to answer before the path is an error.
CONNECT_TIMEOUT = 10.0
_TMP_MARK = "._sparktf_tmp_"


class HadoopFSError(SparkTFError, OSError):
    """A Hadoop path could not be used; the message names the path and the cause."""


# ------------------------------------------------------------------------------- paths
def is_hadoop(path) -> bool:
    """True for ``hdfs://``, ``viewfs://`` and ``webhdfs://`` paths."""
    return isinstance(path, str) and urllib.parse.urlsplit(path).scheme in HADOOP_SCHEMES


def _fspath(path, name: str = "path") -> str:
    """A path argument as a str: a str, or an ``os.PathLike`` (a local path)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise TypeError(f"sparktf.fs: {name} must be a non-empty str or os.PathLike, got {path!r}")
    scheme = urllib.parse.urlsplit(path).scheme if "://" in path else ""
    if scheme and scheme not in HADOOP_SCHEMES + ("file",):
        # Not a local path either: it would be written to ./s3:/bucket/... on the local disk.
        raise HadoopFSError(
            f"sparktf.fs: {path}: {scheme}:// is not a filesystem sparktf.fs "
            "reaches; it takes hdfs://, viewfs://, webhdfs:// or local paths "
            "(plain or file://)"
        )
    return path


def default_fs() -> str | None:
    """``fs.defaultFS``: ``SPARKTF_DEFAULT_FS`` (the driver passes its own to the nodes), else
    ``$HADOOP_CONF_DIR/core-site.xml``; None when neither says."""
    return os.environ.get("SPARKTF_DEFAULT_FS") or _hadoop_conf("core-site.xml", "fs.defaultFS")


def working_dir() -> str:
    """The directory a relative local path is resolved against: the driver's working directory
    (``SPARKTF_WORKING_DIR``, which the driver passes to its nodes and executors, whose own
    working directories are Spark's), else this process's."""
    return os.environ.get("SPARKTF_WORKING_DIR") or os.getcwd()


def hadoop_user() -> str:
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


def absolute_path(path: str, default: str | None = None, user: str | None = None) -> str:
    """``path`` as a full URI, as TensorFlowOnSpark users expect: a URI as it is; an absolute
    path on ``fs.defaultFS``; a relative one under the user's home there
    (``/user/<name>``). With no Hadoop default file system, local paths become absolute
    ``file://`` paths (a relative one under the driver's working directory,
    :func:`working_dir`)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise HadoopFSError(f"absolute_path() needs a non-empty str path, got {path!r}")
    if urllib.parse.urlsplit(path).scheme:
        return path
    fs = default if default is not None else default_fs()
    if not fs or urllib.parse.urlsplit(fs).scheme in ("", "file"):
        return "file://" + os.path.normpath(os.path.join(working_dir(), path))
    if not path.startswith("/"):
        path = f"/user/{user or hadoop_user()}/{path}"
    return fs.rstrip("/") + path


def _hadoop_conf(filename: str, key: str) -> str | None:
    for d in (
        os.environ.get("HADOOP_CONF_DIR"),
        os.environ.get("HADOOP_HOME") and os.path.join(os.environ["HADOOP_HOME"], "etc", "hadoop"),
    ):
        if not d or not os.path.exists(os.path.join(d, filename)):
            continue
        try:
            for prop in ET.parse(os.path.join(d, filename)).getroot().iter("property"):
                if prop.findtext("name") == key:
                    return (prop.findtext("value") or "").strip() or None
        except ET.ParseError:
            return None
    return None


def _split(path: str) -> tuple[str, str, int | None, str]:
    """(scheme, host, port, path) of a Hadoop URI, the host filled in from fs.defaultFS."""
    u = urllib.parse.urlsplit(path)
    host, port = u.hostname, u.port
    if not host:
        fs = default_fs()
        d = urllib.parse.urlsplit(fs) if fs else None
        if not d or d.scheme not in HADOOP_SCHEMES or not d.hostname:
            raise HadoopFSError(
                f"{path}: no NameNode in the path and no Hadoop fs.defaultFS to take it from; "
                "write hdfs://HOST:PORT/..., or set HADOOP_CONF_DIR (or SPARKTF_DEFAULT_FS)"
            )
        host, port = d.hostname, d.port
    return u.scheme, host, port, u.path or "/"


# ---------------------------------------------------------------------------- backends
class _Backend:
    name = ""

    def info(self, path: str) -> tuple[str | None, int]:
        """("file" | "dir" | None, size)."""
        raise NotImplementedError

    def stat(self, path: str) -> tuple[str, int, int] | None:
        """("file" | "dir", size, modification time in ns), None if nothing is there."""
        raise NotImplementedError

    def scan(self, path: str) -> list[tuple[str, str | None, int]]:
        """(name, "file" | "dir", size) of each entry of a directory, in one call."""
        raise NotImplementedError

    def makedirs(self, path: str) -> None:
        raise NotImplementedError

    def delete(self, path: str, recursive: bool) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        raise NotImplementedError

    def open_read(self, path: str):
        raise NotImplementedError

    def write_from(self, path: str, f) -> None:
        """Write the readable binary file ``f`` to ``path`` (overwriting)."""
        raise NotImplementedError


class _Libhdfs(_Backend):
    name = "libhdfs"

    def __init__(self, host: str, port: int | None) -> None:
        import pyarrow.fs as pafs

        self._pafs = pafs
        self._fs = pafs.HadoopFileSystem(
            host,
            port or 8020,
            user=hadoop_user(),
            extra_conf={
                "ipc.client.connect.max.retries": "1",
                "ipc.client.connect.max.retries.on.timeouts": "1",
                "ipc.client.connect.timeout": str(int(CONNECT_TIMEOUT * 1000)),
            },
        )
        # Fail here, not at the first real call (a file's status reads as "not found" when
        # the NameNode is down; a listing raises).
        self._fs.get_file_info(pafs.FileSelector("/"))

    def info(self, path):
        i = self._fs.get_file_info(path)
        if i.type == self._pafs.FileType.NotFound:
            return None, 0
        return ("dir" if i.type == self._pafs.FileType.Directory else "file"), i.size or 0

    def stat(self, path):
        i = self._fs.get_file_info(path)
        if i.type == self._pafs.FileType.NotFound:
            return None
        kind = "dir" if i.type == self._pafs.FileType.Directory else "file"
        return kind, i.size or 0, i.mtime_ns or 0

    def scan(self, path):
        kinds = {self._pafs.FileType.Directory: "dir", self._pafs.FileType.File: "file"}
        return sorted(
            (os.path.basename(i.path.rstrip("/")), kinds.get(i.type), i.size or 0)
            for i in self._fs.get_file_info(self._pafs.FileSelector(path))
        )

    def makedirs(self, path):
        self._fs.create_dir(path, recursive=True)

    def delete(self, path, recursive):
        kind, _ = self.info(path)
        if kind == "dir":
            if not recursive and self.scan(path):
                raise OSError(f"directory not empty: {path}")
            self._fs.delete_dir(path)
        elif kind == "file":
            self._fs.delete_file(path)

    def rename(self, src, dst):
        self._fs.move(src, dst)

    def open_read(self, path):
        return self._fs.open_input_stream(path)

    def write_from(self, path, f):
        with self._fs.open_output_stream(path) as out:
            shutil.copyfileobj(f, out, 4 << 20)


class _WebHDFS(_Backend):
    name = "webhdfs"

    def __init__(self, url: str) -> None:
        import hdfs

        self._hdfs = hdfs
        self.url = url
        self._client = hdfs.InsecureClient(url, user=hadoop_user(), timeout=(CONNECT_TIMEOUT, 120))
        self._client.status("/")  # fail here, not at the first real call

    def info(self, path):
        st = self._client.status(path, strict=False)
        if st is None:
            return None, 0
        return ("dir" if st["type"] == "DIRECTORY" else "file"), st.get("length", 0)

    def stat(self, path):
        st = self._client.status(path, strict=False)
        if st is None:
            return None
        return (
            ("dir" if st["type"] == "DIRECTORY" else "file"),
            st.get("length", 0),
            int(st.get("modificationTime", 0)) * 1_000_000,
        )  # (milliseconds)

    def scan(self, path):
        return sorted(
            (name, "dir" if st["type"] == "DIRECTORY" else "file", st.get("length", 0))
            for name, st in self._client.list(path, status=True)
        )

    def makedirs(self, path):
        self._client.makedirs(path)

    def delete(self, path, recursive):
        self._client.delete(path, recursive=recursive)

    def rename(self, src, dst):
        self._client.rename(src, dst)

    def open_read(self, path):
        return _WebHDFSReader(self._client, path)

    def write_from(self, path, f):
        self._client.write(path, data=f, overwrite=True)


class _WebHDFSReader(io.RawIOBase):
    """A WebHDFS file as a readable stream (the ``hdfs`` package's reader is a context)."""

    def __init__(self, client, path: str) -> None:
        self._ctx = client.read(path, chunk_size=0)
        self._resp = self._ctx.__enter__()

    def readable(self):
        return True

    def readinto(self, b):
        data = self._resp.read(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self):
        if not self.closed:
            self._ctx.__exit__(None, None, None)
        super().close()


_BACKENDS: dict[tuple[str, int | None], _Backend] = {}
_BACKENDS_LOCK = threading.Lock()


def _webhdfs_urls(host: str, port: int | None) -> list[str]:
    given = os.environ.get("SPARKTF_WEBHDFS_URL")
    if given:  # the WebHDFS of fs.defaultFS's NameNode (of every NameNode if none is known)
        fs = default_fs()
        d = urllib.parse.urlsplit(fs) if fs else None
        if not d or d.scheme not in HADOOP_SCHEMES or (d.hostname, d.port) == (host, port):
            return [given]
    conf = os.environ.get("SPARKTF_NAMENODE_HTTP") or _hadoop_conf(
        "hdfs-site.xml", "dfs.namenode.http-address"
    )
    if conf:
        h, _, p = conf.rpartition(":")
        return [f"http://{host if h in ('', '0.0.0.0') else h}:{p}"]
    return [f"http://{host}:9870", f"http://{host}:50070"]


def _libhdfs_missing() -> str | None:
    """What libhdfs needs and is not there (None when all seems present)."""
    d = os.environ.get("ARROW_LIBHDFS_DIR") or (
        os.environ.get("HADOOP_HOME") and os.path.join(os.environ["HADOOP_HOME"], "lib", "native")
    )
    if not d or not os.path.exists(os.path.join(d, "libhdfs.so")):
        return (
            "no libhdfs.so (set ARROW_LIBHDFS_DIR to the directory that holds it, or HADOOP_HOME)"
        )
    if "hadoop-common" not in os.environ.get("CLASSPATH", ""):
        return "no Hadoop jars on CLASSPATH (set CLASSPATH=$(hadoop classpath --glob))"
    if not os.environ.get("JAVA_HOME"):  # pyarrow finds libjvm through it: take java's
        java = shutil.which("java")
        if not java:
            return "no JAVA_HOME and no java on PATH (libhdfs runs a JVM)"
        os.environ["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    return None


def backend(path: str) -> _Backend:
    """The backend for ``path``'s NameNode, chosen (and connected) on first use."""
    scheme, host, port, _ = _split(path)
    key = (host, port)
    with _BACKENDS_LOCK:
        if key in _BACKENDS:
            return _BACKENDS[key]
        forced = os.environ.get("SPARKTF_HDFS_BACKEND")
        if forced not in (None, "", "libhdfs", "webhdfs"):
            raise HadoopFSError(f"SPARKTF_HDFS_BACKEND={forced!r}: use libhdfs or webhdfs")
        tried = []
        if scheme != "webhdfs" and forced in (None, "", "libhdfs"):
            missing = _libhdfs_missing()
            if missing:
                tried.append(f"libhdfs: {missing}")
            else:
                try:
                    _BACKENDS[key] = _Libhdfs(host, port)
                    return _BACKENDS[key]
                except Exception as exc:
                    tried.append(f"libhdfs: {_cause(exc)}")
        if forced in (None, "", "webhdfs"):
            urls = (
                [f"http://{host}:{port}"]
                if scheme == "webhdfs" and port
                else _webhdfs_urls(host, port)
            )
            for url in urls:
                try:
                    _BACKENDS[key] = _WebHDFS(url)
                    return _BACKENDS[key]
                except ImportError:
                    tried.append("webhdfs: the hdfs package is not installed (pip install hdfs)")
                    break
                except Exception as exc:
                    tried.append(f"webhdfs at {url}: {_cause(exc)}")
        raise HadoopFSError(
            f"{path}: cannot reach HDFS at {host}:{port or ''}{_probe(host, port or 8020)}; "
            "tried "
            + "; ".join(tried)
            + ". Check that the NameNode runs and the address is right; for libhdfs set "
            "ARROW_LIBHDFS_DIR and CLASSPATH=$(hadoop classpath --glob), for WebHDFS "
            "SPARKTF_WEBHDFS_URL=http://namenode:port"
        )


def _probe(host: str, port: int) -> str:
    """Why a NameNode's RPC port does not serve, as a plain TCP connect sees it ("" if it
    accepts connections)."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=3):
            return ""
    except ConnectionRefusedError:
        return " (connection refused: is the NameNode running, and is the port right?)"
    except TimeoutError:
        return " (no answer within 3 s)"
    except OSError as exc:
        return f" ({exc})"


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    for line in text:  # libhdfs puts the Java exception's message on a later line
        if "Exception:" in line or "refused" in line.lower():
            first = line.strip()
            break
    return f"{type(exc).__name__}: {first[:300]}"


def _call(path: str, what: str, fn, *args):
    """Run a backend call; any failure is a HadoopFSError naming the path and the cause."""
    try:
        return fn(*args)
    except HadoopFSError:
        raise
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        low = text.lower()
        if "permission" in low or "accesscontrol" in low:
            cause = "permission denied"
        elif (
            "filenotfound" in low
            or "not found" in low
            or "does not exist" in low
            or "no such file" in low
        ):
            cause = "no such file or directory"
        elif "refused" in low or "timed out" in low or "timeout" in low:
            cause = "the NameNode or a DataNode did not answer"
        else:
            cause = "failed"
        raise HadoopFSError(f"{path}: {what} {cause} ({_cause(exc)})") from exc


def _resolve(path: str) -> tuple[_Backend, str]:
    """The backend of a Hadoop path, and the path on its file system."""
    return backend(path), _split(path)[3]


def _local(path: str) -> str:
    return urllib.parse.urlsplit(path).path if path.startswith("file:") else path


# --------------------------------------------------------------------- the public calls
def exists(path: str) -> bool:
    path = _fspath(path)
    if not is_hadoop(path):
        return os.path.exists(_local(path))
    b, p = _resolve(path)
    return _call(path, "status", b.info, p)[0] is not None


def stat(path: str) -> tuple[str, int, int] | None:
    """(``"file"`` or ``"dir"``, size in bytes, modification time in nanoseconds) of ``path``,
    or None if nothing is there. HDFS keeps modification times in milliseconds (WebHDFS gives
    them so); libhdfs gives whole seconds."""
    path = _fspath(path)
    if not is_hadoop(path):
        try:
            st = os.stat(_local(path))
        except (FileNotFoundError, NotADirectoryError):  # (as os.path.exists says False)
            return None
        kind = "dir" if os.path.isdir(_local(path)) else "file"
        return kind, st.st_size, st.st_mtime_ns
    b, p = _resolve(path)
    return _call(path, "status", b.stat, p)


def isdir(path: str) -> bool:
    path = _fspath(path)
    if not is_hadoop(path):
        return os.path.isdir(_local(path))
    b, p = _resolve(path)
    return _call(path, "status", b.info, p)[0] == "dir"


def listdir(path: str) -> list[str]:
    """Names in the directory ``path``, sorted."""
    path = _fspath(path)
    if not is_hadoop(path):
        return sorted(os.listdir(_local(path)))
    return [name for name, _, _ in _scan(path)]


def _scan(path: str) -> list[tuple[str, str | None, int]]:
    """(name, kind, size) of each entry of the Hadoop directory ``path``."""
    b, p = _resolve(path)
    kind, _ = _call(path, "status", b.info, p)
    if kind is None:
        raise HadoopFSError(f"{path}: list failed: no such file or directory")
    if kind == "file":
        raise HadoopFSError(f"{path}: list failed: a file, not a directory")
    return _call(path, "list", b.scan, p)


def list_files(path: str) -> list[str]:
    """Every file under the directory ``path`` (recursively), as full paths, sorted; hidden
    and underscore names (``_SUCCESS``, ``.crc``) and files in flight are left out."""
    path = _fspath(path)
    skip = (".", "_")
    if not is_hadoop(path):
        root = _local(path)
        out = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(skip)]
            out += [
                os.path.join(d, f) for f in files if not f.startswith(skip) and _TMP_MARK not in f
            ]
        return sorted(out)
    out = []
    for name, kind, _ in _scan(path):
        if name.startswith(skip) or _TMP_MARK in name:
            continue
        child = path.rstrip("/") + "/" + name
        out += list_files(child) if kind == "dir" else [child]
    return sorted(out)


def makedirs(path: str) -> None:
    path = _fspath(path)
    if not is_hadoop(path):
        os.makedirs(_local(path), exist_ok=True)
        return
    b, p = _resolve(path)
    _call(path, "mkdir", b.makedirs, p)


def delete(path: str, recursive: bool = False) -> None:
    """Remove a file, or a directory (with ``recursive`` when it is not empty); nothing if
    it does not exist."""
    path = _fspath(path)
    if not is_hadoop(path):
        p = _local(path)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p) if recursive else os.rmdir(p)
        elif os.path.lexists(p):
            os.unlink(p)
        return
    b, p = _resolve(path)
    _call(path, "delete", b.delete, p, recursive)


def rename(src: str, dst: str) -> None:
    src, dst = _fspath(src, "src"), _fspath(dst, "dst")
    if not is_hadoop(src):
        os.rename(_local(src), _local(dst))
        return
    b = backend(src)
    _call(src, f"rename to {dst}", b.rename, _split(src)[3], _split(dst)[3])


@contextlib.contextmanager
def open(path: str, mode: str = "rb") -> Iterator:
    """A binary file: ``rb`` streams it; ``wb`` writes a local temporary file and puts it in
    place atomically when the block ends without an error."""
    path = _fspath(path)
    if mode not in ("rb", "wb"):
        raise ValueError(f"sparktf.fs.open supports 'rb' and 'wb', not {mode!r}")
    if not is_hadoop(path):
        if mode == "rb":
            with builtins.open(_local(path), "rb") as f:
                yield f
        else:
            with _atomic_local_file(_local(path)) as f:
                yield f
        return
    b, p = _resolve(path)
    if mode == "rb":
        kind, _ = _call(path, "status", b.info, p)
        if kind == "dir":
            raise HadoopFSError(f"{path}: open failed: a directory, not a file")
        # (libhdfs reports a file it may not see as missing: the open says which it is)
        f = _call(path, "open", b.open_read, p)
        try:
            yield f
        except Exception as exc:
            if isinstance(exc, OSError) and not isinstance(exc, HadoopFSError):
                raise HadoopFSError(f"{path}: read failed ({_cause(exc)})") from exc
            raise
        finally:
            f.close()
        return
    with tempfile.TemporaryFile() as tmp:
        yield tmp
        tmp.seek(0)
        _put_file(path, tmp)


@contextlib.contextmanager
def _atomic_local_file(path: str):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + _TMP_MARK, dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _sibling_tmp(path: str, suffix: str | None = None) -> str:
    return path.rstrip("/") + (suffix or _TMP_MARK + uuid.uuid4().hex[:12])


def _swap_in(path: str, tmp: str, target: str, exists, rename, remove) -> None:
    """Rename ``tmp`` to ``target`` (of ``path``), replacing what is there, and never lose
    both: the old one is renamed aside (under a temporary name, which listings skip), the new
    one in, and only then is the old one removed; if the new one cannot be renamed in, the
    old one is renamed back and the rename's error raised."""
    if not exists(target):
        rename(tmp, target)
        return
    suffix = _TMP_MARK + "old_" + uuid.uuid4().hex[:12]
    aside = _sibling_tmp(target, suffix)
    rename(target, aside)
    try:
        rename(tmp, target)
    except BaseException as exc:
        try:
            rename(aside, target)
        except BaseException:
            kept = _sibling_tmp(path, suffix)
            raise HadoopFSError(
                f"{path}: the new version could not be renamed into place ({_cause(exc)}), "
                f"nor could what was there be put back: what was there is kept at {kept}; "
                f"rename it to {path} to restore it"
            ) from exc
        raise
    with contextlib.suppress(Exception):  # (a leftover is skipped by listings)
        remove(aside)


def _remove_local(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _put_atomically(path: str, write) -> None:
    """``write(backend, tmp)`` under a temporary name beside ``path``, then rename that into
    place, replacing what was there (:func:`_swap_in`); the temporary is removed if anything
    fails."""
    b, p = _resolve(path)
    tmp = _sibling_tmp(p)
    _call(path, "mkdir", b.makedirs, os.path.dirname(p.rstrip("/")) or "/")
    try:
        write(b, tmp)
        _swap_in(
            path,
            tmp,
            p,
            exists=lambda x: _call(path, "status", b.info, x)[0] is not None,
            rename=lambda src, dst: _call(path, "rename", b.rename, src, dst),
            remove=lambda x: b.delete(x, True),
        )
    except BaseException:
        with contextlib.suppress(Exception):
            b.delete(tmp, True)
        raise


def _put_file(path: str, f) -> None:
    """Write the readable file ``f`` to ``path``, atomically."""
    _put_atomically(path, lambda b, tmp: _call(path, "write", b.write_from, tmp, f))


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def upload(local: str, remote: str) -> None:
    """Copy a local file or directory to ``remote`` (local or Hadoop), replacing what is there,
    atomically: it is written under a temporary name beside ``remote`` and renamed."""
    local, remote = _local(_fspath(local, "local")), _fspath(remote, "remote")
    if not os.path.exists(local):
        raise HadoopFSError(f"{local}: upload failed: no such file or directory")
    if not is_hadoop(remote):
        _upload_local(local, remote)
        return
    if not os.path.isdir(local):
        with builtins.open(local, "rb") as f:
            _put_file(remote, f)
        return
    _put_atomically(remote, lambda b, tmp: _upload_tree(b, remote, local, tmp))


def _upload_local(local: str, remote: str) -> None:
    target = _local(remote)
    tmp = _sibling_tmp(target)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    try:
        (shutil.copytree if os.path.isdir(local) else shutil.copy2)(local, tmp)
        if os.path.isdir(tmp) or (os.path.isdir(target) and not os.path.islink(target)):
            _swap_in(
                remote, tmp, target, exists=os.path.lexists, rename=os.rename, remove=_remove_local
            )
        else:
            os.replace(tmp, target)  # a file over a file (or nothing): one atomic rename
    except BaseException:
        with contextlib.suppress(OSError):
            _remove_local(tmp)
        raise


def _upload_tree(b: _Backend, remote: str, local: str, target: str) -> None:
    _call(remote, "mkdir", b.makedirs, target)
    for name in sorted(os.listdir(local)):
        src, dst = os.path.join(local, name), target.rstrip("/") + "/" + name
        if os.path.isdir(src):
            _upload_tree(b, remote, src, dst)
        else:
            with builtins.open(src, "rb") as f:
                _call(remote, "write", b.write_from, dst, f)


def download(remote: str, local: str) -> None:
    """Copy a file or directory at ``remote`` to the local path ``local`` (replacing it)."""
    remote, local = _fspath(remote, "remote"), _local(_fspath(local, "local"))
    if not is_hadoop(remote):
        src = _local(remote)
        if os.path.isdir(src):
            shutil.copytree(src, local, dirs_exist_ok=True)
        else:
            shutil.copy2(src, local)
        return
    b, p = _resolve(remote)
    kind, _ = _call(remote, "status", b.info, p)
    if kind is None:
        raise HadoopFSError(f"{remote}: download failed: no such file or directory")
    if kind == "file":
        _download_file(b, remote, p, local)
        return
    for name, _, _ in _call(remote, "list", b.scan, p):
        download(remote.rstrip("/") + "/" + name, os.path.join(local, name))
    os.makedirs(local, exist_ok=True)


def _download_file(b: _Backend, remote: str, p: str, local: str) -> None:
    with _atomic_local_file(local) as out:
        f = _call(remote, "open", b.open_read, p)
        try:
            shutil.copyfileobj(f, out, 4 << 20)
        except OSError as exc:
            raise HadoopFSError(f"{remote}: read failed ({_cause(exc)})") from exc
        finally:
            f.close()


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
            raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
        if interval is not None and interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
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

    def push(self) -> None:
        with self._lock:
            local_files = {}
            for root, _, files in os.walk(self.local):
                for name in files:
                    full = os.path.join(root, name)
                    st = os.stat(full)
                    local_files[os.path.relpath(full, self.local)] = (st.st_size, st.st_mtime_ns)
            for rel in self._ordered(local_files):
                if self._seen.get(rel) != local_files[rel]:
                    with builtins.open(os.path.join(self.local, rel), "rb") as f:
                        _put_file(self._remote(rel), f)
                    self._seen[rel] = local_files[rel]
            for rel in sorted(set(self._seen) - set(local_files)):
                delete(self._remote(rel))
                del self._seen[rel]

    def pull(self) -> None:
        with self._lock:
            if not exists(self.remote):
                return
            remote_files = dict(self._walk_remote(""))
            b = backend(self.remote)
            for rel in self._ordered(remote_files):
                if self._seen.get(rel) != remote_files[rel]:
                    target = os.path.join(self.local, rel)
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


def keras_sync_callback(synced: SyncedDir):
    """A tf-keras callback that calls ``synced.sync()`` after every epoch (so the epoch's
    checkpoint and logs are on HDFS before the next epoch starts)."""
    import tensorflow as tf

    class SyncAfterEpoch(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            synced.sync()

    return SyncAfterEpoch()


__all__ = [
    "HadoopFSError",
    "SyncedDir",
    "absolute_path",
    "backend",
    "default_fs",
    "delete",
    "download",
    "exists",
    "export_dir",
    "is_hadoop",
    "isdir",
    "keras_sync_callback",
    "list_files",
    "listdir",
    "makedirs",
    "open",
    "read_bytes",
    "rename",
    "stat",
    "upload",
    "write_bytes",
]
