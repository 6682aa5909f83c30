"""Shared fixtures: one real SparkContext at a time, reused by every test that wants the same
master, and helpers that check no process or port of a job outlives it.

All traffic stays on loopback (SPARK_LOCAL_IP, spark.driver.host).
"""

import os
import resource
import sys

import cloudpickle
import psutil
import pytest

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# What this session starts inherits it: no_leaks then ignores other sessions' jobs on a shared
# machine (helpers.procs.sparktf_processes).
os.environ["SPARKTF_TEST_SESSION"] = str(os.getpid())

import helpers
from helpers.procs import (  # noqa: F401
    TF_ENV,
    pid_alive,
    port_is_free,
    sparktf_processes,
    sparktf_threads,
    wait_until,
)

# The executors cannot import the tests' modules: ship the functions of tests/helpers (every
# module of the package) by value.
cloudpickle.register_pickle_by_value(helpers)


#: The markers every test in a folder of tests/ gets (pytest.ini says what each means).
FOLDER_MARKERS = {
    "tf": ("tf",),
    "e2e": ("e2e", "tf", "slow"),
    "journeys": ("journeys",),
    "hadoop": ("hadoop", "slow"),
    "yarn": ("yarn", "slow"),
    "multihost": ("multihost", "slow"),
    "kerberos": ("kerberos", "slow"),
}

#: The markers a test gets wherever it is, for a fixture it uses: what that fixture starts.
FIXTURE_MARKERS = {
    "hdfs_cluster": ("hadoop", "slow"),
    "yarn": ("yarn", "slow"),
    "secure_yarn": ("kerberos", "slow"),
    "connect_url": ("slow",),
}


def pytest_collection_modifyitems(config, items):
    """Marks each test for what it needs (pytest.ini's markers), so that a tier selected by
    marker (``-m "not slow"``) starts no HDFS, YARN or example run: by its folder under tests/,
    and by the fixtures it uses (``hdfs_cluster``, ``yarn``), wherever it is."""
    root = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        folder = os.path.relpath(str(item.path), root).split(os.sep)[0]
        names = list(FOLDER_MARKERS.get(folder, ()))
        for fixture, markers in FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                names += markers
        have = {m.name for m in item.iter_markers()}
        for name in dict.fromkeys(names):
            if name not in have:
                item.add_marker(name)


class _SparkPool:
    """Keeps one SparkContext alive and replaces it only when a test asks for another master."""

    def __init__(self):
        self.sc = None
        self.key = None

    def get(self, master, conf=()):
        key = (master, tuple(conf))
        if self.key == key and self.sc is not None:
            return self.sc
        self.stop()
        from pyspark import SparkConf, SparkContext

        spark_conf = (
            SparkConf()
            .setMaster(master)
            .setAppName("sparktf-tests")
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
            .set("spark.pyspark.python", sys.executable)
        )
        for k, v in conf:
            spark_conf.set(k, v)
        self.sc = SparkContext(conf=spark_conf)
        self.sc.setLogLevel("ERROR")
        # PySpark launches its JVM with the first context's settings as system properties,
        # from which every later SparkConf of the process loads its defaults: a test's own
        # settings would leak into the contexts of every test after it.
        for k, _ in conf:
            self.sc._jvm.System.clearProperty(k)
        self.key = key
        return self.sc

    def stop(self):
        if self.sc is not None:
            self.sc.stop()
            self.sc, self.key = None, None


@pytest.fixture(scope="session")
def spark_pool():
    pool = _SparkPool()
    yield pool
    pool.stop()


@pytest.fixture(scope="module")
def sc_local(spark_pool):
    """A real ``local[4]`` SparkContext (4 task slots on the 2-core CI machine)."""
    return spark_pool.get("local[4]")


@pytest.fixture
def no_leaks(spark_pool):
    """Fails the test if anything of a job outlives it a few seconds: a process (node,
    supervisor, TensorBoard, a user's grandchild), a driver thread (monitor, control server),
    or a running Spark job."""
    yield
    assert wait_until(lambda: not sparktf_processes(), timeout=10), (
        f"leaked sparktf processes: {[p.info for p in sparktf_processes()]}"
    )
    assert wait_until(lambda: not sparktf_threads(), timeout=10), (
        f"leaked driver threads: {sparktf_threads()}"
    )
    sc = spark_pool.sc
    if sc is not None and sc._jsc is not None:  # (a test may have stopped it)
        assert wait_until(lambda: not sc.statusTracker().getActiveJobsIds(), timeout=10), (
            "a Spark job of the test is still running"
        )


# ------------------------------------------------------------------------- the unit tier
# The unit tier's promise, checked: a test under tests/unit neither imports TensorFlow nor
# starts Spark's JVM (a SparkContext's py4j gateway, or any java child of this process), when
# its module is imported or while it runs. Only what a unit test adds counts, so the check
# holds when the whole suite runs too (an earlier tier's SparkContext or TensorFlow is given).
# (Here, not in tests/unit/conftest.py: tests import helpers `from conftest`, which a second
# conftest module would shadow.)
UNIT_TIER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit")


