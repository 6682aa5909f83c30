"""Hadoop delegation tokens handed to a process of a secure YARN (``HADOOP_TOKEN_FILE_LOCATION``,
which the NodeManager sets in every container): the HDFS token, for WebHDFS's ``delegation``
parameter. Common: runs wherever sparktf.fs runs (nodes, tasks, a cluster-mode driver).
"""

from __future__ import annotations

import base64
import os
import tempfile
import time

from sparktf.fs.paths import HDFS_TOKEN_KINDS as HDFS_KINDS
from sparktf.fs.paths import HadoopFSError

_MAGIC = b"HDTS"


def _vint(buf: bytes, pos: int) -> tuple[int, int]:
    """Hadoop's ``WritableUtils.readVLong`` at ``pos``: (value, next position)."""
    first = buf[pos] - 256 if buf[pos] > 127 else buf[pos]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = (-119 - first) if negative else (-111 - first)
    value = int.from_bytes(buf[pos + 1 : pos + size], "big")
    return (~value if negative else value), pos + size


def _field(buf: bytes, pos: int) -> tuple[bytes, int]:
    """A length-prefixed byte string (a ``Text`` or a token's identifier or password)."""
    n, pos = _vint(buf, pos)
    if n < 0 or pos + n > len(buf):
        raise HadoopFSError("a field runs past the end")
    return buf[pos : pos + n], pos + n


def read_tokens(data: bytes) -> list[tuple[str, str, bytes]]:
    """(kind, service, the token as Hadoop serializes it) of each token in a token storage
    file (Hadoop's ``Credentials``, the ``WRITABLE`` format that YARN and Spark write).

    Raises
    ------
    HadoopFSError
        Not such a file, or another format (Hadoop's protobuf one, version 1).
    """
    if data[:4] != _MAGIC or len(data) < 5:
        raise HadoopFSError("not a Hadoop token storage file (no HDTS header)")
    if data[4] != 0:
        raise HadoopFSError(f"token storage format version {data[4]} (only 0, WRITABLE, is read)")
    count, pos = _vint(data, 5)
    found = []
    for _ in range(count):
        _, pos = _field(data, pos)  # the alias
        start = pos
        for _ in range(2):  # identifier, password
            _, pos = _field(data, pos)
        kind, pos = _field(data, pos)
        service, pos = _field(data, pos)
        found.append((kind.decode(), service.decode(), data[start:pos]))
    return found


def url_string(raw: bytes) -> str:
    """A token as Hadoop's ``Token.encodeToUrlString`` writes it (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def hdfs_delegation_token(host: str, port: int | None) -> str | None:
    """This process's HDFS delegation token for the NameNode at ``host:port``, URL-encoded,
    from ``HADOOP_TOKEN_FILE_LOCATION``; None when there is no such file or token in it."""
    path = os.environ.get("HADOOP_TOKEN_FILE_LOCATION")
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            tokens = [t for t in read_tokens(f.read()) if t[0] in HDFS_KINDS]
    except (OSError, IndexError) as exc:  # (HadoopFSError is an OSError)
        raise HadoopFSError(
            f"HADOOP_TOKEN_FILE_LOCATION={path}: cannot read its delegation tokens ({exc}); "
            "use the libhdfs backend (SPARKTF_HDFS_BACKEND=libhdfs), which reads them itself"
        ) from exc
    for match in (
        lambda s: s == f"{host}:{port}" or (port is None and s == f"ha-hdfs:{host}"),
        lambda s: port is not None and s.endswith(f":{port}"),
        lambda s: len(tokens) == 1,
    ):
        for _, service, raw in tokens:
            if match(service):
                return url_string(raw)
    return None


#: The file a node keeps the tokens the driver relays in (in its private work directory).
RELAYED = "hadoop.tokens"


def install(data: bytes, directory: str) -> str:
    """Make ``data`` (Hadoop's token storage bytes, relayed by the driver:
    :mod:`sparktf.driver.credentials`) this process's delegation tokens: written to
    ``directory``/hadoop.tokens (0600, never through a symlink, replaced whole so that no
    reader sees half a file), which ``HADOOP_TOKEN_FILE_LOCATION`` then names. WebHDFS clients
    made after this, and those :func:`source` tells to remake themselves, use them; the JVM of
    libhdfs read its tokens once, when it started. Returns the file's path.

    Raises
    ------
    HadoopFSError
        ``data`` is not a token storage file (nothing is written).
    """
    read_tokens(data)  # (a relay that sends something else is a bug: fail before writing)
    path = os.path.join(directory, RELAYED)
    part = f"{path}.{os.getpid()}.part"
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(part, path)
    except BaseException:
        try:
            os.unlink(part)
        except OSError:
            pass
        raise
    if os.environ.get("HADOOP_TOKEN_FILE_LOCATION") != path:
        os.environ["HADOOP_TOKEN_FILE_LOCATION"] = path
    return path


def source() -> tuple | None:
    """Which tokens this process holds now: ``HADOOP_TOKEN_FILE_LOCATION`` and its file's
    identity (inode, size, modification time), or None without one. A WebHDFS client made
    with another source has older tokens than the process (:func:`install` replaced them)."""
    path = os.environ.get("HADOOP_TOKEN_FILE_LOCATION")
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return (path,)
    return (path, st.st_ino, st.st_size, st.st_mtime_ns)


def max_dates(data: bytes) -> list[int]:
    """The maximum dates (ms since the epoch) of the HDFS delegation tokens in a token storage
    file: past it a token is dead, whoever renews it (``dfs.namenode.delegation.token.
    max-lifetime`` after it was issued). Read from each token's identifier as Hadoop's
    ``AbstractDelegationTokenIdentifier`` writes it: a version byte, owner, renewer and real
    user, then the issue and maximum dates."""
    found = []
    for kind, _, raw in read_tokens(data):
        if kind not in HDFS_KINDS:
            continue
        ident, _ = _field(raw, 0)
        pos = 1
        for _ in range(3):
            _, pos = _field(ident, pos)
        _, pos = _vint(ident, pos)  # the issue date
        found.append(_vint(ident, pos)[0])
    return found


#: What :func:`adopt` installed in this process: (the tokens, their file).
_adopted: tuple[bytes, str] | None = None


def adopt(shipped: bytes | None, now_ms: int | None = None) -> bool:
    """An executor's Python worker (``sparktf.predict``'s scoring) reads HDFS with its
    container's tokens, which no one renews past their maximum date, on an application that
    may run longer (a notebook's): where every HDFS token of this process's file is past it,
    the tokens the driver ``shipped`` with the call (:mod:`sparktf.driver.credentials`, read
    as the call was made) become this process's (:func:`install`, in a private directory of
    its own). Tokens still alive are kept (the shipped ones may be older than they look: no
    one renews them either). Whether the shipped tokens are this process's now."""
    global _adopted
    if not shipped:
        return False
    if _adopted is not None and _adopted[0] == shipped:
        return os.environ.get("HADOOP_TOKEN_FILE_LOCATION") == _adopted[1]
    path = os.environ.get("HADOOP_TOKEN_FILE_LOCATION")
    if not path:
        return False
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        with open(path, "rb") as f:
            dates = max_dates(f.read())
    except (OSError, IndexError):
        return False
    if not dates or max(dates) > now_ms:
        return False
    # 0700, the worker's own, beside the container's file: YARN removes both with the container
    directory = tempfile.mkdtemp(prefix="sparktf-tokens-", dir=os.path.dirname(path) or None)
    _adopted = (shipped, install(shipped, directory))
    return True
