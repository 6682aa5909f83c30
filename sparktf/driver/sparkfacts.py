"""What the driver learns from Spark at run time: its settings (:func:`spark_conf`), its task
slots now and to come (:func:`current_slots`, :func:`expected_slots`, :func:`wait_for_slots`,
:func:`connect_slots`), an executor's cores, the ResourceProfile that asks for GPUs, the
session kind (:func:`is_connect`, :func:`active_session`) and what it knows of Hadoop
(:func:`hadoop_env`; the delegation tokens Spark holds, :func:`driver_tokens`). Facts, not
checks: :mod:`~sparktf.driver.preflight` judges them.

Runs on the driver (``sparktf.predict``'s driver half imports it too); imports pyspark when
called, never TensorFlow.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.resource import ResourceProfile
    from pyspark.sql import SparkSession


#: What Spark shows in place of a value whose key or text looks secret (spark.redaction.regex).
REDACTED = "*********(redacted)"


def spark_conf(sc: SparkContext) -> dict[str, str]:
    """The SparkContext's configuration as a dict, in a few py4j calls: ``sc.getConf()``
    copies it entry by entry, two or three calls each (~20 ms of every ``run()``). Read as
    Spark's one-string listing, with any redacted value read again on its own; where that
    listing is ambiguous (a value with a line break in it), the entry-by-entry copy."""
    jconf = getattr(getattr(sc, "_conf", None), "_jconf", None)
    if jconf is None:
        return dict(sc.getConf().getAll())
    text = jconf.toDebugString()
    entries = [line.partition("=") for line in text.split("\n")] if text else []
    if any(not sep for _, sep, _ in entries) or len(entries) != len(jconf.getAll()):
        return dict(sc.getConf().getAll())
    return {k: (jconf.get(k) if v == REDACTED else v) for k, _, v in entries}


LOCAL = re.compile(r"^local\[(\d+|\*)(?:,\s*\d+)?\]$")


LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]$")


def active_session(sc: SparkContext) -> SparkSession | None:
    """This thread's active SparkSession on ``sc``, if any."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    return session if session is not None and session.sparkContext is sc else None


def is_connect(obj: object) -> bool:
    """True for a Spark Connect session or DataFrame (without importing Connect's client)."""
    return type(obj).__module__.startswith("pyspark.sql.connect.")


