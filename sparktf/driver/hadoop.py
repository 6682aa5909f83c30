"""What the driver knows of Hadoop (its file system, the NameNode's WebHDFS address, the
Spark user), handed to the nodes and executors as ``SPARKTF_*`` environment defaults."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext


def hadoop_env(sc: SparkContext) -> tuple[tuple[str, str], ...]:
    """What the driver knows of Hadoop, for sparktf.fs on the nodes and executors: its own
    ``SPARKTF_*`` HDFS settings, else its Hadoop configuration's fs.defaultFS (for
    ``ctx.absolute_path`` and ``hdfs:///...``) and the NameNode's WebHDFS address; and the
    Spark user as the HDFS user. A node's own environment wins over these."""
    out = {
        k: os.environ[k]
        for k in (
            "SPARKTF_DEFAULT_FS",
            "SPARKTF_WEBHDFS_URL",
            "SPARKTF_HDFS_BACKEND",
            "HADOOP_USER_NAME",
        )
        if os.environ.get(k)
    }
    try:
        conf = sc._jsc.hadoopConfiguration()
        for key, var in (
            ("fs.defaultFS", "SPARKTF_DEFAULT_FS"),
            ("dfs.namenode.http-address", "SPARKTF_NAMENODE_HTTP"),
        ):
            value = conf.get(key)
            if value and var not in out:
                out[var] = str(value)
        out.setdefault("HADOOP_USER_NAME", str(sc.sparkUser()))
    except Exception:
        pass
    out.setdefault("SPARKTF_WORKING_DIR", os.getcwd())  # relative local paths: the driver's
    return tuple(sorted(out.items()))
