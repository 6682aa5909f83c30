"""Every ``SPARKTF_*`` environment variable, in one table: its name, who reads it, its default
and what it does.

The docs' reference page is generated from :data:`TABLE` (``bin/gen_docs.py``), and
``tests/unit/test_docs.py`` checks that the table names exactly the variables the code uses.
Pure data: imports nothing but the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Where a variable is read. ``node``: the TF process; ``task``: the Spark barrier task and
#: the supervisor it starts; ``executor``: Spark's Python workers (and their daemon);
#: ``any``: wherever :mod:`sparktf.fs` runs (driver, executors, nodes); ``bin``: the scripts
#: that run test clusters on this machine.
SIDES = ("node", "task", "executor", "any", "bin")


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: who reads it (``side``), its default, and what it does."""

    name: str
    side: str
    default: str
    doc: str


TABLE: tuple[EnvVar, ...] = (
    EnvVar(
        "SPARKTF_PRELOAD",
        "executor",
        "tensorflow",
        "modules Spark's Python daemon imports once per executor before forking workers "
        "(with spark.python.daemon.module=sparktf.daemon); comma-separated",
    ),
    EnvVar(
        "SPARKTF_DAEMON_VERBOSE",
        "executor",
        "unset",
        "1: the daemon prints each preload's seconds on stderr",
    ),
    EnvVar(
        "SPARKTF_DEFAULT_FS",
        "any",
        "fs.defaultFS of the Hadoop conf",
        "the default file system for sparktf.fs and ctx.absolute_path; the driver passes "
        "its own to the nodes",
    ),
    EnvVar(
        "SPARKTF_WEBHDFS_URL",
        "any",
        "from dfs.namenode.http-address",
        "the WebHDFS URL of the NameNode of fs.defaultFS (http://namenode:9870)",
    ),
    EnvVar(
        "SPARKTF_NAMENODE_HTTP",
        "any",
        "from hdfs-site.xml",
        "the NameNode's HTTP address (host:port); the driver sets it for the nodes from "
        "its dfs.namenode.http-address",
    ),
    EnvVar(
        "SPARKTF_HDFS_BACKEND",
        "any",
        "libhdfs, else webhdfs",
        "libhdfs or webhdfs: force the backend of sparktf.fs",
    ),
    EnvVar(
        "SPARKTF_WORKING_DIR",
        "any",
        "the current directory",
        "the directory relative local paths resolve against; the driver passes its own",
    ),
    EnvVar(
        "SPARKTF_NODE",
        "node",
        "set by sparktf",
        "the node's name (worker:1) in every node process; how its processes are found "
        "and stopped; run(env=...) may not set it",
    ),
    EnvVar(
        "SPARKTF_MAX_RESULT_MB",
        "node",
        "512",
        "the largest main_fn return value, pickled, in MiB (set with run(env=...))",
    ),
    EnvVar(
        "SPARKTF_SUPERVISOR_EXEC",
        "task",
        "unset",
        "1: start the supervisor as python -m sparktf.task.supervisor instead of forking "
        "it from the Spark Python worker",
    ),
    EnvVar(
        "SPARKTF_NODE_EXEC",
        "task",
        "unset",
        "1: start the TF process as python -m sparktf.node instead of forking it from the "
        "supervisor",
    ),
    EnvVar(
        "SPARKTF_FEED_SPARK_SOCKET",
        "task",
        "1",
        "0: the barrier task forwards the feed's frames itself instead of handing Spark's "
        "data socket to the TF process",
    ),
    EnvVar(
        "SPARKTF_TEST_HDFS",
        "bin",
        "set by bin/hdfs-test-cluster.sh start",
        "the test HDFS's URL (hdfs://127.0.0.1:PORT); tests/hadoop and benchmarks use it",
    ),
    EnvVar(
        "SPARKTF_HDFS_DIR",
        "bin",
        "/tmp/sparktf-hdfs-$UID",
        "the test HDFS's state: configuration, name and data directories, logs, PIDs",
    ),
    EnvVar(
        "SPARKTF_HADOOP_CACHE",
        "bin",
        "~/.cache/sparktf/hadoop-3.5.0",
        "where the test clusters' Hadoop jars and libhdfs.so are cached",
    ),
    EnvVar(
        "SPARKTF_HDFS_CACHE", "bin", "unset", "the older name of SPARKTF_HADOOP_CACHE, still read"
    ),
    EnvVar(
        "SPARKTF_TOKEN_LIFETIME",
        "bin",
        "1800",
        "start --kerberos: the delegation tokens' maximum lifetime (s; the renew interval is "
        "half of it), short so that a job outlives its tokens (the kerberos tier: 60)",
    ),
    EnvVar(
        "SPARKTF_CLOCK_SKEW",
        "bin",
        "300",
        "start --kerberos: the realm's allowed clock skew (s), within which an expired ticket "
        "is still accepted (the kerberos tier: 10, so that a ticket is refused seconds after "
        "its end)",
    ),
    EnvVar(
        "SPARKTF_YARN_DIR",
        "bin",
        "/tmp/sparktf-yarn-$UID",
        "the test YARN's state: configuration, directories, logs, PIDs",
    ),
    EnvVar(
        "SPARKTF_YARN_MEMORY_MB", "bin", "12288", "memory (MB) the test YARN's NodeManager offers"
    ),
    EnvVar(
        "SPARKTF_YARN_VCORES",
        "bin",
        "16",
        "vcores the test YARN's NodeManager offers (single host)",
    ),
    EnvVar(
        "SPARKTF_YARN_GPUS",
        "bin",
        "2",
        "stand-in GPUs the test YARN's NodeManager offers as yarn.io/gpu (0: no GPU plugin)",
    ),
    EnvVar(
        "SPARKTF_STANDALONE_DIR",
        "bin",
        "$TMPDIR/sparktf-standalone-$UID",
        "the local standalone cluster's state (master URL, logs, PIDs)",
    ),
    EnvVar(
        "SPARKTF_ROOT",
        "bin",
        "set by bin/_common.sh",
        "the checkout's root, a shell variable of the bin/ scripts (not read from the environment)",
    ),
)
BY_NAME = {v.name: v for v in TABLE}
