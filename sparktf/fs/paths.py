"""Hadoop paths as text: which paths are Hadoop's, the default file system, absolute paths, and the
error every call raises.
"""

from __future__ import annotations

import getpass
import os
import urllib.parse
import xml.etree.ElementTree as ET
from xml.etree import ElementInclude

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
    ``hadoop.security.authentication=kerberos``; or, where there is no configuration, this
    process was handed an HDFS delegation token (``HADOOP_TOKEN_FILE_LOCATION``: a YARN
    container of a secure cluster). Every YARN container has a token file (its AM-RM token, at
    least): only an HDFS token counts. A configuration that says ``simple`` (or nothing) wins
    over a token: a spark-submit run with tokens of its own (a launcher in a container) ships
    them to its containers on a cluster without Kerberos too."""
    if _conf_dir("core-site.xml") is not None:  # the configuration decides (simple by default)
        auth = _hadoop_conf("core-site.xml", "hadoop.security.authentication") or "simple"
        return auth.lower() == "kerberos"
    return _has_hdfs_token(os.environ.get("HADOOP_TOKEN_FILE_LOCATION"))


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
    return hadoop_props(filename).get(key)


def hadoop_props(filename: str) -> dict[str, str]:
    """Every property of ``filename`` (``core-site.xml``, ``hdfs-site.xml``) in the Hadoop
    configuration directory (``HADOOP_CONF_DIR``, else ``$HADOOP_HOME/etc/hadoop``): name to
    value, empty values left out; {} where there is none. XInclude'd files (a mount table
    kept in its own file) are read too."""
    d = _conf_dir(filename)
    if d is not None:
        try:
            root = ET.parse(os.path.join(d, filename)).getroot()
            ElementInclude.include(root, base_url=os.path.join(d, filename))
        except (ET.ParseError, OSError, ElementInclude.FatalIncludeError):
            return {}
        props = {}
        for prop in root.iter("property"):
            name, value = prop.findtext("name"), (prop.findtext("value") or "").strip()
            if name and value:
                props[name.strip()] = value
        return props
    return {}


def _conf_dir(filename: str) -> str | None:
    """The Hadoop configuration directory that holds ``filename`` (``HADOOP_CONF_DIR``, else
    ``$HADOOP_HOME/etc/hadoop``), or None."""
    for d in (
        os.environ.get("HADOOP_CONF_DIR"),
        os.environ.get("HADOOP_HOME") and os.path.join(os.environ["HADOOP_HOME"], "etc", "hadoop"),
    ):
        if d and os.path.exists(os.path.join(d, filename)):
            return d
    return None


def nameservice_http(ns: str) -> list[str] | None:
    """The WebHDFS addresses (``host:port``) of the NameNodes of nameservice ``ns`` (an HA
    pair, or more), from hdfs-site.xml as Hadoop's client reads it: ``dfs.ha.namenodes.NS``
    and each ``dfs.namenode.http-address.NS.NN`` (``dfs.namenode.http-address.NS`` for a
    nameservice of one NameNode); None where ``ns`` is no nameservice there."""
    site = hadoop_props("hdfs-site.xml")
    names = site.get(f"dfs.ha.namenodes.{ns}")
    if names:
        keys = [f"dfs.namenode.http-address.{ns}.{n.strip()}" for n in names.split(",")]
    elif ns in [n.strip() for n in site.get("dfs.nameservices", "").split(",")]:
        keys = [f"dfs.namenode.http-address.{ns}"]
    else:
        return None
    found = [site[k] for k in keys if k in site]
    if not found:
        raise HadoopFSError(
            f"hdfs://{ns}: a nameservice in hdfs-site.xml without WebHDFS addresses: set "
            + ", ".join(keys)
            + " (or use the libhdfs backend, which needs only their RPC addresses)"
        )
    return found


def viewfs_target(path: str) -> str:
    """The ``hdfs://`` URI that the ``viewfs://`` path ``path`` stands for, from its mount
    table in core-site.xml (``fs.viewfs.mounttable.TABLE.link./SRC`` = target; the longest
    ``SRC`` that is a whole-component prefix of the path wins; ``linkFallback`` takes the
    rest), as Hadoop's ViewFileSystem resolves it. What sparktf's WebHDFS backend uses; the
    libhdfs backend leaves viewfs to Hadoop's own client."""
    u = urllib.parse.urlsplit(path)
    table = u.netloc or "default"
    prefix = f"fs.viewfs.mounttable.{table}."
    props = {
        k[len(prefix) :]: v
        for k, v in hadoop_props("core-site.xml").items()
        if k.startswith(prefix)
    }
    rest = u.path or "/"
    best = None
    for key, target in props.items():
        if not key.startswith("link."):
            continue
        src = "/" + key[len("link.") :].strip("/")
        if (rest == src or rest.startswith(src.rstrip("/") + "/")) and (
            best is None or len(src) > len(best[0])
        ):
            best = (src, target)
    if best is not None:
        src, target = best
        tail = rest[len(src) :] if src != "/" else rest
        return target.rstrip("/") + ("/" + tail.lstrip("/") if tail.strip("/") else "")
    fallback = props.get("linkFallback")
    if fallback:
        return fallback.rstrip("/") + rest
    raise HadoopFSError(
        f"{path}: no mount point of viewfs://{table}/ holds it (core-site.xml's "
        f"{prefix}link.* and {prefix}linkFallback, in HADOOP_CONF_DIR="
        f"{os.environ.get('HADOOP_CONF_DIR') or '(unset)'})"
    )


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
