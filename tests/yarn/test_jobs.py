"""sparktf's calls with this test process as a YARN client-mode driver: one YARN application
(four executors in four containers) shared by the module. Executors use this venv's Python.

The JVM of this process may have started before the YARN fixture (an earlier test's local
SparkContext), without HADOOP_CONF_DIR: the cluster's Hadoop settings go in as spark.hadoop.*,
which Spark also ships to the ApplicationMaster and executors.
"""

import os
import re
import sys

import cloudpickle
import psutil
import pytest
import yarn_jobs
from helpers.procs import sparktf_processes, sparktf_threads, wait_until
from yarn_harness import ROOT, base_conf

import sparktf

cloudpickle.register_pickle_by_value(yarn_jobs)

# timeout(600): the first test of a session also starts YARN and HDFS (their jars fetched the
# first time), and every test submits to YARN, whose containers take tens of seconds to start.
pytestmark = [pytest.mark.yarn, pytest.mark.slow, pytest.mark.timeout(600)]

EXECUTORS = 4


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture
def no_leaks(spark_pool, yarn):
    """conftest's no_leaks for a machine other people's jobs share: every sparktf process of
    these tests runs in a container of this YARN, so that is where leftovers are looked for
    (another job's nodes on the host are not this test's); then the driver's threads and
    Spark jobs, as conftest checks them."""
    import hdfs_test_cluster

    def ours():
        return [
            p.info for p in sparktf_processes() if hdfs_test_cluster.in_container(p.pid, yarn.state)
        ]

    yield
    assert wait_until(lambda: not ours(), timeout=10), f"leaked sparktf processes: {ours()}"
    assert wait_until(lambda: not sparktf_threads(), timeout=10), (
        f"leaked driver threads: {sparktf_threads()}"
    )
    sc = spark_pool.sc
    if sc is not None and sc._jsc is not None:
        assert wait_until(lambda: not sc.statusTracker().getActiveJobsIds(), timeout=10), (
            "a Spark job of the test is still running"
        )


@pytest.fixture(scope="module")
def sc_yarn(yarn, spark_pool, monkeypatch_module):
    # (a JVM this process starts now checks for it; one already running is given the
    # settings as spark.hadoop.*)
    monkeypatch_module.setenv("HADOOP_CONF_DIR", yarn.conf_dir)
    conf = dict(base_conf(), **yarn.hadoop_conf())
    conf.update(
        {
            "spark.executor.instances": str(EXECUTORS),
            "spark.executor.memoryOverhead": "1500m",
            "spark.app.name": "sparktf-yarn-tests",
        }
    )
    conf.pop("spark.pyspark.python")  # (the pool sets it)
    sc = spark_pool.get("yarn", sorted(conf.items()))
    assert sc.applicationId.startswith("application_")
    yield sc
    app_id = sc.applicationId
    spark_pool.stop()
    # (the ApplicationMaster unregisters after the driver stopped: UNDEFINED until then, seen
    # on a loaded machine; issue 47 §6)
    assert wait_until(lambda: yarn.app(app_id)["finalStatus"] != "UNDEFINED", timeout=60)
    assert yarn.app(app_id)["finalStatus"] == "SUCCEEDED"
    assert yarn.wait_idle(), yarn.describe_leftovers()


@pytest.mark.tf
def test_the_headline_call_num_ps_2_runs_on_yarn_containers(sc_yarn, no_leaks):
    """``sparktf.run(sc, main_fn, num_ps=2)`` with every other argument unset: the four
    executors are two ps, a chief and a worker; chief and worker train in sync, each in its
    own YARN container."""
    cluster = sparktf.run(sc_yarn, yarn_jobs.mwms_in_a_container, num_ps=2)
    chief = cluster.shutdown(timeout=300)
    assert [r.name for r in cluster.roles] == ["chief:0", "worker:0", "ps:0", "ps:1"]
    worker = cluster.results["worker:0"]
    assert chief["num_replicas"] == 2 and chief["loss"][-1] < 0.05 * chief["loss"][0]
    assert worker["kernel"] == pytest.approx(chief["kernel"], abs=1e-5)
    assert re.fullmatch(r"container_\d+_\d+_01_\d+", chief["container"]), chief["container"]
    assert (
        worker["container"].startswith("container_") and worker["container"] != chief["container"]
    )