def _in_unit_tier(path):
    return str(path).startswith(UNIT_TIER + os.sep)


WHERE_TO = "move it to a tier that says so (tests/tf, tests/spark) or keep the import lazy"


def _tensorflow():
    return "tensorflow" in sys.modules


def _gateway():
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._gateway is not None  # (no public way: py4j's gateway, if launched)


def _java_children():
    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == "java":
                found.add(child.pid)
        except psutil.Error:
            pass
    return found


def _added(before, after):
    """What the unit tier may not have, present now and not before."""
    tf, gateway, jvms = before
    return [
        what
        for what, new in (
            ("imported tensorflow", _tensorflow() and not tf),
            ("launched Spark's JVM (py4j gateway)", _gateway() and not gateway),
            ("started a JVM (a java child process)", bool(after - jvms)),
        )
        if new
    ]


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A unit-test module that imports TensorFlow or starts a JVM when imported fails to collect."""
    if not (isinstance(collector, pytest.Module) and _in_unit_tier(collector.path)):
        return (yield)
    before = (_tensorflow(), _gateway(), _java_children())
    report = yield
    added = _added(before, _java_children())
    if added and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{collector.nodeid}: importing this unit-test module {' and '.join(added)}: {WHERE_TO}"
        )
    return report


@pytest.fixture(scope="module", autouse=True)
def _no_jvm_started_by_the_module(request):
    if not _in_unit_tier(request.node.path):
        yield
        return
    before = _java_children()
    yield
    started = _java_children() - before
    assert not started, f"this unit-test module started a JVM (pids {sorted(started)}): {WHERE_TO}"


@pytest.fixture(autouse=True)
def _environment_left_as_found():
    """Every test leaves ``os.environ`` as it found it. What a test (or the library code it runs
    in this process) sets and does not undo reaches every later test and every process they
    start: a relayed-tokens unit test once left HADOOP_TOKEN_FILE_LOCATION naming its fake
    tokens, and the YARN recipe's spark-submit, an hour later, shipped them to its
    ApplicationMaster, whose driver then failed on HDFS (``monkeypatch.delenv`` of an unset
    variable records nothing to undo). Set up before, and torn down after, the test's own
    fixtures (monkeypatch among them); session fixtures' changes happen outside it."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(
        k
        for k in before.keys() | after.keys()
        if before.get(k) != after.get(k) and k != "PYTEST_CURRENT_TEST"  # pytest's own
    )
    for name in changed:  # restore, so that one leak fails one test, not every later one
        if name in before:
            os.environ[name] = before[name]
        else:
            os.environ.pop(name, None)
    assert not changed, (
        f"this test left os.environ changed: {changed}; set variables with monkeypatch.setenv "
        "(and, before a call that sets one itself, monkeypatch.setenv it first so that its "
        "old value, or its absence, is restored)"
    )


@pytest.fixture(autouse=True)
def _unit_test_stays_pure(request):
    if not _in_unit_tier(request.node.path):
        yield
        return
    tf, gateway = _tensorflow(), _gateway()
    yield
    added = [
        what
        for what, new in (
            ("imported tensorflow", _tensorflow() and not tf),
            ("launched Spark's JVM (py4j gateway)", _gateway() and not gateway),
        )
        if new
    ]
    assert not added, f"this unit test {' and '.join(added)}: {WHERE_TO}"


# ------------------------------------------------------------------------------- HDFS
class TestHDFS:
    """The running test HDFS: ``url`` (hdfs://127.0.0.1:PORT), ``webhdfs`` (http://...),
    ``env`` (what ``bin/hdfs-test-cluster.sh start`` exported: CLASSPATH, ARROW_LIBHDFS_DIR,
    HADOOP_CONF_DIR, ...), ``pids`` (NameNode, DataNode)."""

    __test__ = False

    def __init__(self, env, pids):
        self.env = env
        self.url = env["SPARKTF_TEST_HDFS"]
        self.webhdfs = env["SPARKTF_WEBHDFS_URL"]
        self.pids = pids

    def path(self, *parts):
        return "/".join([self.url] + [str(p).strip("/") for p in parts])

    @property
    def libhdfs_env(self):
        """What a process needs to use the libhdfs backend (as on a YARN node)."""
        return {k: self.env[k] for k in ("CLASSPATH", "ARROW_LIBHDFS_DIR", "JAVA_HOME")}


