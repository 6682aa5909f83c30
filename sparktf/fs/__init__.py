"""Hadoop paths (``hdfs://``, ``viewfs://``) from the driver, the executors and the TF nodes.

TensorFlow 2.21 has no ``hdfs://`` file system (and tensorflow-io does not load in it), so a
checkpoint, a SavedModel or a TensorBoard log meant for HDFS is written to a local directory
and copied with this module. Every function takes local paths too, so the same code runs with
``--model-dir /tmp/model`` and ``--model-dir hdfs://nn/model``.

Two ways to reach HDFS; the first that works is used, per NameNode:

- **libhdfs**: pyarrow's ``HadoopFileSystem``. Needs ``libhdfs.so`` (``ARROW_LIBHDFS_DIR``, or
  ``$HADOOP_HOME/lib/native``), a JVM (``JAVA_HOME``) and the Hadoop jars on ``CLASSPATH`` as
  explicit paths (``CLASSPATH=$(hadoop classpath --glob)``): what the hosts of a YARN cluster have.
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

The package's modules: :mod:`~sparktf.fs.paths` (path rules), :mod:`~sparktf.fs.backends`
(libhdfs, WebHDFS), :mod:`~sparktf.fs.files` (the file calls), :mod:`~sparktf.fs.synced`
(mirrored directories). Use them through this package: ``sparktf.fs.exists(...)``.

Imports pyarrow or hdfs only when a Hadoop path is used; never tensorflow or pyspark.

Modules:

- ``backends``: The two ways to reach a NameNode (libhdfs, WebHDFS), chosen and cached per NameNode
- ``files``: The file calls (exists, list, read, write, rename, upload, download) on any path
- ``login``: The driver's own Kerberos login from the keytab it was submitted with
- ``paths``: Hadoop paths as text: which are Hadoop's, the default file system, absolute paths
- ``synced``: Local directories mirrored to Hadoop paths
- ``tokens``: Hadoop delegation tokens handed to a process of a secure YARN
"""

from __future__ import annotations

# (_BACKENDS and _split: the tests' conftest clears the cache and splits paths)
from sparktf.fs.backends import _BACKENDS, backend  # noqa: F401
from sparktf.fs.files import (
    delete,
    download,
    exists,
    isdir,
    list_files,
    listdir,
    makedirs,
    open,
    read_bytes,
    rename,
    stat,
    upload,
    write_bytes,
)
from sparktf.fs.paths import (
    CONNECT_TIMEOUT,
    HADOOP_SCHEMES,
    HadoopFSError,
    _split,  # noqa: F401
    absolute_path,
    default_fs,
    hadoop_user,
    is_hadoop,
    working_dir,
)
from sparktf.fs.synced import SyncedDir, export_dir, keras_sync_callback

# Its public name, as tracebacks, pickles and the errors reference show it.
HadoopFSError.__module__ = __name__

__all__ = [
    "CONNECT_TIMEOUT",
    "HADOOP_SCHEMES",
    "hadoop_user",
    "working_dir",
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