def test_input_mode_spark_feeds_every_row_to_the_yarn_executors(sc_yarn, no_leaks):
    from pyspark.sql import SparkSession

    spark = SparkSession(sc_yarn)
    df = spark.range(0, 20000, numPartitions=2)
    cluster = sparktf.run(
        sc_yarn, yarn_jobs.sum_fed, num_executors=2, input_mode=sparktf.InputMode.SPARK
    )
    cluster.train(df, num_epochs=2)
    cluster.shutdown(timeout=180)
    results = [cluster.results[n] for n in ("chief:0", "worker:0")]
    assert cluster.rows_held_back == 0
    assert sum(r["count"] for r in results) == 40000
    assert sum(r["sum"] for r in results) == 2 * sum(range(20000))
    assert all(r["container"].startswith("container_") for r in results)
    assert results[0]["container"] != results[1]["container"]


def test_the_tf1_async_ps_example_trains_on_yarn(sc_yarn, capfd, no_leaks):
    """examples/mnist_async_ps.py's main() on this YARN application (its SparkSession is the
    one running): a ps, a chief and a worker, between-graph replication, fed by Spark."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import mnist_async_ps

    cloudpickle.register_pickle_by_value(mnist_async_ps)  # (as its __main__ would travel)
    # a ps, a chief and a worker (as tests/e2e runs it on local[3]): two trainers feed
    # 2 x 2000 rows, about 124 steps, and StopAtStepHook ends training at global step 60
    result = mnist_async_ps.main(["--epochs", "2", "--max-steps", "60", "--num-executors", "3"])
    out = capfd.readouterr().out
    assert "mnist: async-ps, input mode spark, 4000 training and 1000 held-out" in out
    steps = [int(s) for s in re.findall(r"global step (\d+), \d+ of them mine", out)]
    assert steps and 60 <= steps[0], out[-3000:]
    assert result["test_accuracy"] > 0.5


def names_checkpoint(directory, name):
    """Whether the checkpoint index in ``directory`` (uploaded last by SyncedDir, so the
    checkpoint it names is whole) names ``name``; False while it is missing or being written."""
    try:
        return f'"{name}"'.encode() in sparktf.fs.read_bytes(f"{directory}/checkpoint")
    except Exception:
        return False


@pytest.mark.tf
def test_an_executor_container_lost_mid_training_and_max_restarts_1_completes(
    sc_yarn, yarn, no_leaks
):
    """The executor JVM of worker:0's YARN container SIGKILLed (found by the PID the
    NodeManager recorded for the container) while the chief trains with its checkpoint on
    HDFS: the barrier stage fails, sparktf launches the cluster again (max_restarts=1) on the
    executors left, the chief resumes from its checkpoint and reaches its final step. (Last
    in this module: the application then has an executor fewer until YARN replaces it.)"""
    ckpt = f"{yarn.hdfs}/container-lost/ckpt"
    with sparktf.run(
        sc_yarn,
        yarn_jobs.steps_checkpointed_on_hdfs,
        {"dir": ckpt, "steps": 40, "pause_at": 20},
        num_executors=2,
        max_restarts=1,
    ) as cluster:  # (stops every node if the test fails)
        assert wait_until(
            lambda: (
                (cluster.progress().get("chief:0") or {}).get("step") == 20
                and names_checkpoint(ckpt, "ckpt-20")
                and sparktf.fs.exists(ckpt + ".worker-container")
            ),
            timeout=180,
        ), cluster.progress()
        container = sparktf.fs.read_bytes(ckpt + ".worker-container").decode()
        jvm = yarn.container_jvm(container)
        jvm.kill()
        chief = cluster.shutdown(timeout=300)
    assert cluster.attempt == 1
    [failure] = cluster.failures
    print(f"\n[yarn] the lost container's failure: {str(failure)[:600]}")
    assert isinstance(failure, sparktf.NodeError) and failure.node == "worker:0"
    assert chief["attempt"] == 1 and cluster.results["worker:0"]["attempt"] == 1
    assert chief["resumed_from"] == 20 and chief["final_step"] == 40
    assert container not in (chief["container"], cluster.results["worker:0"]["container"])
    assert wait_until(lambda: not jvm.is_running() or jvm.status() == psutil.STATUS_ZOMBIE)