@pytest.fixture(scope="session")
def hdfs_cluster(tmp_path_factory):
    """A real HDFS for the session: Apache Hadoop 3.5.0's NameNode and DataNode on loopback
    (the release of pyspark's own Hadoop client), started by bin/hdfs-test-cluster.sh (jars
    fetched once from Maven Central and cached), with WebHDFS on and permissions checked;
    reached by pyspark, the hdfs package and libhdfs. Stopped by PID at the end."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = os.path.join(root, "bin", "hdfs-test-cluster.sh")
    env = dict(os.environ, SPARKTF_HDFS_DIR=str(tmp_path_factory.mktemp("hdfs") / "state"))
    for _ in range(2):  # (once more if the first start fails: it says why, and stops itself)
        out = subprocess.run(
            [script, "start"], env=env, capture_output=True, text=True, timeout=900
        )
        if out.returncode == 0:
            break
        print(f"the test HDFS did not start:\n{out.stderr[-3000:]}", file=sys.stderr)
    if out.returncode != 0:
        pytest.fail(f"the test HDFS did not start:\n{out.stdout}\n{out.stderr[-3000:]}")
    exported = dict(
        line[len("export ") :].split("=", 1)
        for line in out.stdout.splitlines()
        if line.startswith("export ")
    )
    state = env["SPARKTF_HDFS_DIR"]
    pids = [int(open(os.path.join(state, f"{n}.pid")).read()) for n in ("namenode", "datanode")]
    yield TestHDFS(exported, pids)
    subprocess.run([script, "stop"], env=env, capture_output=True, timeout=120)
    assert wait_until(lambda: not any(pid_alive(p) for p in pids), timeout=20), (
        "the test HDFS's daemons outlived bin/hdfs-test-cluster.sh stop"
    )


@pytest.fixture(scope="module")
def hdfs(hdfs_cluster):
    """The test HDFS, with this process set up to reach it through WebHDFS as the default
    file system (SPARKTF_DEFAULT_FS, SPARKTF_WEBHDFS_URL; forwarded by the driver to nodes and
    executors), restored after the module."""
    from sparktf import fs

    saved = {k: os.environ.get(k) for k in ("SPARKTF_DEFAULT_FS", "SPARKTF_WEBHDFS_URL")}
    os.environ["SPARKTF_DEFAULT_FS"] = hdfs_cluster.url
    os.environ["SPARKTF_WEBHDFS_URL"] = hdfs_cluster.webhdfs
    # (private: sparktf.fs caches a backend per file system and user, with no public reset)
    fs._BACKENDS.clear()
    yield hdfs_cluster
    fs._BACKENDS.clear()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# ------------------------------------------------------------------------------- YARN
@pytest.fixture(scope="session")
def yarn(tmp_path_factory):
    """A real YARN for the session: Apache Hadoop 3.5.0's ResourceManager, NodeManager,
    NameNode and DataNode on loopback, started by bin/yarn-test-cluster.sh and stopped by PID
    at the end (tests/yarn/yarn_harness.py; the tests in tests/yarn use it)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "yarn"))
    import yarn_harness

    yield from yarn_harness.session_cluster(tmp_path_factory)


@pytest.fixture(scope="module")
def secure_yarn(tmp_path_factory):
    """A secure YARN and HDFS for the module (tests/kerberos/test_secure.py: one start, and
    stopped before the tiers after it, not idle beside them): ``bin/yarn-test-cluster.sh start --kerberos``
    (an MIT KDC, Kerberos on every daemon; tests/kerberos/kerberos_harness.py), its delegation
    tokens dead TOKEN_LIFETIME s after they are issued (a job that runs longer outlives its first tokens),
    stopped by PID at the end. Skipped, saying why, where Java, Maven or MIT Kerberos's KDC is missing."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "kerberos"))
    import kerberos_harness
    import yarn_harness

    why = kerberos_harness.missing()
    if why:
        pytest.skip(f"no Kerberized cluster here: {why}")
    yield from yarn_harness.session_cluster(
        tmp_path_factory,
        ("start", "--kerberos"),
        kerberos_harness.SecureCluster,
        SPARKTF_TOKEN_LIFETIME=str(kerberos_harness.TOKEN_LIFETIME),
        SPARKTF_CLOCK_SKEW=str(kerberos_harness.CLOCK_SKEW),
    )


@pytest.fixture
def many_descriptors():
    """Over 1,100 descriptors open, as a TensorFlow process may hold: the next socket's number
    is above select()'s limit of 1024. Skipped where the descriptor limit cannot allow it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1400
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"the descriptor limit ({hard}) is below {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# ------------------------------------------------------------- the control server, alone
@pytest.fixture
def server():
    """A ControlServer on loopback with a 1 s handshake deadline: (server, recorder, secret)
    (tests/unit/test_protocol.py, tests/sockets/test_control_floods.py)."""
    from helpers.control import Recorder

    from sparktf.common import protocol
    from sparktf.driver.control import ControlServer

    rec = Recorder()
    secret = protocol.new_secret()
    srv = ControlServer("127.0.0.1", "127.0.0.1", secret, rec, handshake_timeout=1.0)
    yield srv, rec, secret
    srv.close()


# ------------------------------------------------------------------------- Spark Connect
def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory):
    """A real Spark Connect server on loopback (local[3]), started from the pip-installed
    pyspark's SparkConnectServer class, shared by the session's Connect tests: its URL."""
    from helpers.connect_server import connect_server

    pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect]")
    with connect_server(tmp_path_factory.mktemp("connect") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def remote(connect_url):
    """A Connect client session. Made with Connect's own SparkSession class: pyspark's common
    builder refuses a remote session in a process that has a classic one (as a test run may
    have), and would mark the whole process as a Connect client."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    spark = ConnectSession.builder.remote(connect_url).create()
    yield spark
    spark.stop()
