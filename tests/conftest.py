"""Shared fixtures: one real SparkContext at a time, reused by every test that wants the same
master, and helpers that check no process or port of a job outlives it.

All traffic stays on loopback (SPARK_LOCAL_IP, spark.driver.host).
"""

import os
import socket
import sys
import threading
import time

import cloudpickle
import psutil
import pytest

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jobs  # noqa: E402
import tf_jobs  # noqa: E402
import feed_jobs  # noqa: E402

# The executors cannot import the tests' modules: ship their functions by value.
cloudpickle.register_pickle_by_value(jobs)
cloudpickle.register_pickle_by_value(tf_jobs)
cloudpickle.register_pickle_by_value(feed_jobs)

#: Quiet TensorFlow's C++ start-up messages in the nodes.
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


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

        spark_conf = (SparkConf().setMaster(master).setAppName("sparktf-tests")
                      .set("spark.driver.host", "127.0.0.1")
                      .set("spark.ui.enabled", "false")
                      .set("spark.ui.showConsoleProgress", "false")
                      .set("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
                      .set("spark.pyspark.python", sys.executable))
        for k, v in conf:
            spark_conf.set(k, v)
        self.sc = SparkContext(conf=spark_conf)
        self.sc.setLogLevel("ERROR")
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


def sparktf_processes():
    """Every live process of a sparktf job on this machine: supervisors, TF processes, and
    everything they started (TensorBoard, a main_fn's own children): these all carry the
    SPARKTF_NODE variable, unless they cleared their environment."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "sparktf.task.supervisor" in cmd or "sparktf.node" in cmd:
            found.append(proc)
            continue
        try:
            if "SPARKTF_NODE" in proc.environ() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            pass
    return found


def sparktf_threads():
    """The driver's threads of sparktf jobs (monitor, Spark job, control server)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("sparktf")]


def wait_until(predicate, timeout=15.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def port_is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def pid_alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def no_leaks(spark_pool):
    """Fails the test if anything of a job outlives it a few seconds: a process (node,
    supervisor, TensorBoard, a user's grandchild), a driver thread (monitor, control server),
    or a running Spark job."""
    yield
    assert wait_until(lambda: not sparktf_processes(), timeout=10), \
        f"leaked sparktf processes: {[p.info for p in sparktf_processes()]}"
    assert wait_until(lambda: not sparktf_threads(), timeout=10), \
        f"leaked driver threads: {sparktf_threads()}"
    sc = spark_pool.sc
    if sc is not None and sc._jsc is not None:  # (a test may have stopped it)
        assert wait_until(lambda: not sc.statusTracker().getActiveJobsIds(), timeout=10), \
            "a Spark job of the test is still running"
