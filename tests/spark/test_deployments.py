"""The same jobs on separate executor JVMs: local-cluster[2,1,1024] and a real standalone
master + two workers that this module starts with spark-class (on loopback) and stops by PID."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
from helpers import jobs
from helpers.procs import pid_alive, wait_until

import sparktf

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaks")]


def _check_trivial_job(sc):
    cluster = sparktf.run(sc, jobs.describe, {"x": 1}, num_executors=2)
    chief = cluster.shutdown(timeout=120)
    worker = cluster.results["worker:0"]
    assert chief["tf_config"]["cluster"] == worker["tf_config"]["cluster"]
    assert chief["name"] == "chief:0" and worker["name"] == "worker:0"
    return chief, worker


def _check_failure(sc):
    with pytest.raises(sparktf.NodeError) as err:  # from run() if the node fails that early
        sparktf.run(
            sc, jobs.raise_on, {"node": "worker:0", "message": "oops", "delay": 1}, num_executors=2
        ).shutdown(timeout=120)
    assert err.value.node == "worker:0" and err.value.exc_message == "oops"
    assert "about to fail on worker:0" in str(err.value)


# ----------------------------------------------------------------------------- local-cluster
@pytest.fixture(scope="module")
def sc_local_cluster(spark_pool):
    return spark_pool.get("local-cluster[2,1,1024]")


def test_local_cluster_trivial_job(sc_local_cluster):
    chief, worker = _check_trivial_job(sc_local_cluster)
    # two executor JVMs: each node runs under a different Python worker tree
    assert chief["pid"] != worker["pid"]


def test_local_cluster_failure(sc_local_cluster):
    _check_failure(sc_local_cluster)


def test_local_cluster_sigkill_of_python_worker_cleans_up(sc_local_cluster, tmp_path):
    cluster = sparktf.run(
        sc_local_cluster, jobs.spawn_tree_and_wait, {"dir": str(tmp_path)}, num_executors=2
    )
    files = [tmp_path / "chief_0.json", tmp_path / "worker_0.json"]
    assert wait_until(lambda: all(f.exists() for f in files), timeout=60)
    pids = {f.stem: json.loads(f.read_text()) for f in files}
    os.kill(pids["chief_0"]["task_worker"], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(sparktf.NodeError) as err:
        cluster.shutdown(timeout=60)
    assert time.monotonic() - start < 15
    assert err.value.node == "chief:0"
    tree = [pid for node in pids.values() for k, pid in node.items() if k != "task_worker"]
    assert wait_until(lambda: not any(pid_alive(p) for p in tree), timeout=15)


# -------------------------------------------------------------------------------- standalone
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_class(*args, log):
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    env = dict(
        os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable
    )
    return subprocess.Popen(
        [os.path.join(home, "bin", "spark-class"), *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(proc):
    """Stop a daemon and its children by PID: SIGTERM, then SIGKILL."""
    try:
        tree = psutil.Process(proc.pid).children(recursive=True) + [psutil.Process(proc.pid)]
    except psutil.NoSuchProcess:
        return
    for p in tree:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass  # it ended between the listing and the signal (its parent stopped it)
    _, alive = psutil.wait_procs(tree, timeout=10)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


@pytest.fixture(scope="module")
def standalone(tmp_path_factory, spark_pool):
    spark_pool.stop()  # one SparkContext at a time
    logs = tmp_path_factory.mktemp("standalone")
    port = _free_port()
    procs = []
    try:
        with open(logs / "master.log", "w") as log:
            procs.append(
                _spark_class(
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(_free_port()),
                    log=log,
                )
            )
        url = f"spark://127.0.0.1:{port}"
        assert wait_until(lambda: _listening(port), timeout=60), (logs / "master.log").read_text()
        for i in range(2):
            with open(logs / f"worker{i}.log", "w") as log:
                procs.append(
                    _spark_class(
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(_free_port()),
                        url,
                        log=log,
                    )
                )
        yield url, spark_pool
    finally:
        spark_pool.stop()
        for proc in reversed(procs):
            _stop(proc)


def _listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def sc_standalone(standalone):
    url, pool = standalone
    return pool.get(url, conf=(("spark.executor.memory", "512m"), ("spark.cores.max", "2")))


def test_standalone_trivial_job(sc_standalone):
    assert sc_standalone.master.startswith("spark://127.0.0.1:")
    _check_trivial_job(sc_standalone)


def test_standalone_failure(sc_standalone):
    _check_failure(sc_standalone)


def test_standalone_too_many_nodes_fails_fast(sc_standalone):
    start = time.monotonic()
    with pytest.raises(sparktf.ConfigError, match="needs 3 concurrent task slots"):
        sparktf.run(sc_standalone, jobs.describe, num_executors=3)
    assert time.monotonic() - start < 10  # Spark's own check would take ~10 minutes
