"""sparktf.daemon as Spark's Python worker daemon (``spark.python.daemon.module``) and
sparktf.warm_up, on a real local Spark: the daemons the warm-up starts are the ones later stages
use, their workers find TensorFlow imported, and TF processes forked from them train with
MultiWorkerMirroredStrategy (its gRPC and collectives start after the fork, as they must)."""

import threading

import numpy as np
import pytest
from helpers import feed_jobs

import sparktf
from sparktf.driver import warmup

#: This module's own SparkContext: the daemon preloads TensorFlow and tf_keras.
DAEMON_CONF = (
    ("spark.python.daemon.module", "sparktf.daemon"),
    ("spark.executorEnv.SPARKTF_PRELOAD", "tensorflow,tf_keras"),
)


@pytest.fixture(scope="module")
def spark(spark_pool):
    from pyspark.sql import SparkSession

    return SparkSession(spark_pool.get("local[4]", DAEMON_CONF))


@pytest.fixture(scope="module")
def warmed(spark):
    handle = sparktf.warm_up(spark, rdds=True)
    assert handle.wait(300), handle
    return handle


@pytest.mark.tf
def test_warm_up_starts_the_daemons_that_later_stages_use(spark, warmed):
    assert warmed.error is None and warmed.tensorflow_preloaded is True, warmed
    assert warmed.tasks == 4 and len(warmed.reports["dataframes"]) == 4
    dataframe_daemons = {pid for pid, _ in warmed.reports["dataframes"]}
    rdd_daemons = {pid for pid, _ in warmed.reports["rdds"]}
    # One daemon per environment: Spark SQL's Python stages have one more variable.
    assert len(dataframe_daemons) == len(rdd_daemons) == 1
    assert dataframe_daemons != rdd_daemons
    later = (
        spark.range(4, numPartitions=4)
        # (private: the warm-up's own probe, run as a later stage would)
        .mapInArrow(warmup._report, "daemon long, tensorflow boolean")
        .collect()
    )
    assert {r.daemon for r in later} == dataframe_daemons
    assert all(r.tensorflow for r in later)
    later = spark.sparkContext.parallelize(range(4), 4).mapPartitions(warmup._report_rdd).collect()
    assert {pid for pid, _ in later} == rdd_daemons


@pytest.mark.tf
def test_a_finished_warm_up_says_what_it_did(warmed):
    assert warmed.done and warmed.wait(0)
    assert "done, tensorflow preloaded: True" in repr(warmed)
    warmed.cancel()  # nothing left to cancel: no error


@pytest.mark.slow
@pytest.mark.tf
def test_nodes_forked_from_the_preloading_daemon_train_with_mirrored_strategy(
    spark, warmed, no_leaks
):
    from helpers.procs import TF_ENV

    rng = np.random.RandomState(0)
    x = rng.randn(1200, 4)
    y = x @ np.array([1.0, 2.0, 3.0, 4.0]) + 0.5
    df = spark.createDataFrame(
        [(x[i].tolist(), float(y[i])) for i in range(1200)], "x array<float>, y float"
    ).repartition(2)
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.preloaded_mwms,
        {"batch": 32, "epochs": 3},
        num_executors=2,
        input_mode=sparktf.InputMode.SPARK,
        env=TF_ENV,
    )
    cluster.train(df, num_epochs=3)
    chief = cluster.shutdown(timeout=300)
    worker = cluster.results["worker:0"]
    assert chief["preloaded"] and worker["preloaded"]  # main_fn found TensorFlow imported
    assert chief["loss"][-1] < 0.1 * chief["loss"][0]
    assert chief["kernel"] == worker["kernel"]  # one model, all-reduced


def test_without_pysparks_internals_a_dataframe_stage_reaches_the_same_daemon(
    spark, warmed, monkeypatch
):
    monkeypatch.setattr(warmup, "_rdd_job", lambda sc, tasks, extra: None)  # pyspark moved
    handle = sparktf.warm_up(spark)
    assert handle.wait(120) and handle.error is None, handle
    assert {pid for pid, _ in handle.reports["dataframes"]} == {
        pid for pid, _ in warmed.reports["dataframes"]
    }


@pytest.mark.tf
def test_a_failed_warm_up_is_reported_on_its_handle_not_raised(spark, monkeypatch):
    def fail(sc, tasks, extra):
        raise RuntimeError("boom\nand more")

    monkeypatch.setattr(warmup, "_rdd_job", fail)
    handle = sparktf.warm_up(spark.sparkContext)  # a SparkContext does as well
    assert handle.wait(60)
    assert handle.error == "RuntimeError: boom"
    assert handle.tensorflow_preloaded is None and "failed: RuntimeError: boom" in repr(handle)


def test_a_program_that_fails_right_after_warm_up_ends_with_its_own_error_last(tmp_path):
    """A driver that starts the warm-up and fails at once (a --data path that does not
    exist) exited under Spark's errors about the warm-up's tasks (crashed Python workers, a
    missing broadcast) under spark-submit, whose JVM stops Spark as the driver's Python
    exits. Its exit now lets the warm-up end first: the program's own error is the last thing
    on the console."""
    import os
    import subprocess
    import sys

    import pyspark

    script = tmp_path / "driver.py"
    script.write_text(
        "import os\n"
        "os.environ['SPARK_LOCAL_IP'] = '127.0.0.1'\n"
        "from pyspark.sql import SparkSession\n"
        "import sparktf\n"
        "spark = (SparkSession.builder.master('local[2]').config('spark.ui.enabled', 'false')\n"
        "         .config('spark.python.daemon.module', 'sparktf.daemon').getOrCreate())\n"
        "spark.sparkContext.setLogLevel('WARN')\n"
        "sparktf.warm_up(spark)\n"
        "import time; time.sleep(1.5)  # the program reads its input and fails\n"
        "raise SystemExit('the program failed: ' + str(spark.sparkContext.defaultParallelism))\n"
    )
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    out = subprocess.run(
        [spark_submit, "--conf", "spark.ui.showConsoleProgress=false", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
    )
    console = out.stdout + out.stderr  # spark-submit passes the driver's stderr to stdout
    assert out.returncode == 1 and "the program failed: 2" in console, console[-3000:]
    errors = [
        line for line in console.splitlines() if " ERROR " in line or "exited unexpectedly" in line
    ]
    assert not errors, console[-3000:]


def test_stopping_spark_under_a_warm_up_ends_it(spark_pool, spark):
    """Last in this module: it stops the module's SparkContext (the pool starts another)."""
    from helpers.procs import wait_until

    sc = spark.sparkContext
    handle = sparktf.warm_up(spark, rdds=True)
    spark_pool.stop()
    assert handle.wait(60), handle  # ended: failed, or done if it beat the stop
    assert wait_until(
        lambda: not any(t.name == handle.job_group for t in threading.enumerate()), timeout=10
    )
    with pytest.raises(sparktf.ConfigError, match="has been stopped"):
        sparktf.warm_up(sc)