def expected_slots(master: str, conf: dict[str, str], cpu_count: int) -> int | None:
    """Task slots the master will offer once every executor is up, when the conf says so."""
    task_cpus = int(conf.get("spark.task.cpus", "1"))
    if master == "local":
        return 1
    m = LOCAL.match(master)
    if m:
        n = cpu_count if m.group(1) == "*" else int(m.group(1))
        return n // task_cpus
    m = LOCAL_CLUSTER.match(master)
    if m:
        return int(m.group(1)) * (int(m.group(2)) // task_cpus)
    if "spark.cores.max" in conf:  # standalone / Mesos cap on the application's cores
        return int(conf["spark.cores.max"]) // task_cpus
    if "spark.executor.instances" in conf and "spark.executor.cores" in conf:
        return int(conf["spark.executor.instances"]) * (
            int(conf["spark.executor.cores"]) // task_cpus
        )
    return None


def executor_cores(master: str, conf: dict[str, str], cpu_count: int) -> int | None:
    """Cores of one executor, when the master or the conf says so (None: unknown)."""
    if master == "local":
        return 1
    m = LOCAL.match(master)
    if m:
        return cpu_count if m.group(1) == "*" else int(m.group(1))
    m = LOCAL_CLUSTER.match(master)
    if m:
        return int(m.group(2))
    if "spark.executor.cores" in conf:
        return int(conf["spark.executor.cores"])
    return None


def gpu_profile(sc: SparkContext, gpus_per_node: int | None) -> ResourceProfile | None:
    """A ResourceProfile asking ``gpus_per_node`` GPUs (and the usual cpus) per task, or None
    when the default profile already asks as much (spark.task.resource.gpu.amount). On Spark
    Connect the profile is made on the server (:func:`server_profile`)."""
    from sparktf.driver.sparkside import ConnectContext

    if not gpus_per_node:
        return None
    conf = sc.conf() if isinstance(sc, ConnectContext) else dict(sc.getConf().getAll())
    if conf.get("spark.task.resource.gpu.amount") == str(gpus_per_node):
        return None
    cpus = int(conf.get("spark.task.cpus", "1"))
    if isinstance(sc, ConnectContext):
        return server_profile(sc.session, {"cpus": cpus, "gpu": gpus_per_node})
    from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

    tasks = TaskResourceRequests().cpus(cpus).resource("gpu", gpus_per_node)
    return ResourceProfileBuilder().require(tasks).build


class ServerProfile:
    """A ResourceProfile made on a Spark Connect server: what Connect's ``mapInArrow(...,
    profile=)`` reads of one (its ``id``)."""

    def __init__(self, profile_id: int, task_resources: dict[str, float]) -> None:
        self.id = profile_id
        self.task_resources = task_resources

    def __repr__(self) -> str:
        return f"ServerProfile(id={self.id}, tasks={self.task_resources})"


def server_profile(session: Any, task_resources: dict[str, float]) -> Any:
    """A task ResourceProfile (``{"cpus": 1, "gpu": 1}``) created on ``session``'s Spark
    Connect server, through that session's own client: pyspark's ResourceProfile asks the
    process's active session, which may be another (or a classic one)."""
    import pyspark.sql.connect.proto as pb2

    proto = pb2.ResourceProfile(
        task_resources={
            name: pb2.TaskResourceRequest(resource_name=name, amount=float(amount))
            for name, amount in task_resources.items()
        }
    )
    return ServerProfile(session.client._create_profile(proto), dict(task_resources))


def current_slots(sc: SparkContext) -> int:
    """Task slots Spark's scheduler has right now (what its barrier check counts)."""
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # an older or different scheduler: fall back to the public estimate
        return int(sc.defaultParallelism)


def wait_for_slots(
    sc: SparkContext, wanted: int | None, timeout: float, conf: dict | None = None
) -> int:
    """Wait (executors register after the context starts) until ``wanted`` slots exist.

    With ``wanted=None``, wait for the slots the conf promises, else for a count that has held
    still for two seconds. Returns the slots seen last. ``conf``: the context's settings as a
    dict, when the caller has read them already (each read is a round of py4j calls).
    """
    conf = conf if conf is not None else dict(sc.getConf().getAll())
    promised = expected_slots(str(sc.master), conf, os.cpu_count() or 1)
    # Never wait for more slots than the master will ever offer: fail fast instead.
    target = min(filter(None, (wanted, promised)), default=None)
    deadline = time.monotonic() + timeout
    last, stable_since = -1, time.monotonic()
    while True:
        slots = current_slots(sc)
        now = time.monotonic()
        if slots != last:
            last, stable_since = slots, now
        if target is not None and slots >= target:
            return slots
        if target is None and slots > 0 and now - stable_since >= 2.0:
            return slots
        if now >= deadline:
            return slots
        time.sleep(0.2)


def connect_slots(master: str, conf: dict[str, str]) -> int | None:
    """Task slots a Connect server's cluster offers, from its conf alone: what the master
    promises (:func:`expected_slots`, ``local[*]`` counted on this machine), else
    ``spark.default.parallelism``; None if neither says."""
    promised = expected_slots(master, conf, os.cpu_count() or 1)
    if promised is not None:
        return promised
    parallelism = conf.get("spark.default.parallelism", "")
    return int(parallelism) if parallelism.isdigit() else None


def hadoop_env(sc: SparkContext) -> tuple[tuple[str, str], ...]:
    """What the driver knows of Hadoop, for sparktf.fs on the nodes and executors: its own
    ``SPARKTF_*`` HDFS settings, else its Hadoop configuration's fs.defaultFS (for
    ``ctx.absolute_path`` and ``hdfs:///...``) and the NameNode's WebHDFS address; and the
    Spark user as the HDFS user. On Spark Connect, the server's ``spark.hadoop.fs.defaultFS``
    and ``spark.hadoop.dfs.namenode.http-address`` (the client sees no Hadoop configuration;
    the executors' own HADOOP_CONF_DIR still counts there). A node's own environment wins
    over these."""
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
    keys = (
        ("fs.defaultFS", "SPARKTF_DEFAULT_FS"),
        ("dfs.namenode.http-address", "SPARKTF_NAMENODE_HTTP"),
    )
    from sparktf.driver.sparkside import ConnectContext

    if isinstance(sc, ConnectContext):  # no Hadoop configuration: the server's spark.hadoop.*
        conf = sc.conf()
        for key, var in keys:
            if conf.get(f"spark.hadoop.{key}") and var not in out:
                out[var] = conf[f"spark.hadoop.{key}"]
        keys = ()
    try:
        if keys:
            hadoop = sc._jsc.hadoopConfiguration()
            for key, var in keys:
                value = hadoop.get(key)
                if value and var not in out:
                    out[var] = str(value)
            out.setdefault("HADOOP_USER_NAME", str(sc.sparkUser()))
    except Exception:
        pass
    out.setdefault("SPARKTF_WORKING_DIR", os.getcwd())  # relative local paths: the driver's
    return tuple(sorted(out.items()))


def driver_tokens(sc) -> bytes | None:
    """The delegation tokens of the driver JVM's current user as Hadoop's token storage
    (``Credentials.writeTokenStorageToStream``, the WRITABLE format YARN writes), or None
    where Hadoop security is off, the JVM is not this process's (Spark Connect) or it holds
    no token."""
    jvm = getattr(sc, "_jvm", None)
    if jvm is None:
        return None
    try:
        ugi = jvm.org.apache.hadoop.security.UserGroupInformation
        if not ugi.isSecurityEnabled():
            return None
        creds = ugi.getCurrentUser().getCredentials()
        if creds.numberOfTokens() == 0:
            return None
        buffer = jvm.java.io.ByteArrayOutputStream()
        out = jvm.java.io.DataOutputStream(buffer)
        creds.writeTokenStorageToStream(out)
        out.flush()
        return bytes(buffer.toByteArray())
    except Exception:  # (py4j's errors, a JVM going down: the nodes keep their own)
        return None
