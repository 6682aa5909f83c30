"""Hadoop delegation tokens handed to a process of a secure YARN (``HADOOP_TOKEN_FILE_LOCATION``,
which the NodeManager sets in every container): the HDFS token, for WebHDFS's ``delegation``
parameter. Common: runs wherever sparktf.fs runs (nodes, tasks, a cluster-mode driver).
"""

from __future__ import annotations

import base64
import os

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
