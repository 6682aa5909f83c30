"""The two ways to reach a NameNode (libhdfs, WebHDFS), chosen and cached per NameNode, and backend
failures turned into :class:`HadoopFSError`.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import threading
import urllib.parse
from typing import TYPE_CHECKING, BinaryIO

from sparktf.fs import login, tokens
from sparktf.fs.paths import (
    CONNECT_TIMEOUT,
    HADOOP_SCHEMES,
    HadoopFSError,
    _hadoop_conf,
    _split,
    default_fs,
    hadoop_user,
    kerberos_hint,
    libhdfs_user,
    nameservice_http,
    uses_kerberos,
    viewfs_target,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import hdfs
    from typing_extensions import Buffer


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

    def open_read(self, path: str) -> BinaryIO | io.RawIOBase:
        raise NotImplementedError

    def write_from(self, path: str, f: BinaryIO) -> None:
        """Write the readable binary file ``f`` to ``path`` (overwriting)."""
        raise NotImplementedError


class _Libhdfs(_Backend):
    name = "libhdfs"

    def __init__(self, host: str, port: int | None) -> None:
        """``host``: a NameNode's host, a nameservice (``port`` None: Hadoop's client fails
        over between its NameNodes), or ``viewfs://TABLE`` (Hadoop's client reads the mount
        table)."""
        import pyarrow.fs as pafs

        self._pafs = pafs
        logical = port is None and ("://" in host or nameservice_http(host) is not None)
        self._fs = pafs.HadoopFileSystem(
            host,
            0 if logical else port or 8020,  # (0: libhdfs puts no port in the URI)
            user=libhdfs_user(),
            extra_conf={
                "ipc.client.connect.max.retries": "1",
                "ipc.client.connect.max.retries.on.timeouts": "1",
                "ipc.client.connect.timeout": str(int(CONNECT_TIMEOUT * 1000)),
            },
        )
        # Fail here, not at the first real call (a file's status reads as "not found" when
        # the NameNode is down; a listing raises). Not for viewfs: its "/" is the mount
        # table's own directory, whose status Hadoop's ViewFileSystem makes with the user's
        # primary group on this host, and a Kerberos principal often has no account here
        # ("There is no primary group for UGI ..."); its mounts reach their NameNodes.
        if "://" not in host:
            self._fs.get_file_info(pafs.FileSelector("/"))

    def info(self, path: str) -> tuple[str | None, int]:
        i = self._fs.get_file_info(path)
        if i.type == self._pafs.FileType.NotFound:
            return None, 0
        return ("dir" if i.type == self._pafs.FileType.Directory else "file"), i.size or 0

    def stat(self, path: str) -> tuple[str, int, int] | None:
        i = self._fs.get_file_info(path)
        if i.type == self._pafs.FileType.NotFound:
            return None
        kind = "dir" if i.type == self._pafs.FileType.Directory else "file"
        return kind, i.size or 0, i.mtime_ns or 0

    def scan(self, path: str) -> list[tuple[str, str | None, int]]:
        kinds = {self._pafs.FileType.Directory: "dir", self._pafs.FileType.File: "file"}
        return sorted(
            (os.path.basename(i.path.rstrip("/")), kinds.get(i.type), i.size or 0)
            for i in self._fs.get_file_info(self._pafs.FileSelector(path))
        )

    def makedirs(self, path: str) -> None:
        self._fs.create_dir(path, recursive=True)

    def delete(self, path: str, recursive: bool) -> None:
        kind, _ = self.info(path)
        if kind == "dir":
            if not recursive and self.scan(path):
                raise OSError(f"directory not empty: {path}")
            self._fs.delete_dir(path)
        elif kind == "file":
            self._fs.delete_file(path)

    def rename(self, src: str, dst: str) -> None:
        self._fs.move(src, dst)

    def open_read(self, path: str) -> BinaryIO | io.RawIOBase:
        return self._fs.open_input_stream(path)

    def write_from(self, path: str, f: BinaryIO) -> None:
        with self._fs.open_output_stream(path) as out:
            shutil.copyfileobj(f, out, 4 << 20)


class _WebHDFS(_Backend):
    name = "webhdfs"

    def __init__(self, url: str, namenode: tuple[str, int | None] | None = None) -> None:
        self.url = url
        self._namenode = namenode
        self._source = tokens.source()
        self._made = webhdfs_client(url, namenode)
        self._made.status("/")  # fail here, not at the first real call

    @property
    def _client(self) -> hdfs.Client:
        """The ``hdfs`` client, made again when this process holds other delegation tokens
        than it was made with: a running job's TF nodes are handed the tokens Spark obtains
        as the old ones near their end (:func:`sparktf.fs.tokens.install`)."""
        source = tokens.source()
        if source != self._source:
            self._made, self._source = webhdfs_client(self.url, self._namenode), source
        return self._made

    def info(self, path: str) -> tuple[str | None, int]:
        st = self._client.status(path, strict=False)
        if st is None:
            return None, 0
        return ("dir" if st["type"] == "DIRECTORY" else "file"), st.get("length", 0)

    def stat(self, path: str) -> tuple[str, int, int] | None:
        st = self._client.status(path, strict=False)
        if st is None:
            return None
        return (
            ("dir" if st["type"] == "DIRECTORY" else "file"),
            st.get("length", 0),
            int(st.get("modificationTime", 0)) * 1_000_000,
        )  # (milliseconds)

    def scan(self, path: str) -> list[tuple[str, str | None, int]]:
        return sorted(
            (name, "dir" if st["type"] == "DIRECTORY" else "file", st.get("length", 0))
            for name, st in self._client.list(path, status=True)
        )

    def makedirs(self, path: str) -> None:
        self._client.makedirs(path)

    def delete(self, path: str, recursive: bool) -> None:
        self._client.delete(path, recursive=recursive)

    def rename(self, src: str, dst: str) -> None:
        self._client.rename(src, dst)

    def open_read(self, path: str) -> BinaryIO | io.RawIOBase:
        return _WebHDFSReader(self._client, path)

    def write_from(self, path: str, f: BinaryIO) -> None:
        self._client.write(path, data=f, overwrite=True)


def webhdfs_client(url: str, namenode: tuple[str, int | None] | None = None) -> hdfs.Client:
    """The ``hdfs`` package's client for a WebHDFS at ``url`` (of the NameNode whose RPC
    address is ``namenode``): with Kerberos, a ``TokenClient`` where this process was handed
    an HDFS delegation token (a YARN container: :mod:`sparktf.fs.tokens`), else its
    ``KerberosClient`` (SPNEGO with the login's ticket; it needs ``requests-kerberos``);
    without Kerberos an ``InsecureClient`` as :func:`hadoop_user`."""
    import hdfs

    timeout = (CONNECT_TIMEOUT, 120)
    if not uses_kerberos():
        return hdfs.InsecureClient(url, user=hadoop_user(), timeout=timeout)
    if namenode is None:
        u = urllib.parse.urlsplit(url)
        namenode = (u.hostname or "", None)
    token = tokens.hdfs_delegation_token(*namenode)
    if token:
        return hdfs.TokenClient(url, token, timeout=timeout)
    try:
        from hdfs.ext.kerberos import KerberosClient
    except ImportError as exc:
        raise HadoopFSError(
            f"{url}: WebHDFS on a Kerberos cluster needs SPNEGO, from the requests-kerberos "
            f"package ({exc}): pip install requests-kerberos (it builds gssapi against MIT "
            "Kerberos: apt-get install libkrb5-dev gcc), or use the libhdfs backend "
            "(SPARKTF_HDFS_BACKEND=libhdfs)"
        ) from exc
    return KerberosClient(url, timeout=timeout)


#: DataNodes a WebHDFS read skips before it gives up (Hadoop's own WebHDFS client retries
#: the same way, naming them in ``excludedatanodes``).
MAX_EXCLUDED = 3


class _WebHDFSReader(io.RawIOBase):
    """A WebHDFS file as a readable stream. The NameNode redirects a read to a DataNode
    holding the file, and knows no better while a DataNode it has not yet declared dead
    (minutes) is out of reach: a connection to the DataNode that fails is asked again with
    that DataNode in ``excludedatanodes``, so the NameNode picks another replica."""

    def __init__(self, client: hdfs.Client, path: str) -> None:
        import requests

        excluded: list[str] = []
        while True:
            params = {"excludedatanodes": ",".join(excluded)} if excluded else {}
            try:  # (the hdfs package's read() takes no extra parameter: its OPEN request)
                self._resp = client._open(path, offset=0, **params)
                break
            except requests.exceptions.ConnectionError as exc:
                node = _datanode(exc, client.url)
                if node is None or node in excluded or len(excluded) >= MAX_EXCLUDED:
                    raise
                log.warning(
                    "sparktf: WebHDFS read of %s: DataNode %s did not answer (%s); asking the "
                    "NameNode for another replica",
                    path,
                    node,
                    type(exc).__name__,
                )
                excluded.append(node)
        self._raw = self._resp.raw

    def readable(self) -> bool:
        return True

    def readinto(self, b: Buffer) -> int:
        view = memoryview(b)
        data = self._raw.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._resp.close()
        super().close()


def _datanode(exc: BaseException, namenode_url: str) -> str | None:
    """The host of the DataNode that a failed WebHDFS request was redirected to (None: it
    was the NameNode that failed)."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    if not url:
        return None
    host = urllib.parse.urlsplit(url).hostname
    namenodes = {urllib.parse.urlsplit(u).hostname for u in namenode_url.split(";")}
    return None if not host or host in namenodes else host


_BACKENDS: dict[tuple[str, int | None], _Backend] = {}
_BACKENDS_LOCK = threading.Lock()


def _webhdfs_urls(host: str, port: int | None) -> list[str]:
    given = os.environ.get("SPARKTF_WEBHDFS_URL")
    if given:  # the WebHDFS of fs.defaultFS's NameNode (of every NameNode if none is known)
        fs = default_fs()
        d = urllib.parse.urlsplit(fs) if fs else None
        if not d or d.scheme not in HADOOP_SCHEMES or (d.hostname, d.port) == (host, port):
            return [given]
    ha = nameservice_http(host) if port is None else None
    if ha:  # one client for them all: the hdfs package fails over between its URLs
        return [";".join(f"http://{a}" for a in ha)]
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
    login.ensure_ticket()  # (the driver submitted with --keytab and no ticket of its own)
    scheme, host, port, _ = _split(path)
    if scheme == "viewfs":  # (only Hadoop's own client, libhdfs, takes it as it is)
        host, port = f"viewfs://{host}", None
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
        if forced in (None, "", "webhdfs") and scheme != "viewfs":
            urls = (
                [f"http://{host}:{port}"]
                if scheme == "webhdfs" and port
                else _webhdfs_urls(host, port)
            )
            for url in urls:
                try:
                    _BACKENDS[key] = _WebHDFS(url, key)
                    return _BACKENDS[key]
                except ImportError:
                    tried.append("webhdfs: the hdfs package is not installed (pip install hdfs)")
                    break
                except HadoopFSError as exc:  # (no SPNEGO client: the same for every URL)
                    tried.append(f"webhdfs: {exc}")
                    break
                except Exception as exc:
                    tried.append(f"webhdfs at {url}: {_cause(exc)}")
        raise HadoopFSError(
            f"{path}: cannot reach HDFS at {host}{':' + str(port) if port else ''}"
            f"{_probe(host, port or 8020) if port or '://' not in host else ''}; "
            "tried "
            + "; ".join(tried)
            + ". Check that the NameNode runs and the address is right; for libhdfs set "
            "ARROW_LIBHDFS_DIR and CLASSPATH=$(hadoop classpath --glob), for WebHDFS "
            "SPARKTF_WEBHDFS_URL=http://namenode:port." + kerberos_hint()
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
    """The backend of a Hadoop path, and the path on its file system. A ``viewfs://`` path
    goes to Hadoop's own client (libhdfs) where it can, else to the ``hdfs://`` URI its mount
    table names (:func:`~sparktf.fs.paths.viewfs_target`)."""
    scheme, host, _, rest = _split(path)
    if scheme == "viewfs":
        forced = os.environ.get("SPARKTF_HDFS_BACKEND")
        if forced != "webhdfs" and (forced == "libhdfs" or _libhdfs_missing() is None):
            return backend(path), rest
        return _resolve(viewfs_target(path))
    return backend(path), rest
