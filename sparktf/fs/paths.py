"""Hadoop paths as text: which paths are Hadoop's, the default file system, absolute paths, and the
error every call raises.
"""

from __future__ import annotations

import getpass
import os
import urllib.parse
import xml.etree.ElementTree as ET

from sparktf.errors import ConfigTypeError, SparkTFError

HADOOP_SCHEMES = ("hdfs", "viewfs", "webhdfs")
#: Seconds to wait for a NameNode or WebHDFS to answer before the path is an error.
CONNECT_TIMEOUT = 10.0
_TMP_MARK = "._sparktf_tmp_"


class HadoopFSError(SparkTFError, OSError):
    """A Hadoop path could not be used; the message names the path and the cause."""


# ------------------------------------------------------------------------------- paths
def is_hadoop(path: object) -> bool:
    """True for ``hdfs://``, ``viewfs://`` and ``webhdfs://`` paths."""
    return isinstance(path, str) and urllib.parse.urlsplit(path).scheme in HADOOP_SCHEMES


def _fspath(path, name: str = "path") -> str:
    """A path argument as a str: a str, or an ``os.PathLike`` (a local path)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise ConfigTypeError(
            f"sparktf.fs: {name} must be a non-empty str or os.PathLike, got {path!r}"
        )
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


#: The kinds of token a NameNode's WebHDFS takes as ``delegation`` (sparktf.fs.tokens)
HDFS_TOKEN_KINDS = ("HDFS_DELEGATION_TOKEN", "WEBHDFS delegation", "SWEBHDFS delegation")


def uses_kerberos() -> bool:
    """Whether Hadoop is reached with Kerberos here: the Hadoop configuration says
    ``hadoop.security.authentication=kerberos``, or this process was handed an HDFS delegation
    token (``HADOOP_TOKEN_FILE_LOCATION``: a YARN container of a secure cluster). Every YARN
    container has a token file (its AM-RM token, at least): only an HDFS token counts."""
    auth = _hadoop_conf("core-site.xml", "hadoop.security.authentication") or ""
    return auth.lower() == "kerberos" or _has_hdfs_token(
        os.environ.get("HADOOP_TOKEN_FILE_LOCATION")
    )


def _has_hdfs_token(path: str | None) -> bool:
    """Whether the token storage file at ``path`` holds an HDFS delegation token (its kind is
    written as text in every format Hadoop writes)."""
    if not path:
        return False
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return any(kind.encode() in data for kind in HDFS_TOKEN_KINDS)


def libhdfs_user() -> str | None:
    """The user libhdfs connects as: none with Kerberos (libhdfs then uses the login's ticket
    cache, ``KRB5CCNAME``, or the container's delegation tokens; a named user would be a
    SIMPLE user without either, refused by a secure NameNode), else :func:`hadoop_user`."""
    return None if uses_kerberos() else hadoop_user()


def kerberos_hint() -> str:
    """What to do when a secure Hadoop refused this process ("" without Kerberos)."""
    if not uses_kerberos():
        return ""
    return (
        " Hadoop here uses Kerberos (hadoop.security.authentication=kerberos): get a ticket "
        "first (kinit PRINCIPAL, or kinit -kt KEYTAB PRINCIPAL; KRB5CCNAME names its cache), "
        "or submit with spark-submit --principal PRINCIPAL --keytab KEYTAB so that the "
        "executors get delegation tokens."
    )


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


def _local(path: str) -> str:
    return urllib.parse.urlsplit(path).path if path.startswith("file:") else path
