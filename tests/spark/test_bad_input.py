"""Bad input and misuse: each gets a clear error or a documented behaviour; nothing hangs,
nothing is silently dropped, nothing leaks (the no_leaks fixture checks every test)."""

import os
import signal
import threading
import time

import pytest
from helpers import feed_jobs, jobs

import sparktf

pytestmark = pytest.mark.usefixtures("no_leaks")
SPARK = sparktf.InputMode.SPARK


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


def test_shutdown_arguments_are_checked(sc_local):
    cluster = sparktf.run(sc_local, jobs.describe, {}, num_executors=2)
    for kwargs, fragment in [
        ({"grace_secs": -1}, "grace_secs must be a number >= 0"),
        ({"grace_secs": "1"}, "grace_secs must be a number >= 0"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"timeout": "5"}, "timeout must be a positive number"),
    ]:
        with pytest.raises(sparktf.ConfigError, match=fragment):
            cluster.shutdown(**kwargs)
    with pytest.raises(sparktf.ConfigError, match="timeout must be a number of seconds"):
        cluster.tensorboard_url(timeout="5")  # said even without TensorBoard
    assert cluster.shutdown()["name"] == "chief:0"  # the bad calls changed nothing


def test_train_after_shutdown_says_the_cluster_was_shut_down(sc_local):
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {"col": "id"}, num_executors=2, input_mode=SPARK
    )
    assert cluster.shutdown() is None  # never given data
    with pytest.raises(sparktf.ClusterStateError, match="was shut down"):
        cluster.train(sc_local.parallelize(range(4), 2))


def test_inference_arguments_are_checked(sc_local):
    cluster = sparktf.run(sc_local, feed_jobs.infer_double, {}, num_executors=2, input_mode=SPARK)
    with pytest.raises(sparktf.ConfigError) as err:
        cluster.inference([1, 2], output_schema=3, feed_timeout=0)
    assert len(err.value.problems) == 3
    cluster.shutdown()
    with_ps = sparktf.run(
        sc_local, feed_jobs.infer_double, {}, num_executors=3, num_ps=1, input_mode=SPARK
    )
    with pytest.raises(sparktf.ConfigError, match="no parameter servers or evaluator"):
        with_ps.inference(sc_local.parallelize([1, 2]))
    with_ps.shutdown()


def test_an_empty_rdd_trains_zero_rows_and_ends(sc_local):
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {"col": None}, num_executors=2, input_mode=SPARK
    )
    cluster.train(sc_local.parallelize([], 3), num_epochs=2)
    cluster.shutdown(timeout=60)
    assert [r["rows"] for r in cluster.results.values()] == [0, 0]


@pytest.mark.parametrize(
    "cached,rebalance",
    [(False, None), (True, None), (False, False)],
    ids=["dealt-out", "cached-and-counted", "fed-as-it-is"],
)
def test_an_empty_dataframe_trains_zero_rows_and_ends(spark, cached, rebalance):
    df = spark.range(0, 10, numPartitions=2).where("id < 0")
    if cached:  # one partition per node, cached: its counts say it is empty (no isEmpty job)
        df = df.cache()
    cluster = sparktf.run(
        spark.sparkContext, feed_jobs.sum_ids, {"col": "id"}, num_executors=2, input_mode=SPARK
    )
    cluster.train(df, rebalance=rebalance)  # as it is: a barrier task per empty partition
    cluster.shutdown(timeout=60)
    assert [r["rows"] for r in cluster.results.values()] == [0, 0]


def test_a_column_of_arrays_of_different_lengths_is_a_clear_error(spark):
    df = spark.createDataFrame(
        [(i, [1.0] * (3 if i % 2 else 4)) for i in range(40)], "id long, x array<double>"
    )
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.sum_ids,
        {"col": "id", "batch": 8},
        num_executors=2,
        input_mode=SPARK,
    )
    with pytest.raises(sparktf.NodeError) as err:
        cluster.train(df)
        cluster.shutdown(timeout=60)
    assert "column 'x' holds arrays of different lengths (3 to 4)" in str(err.value)


def test_rdd_elements_of_different_shapes_are_a_clear_error_in_to_dataset(sc_local):
    import numpy as np

    data = sc_local.parallelize([(np.zeros(3 if i % 2 else 4), i) for i in range(40)], 2)
    cluster = sparktf.run(
        sc_local, feed_jobs.dataset_rows, {"batch": 8}, num_executors=2, input_mode=SPARK
    )
    with pytest.raises(sparktf.NodeError) as err:
        cluster.train(data, equalize=False)
        cluster.shutdown(timeout=60)
    assert "elements of different shapes" in str(err.value)


def test_a_cluster_after_shutdown_says_so(sc_local):
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {"col": None}, num_executors=2, input_mode=SPARK
    )
    cluster.train(sc_local.parallelize(range(10), 2))
    first = cluster.shutdown()
    assert cluster.shutdown() == first  # twice: the same answer, nothing else happens
    with pytest.raises(sparktf.ClusterStateError, match="can be called once per cluster"):
        cluster.train(sc_local.parallelize(range(10), 2))
    with pytest.raises(sparktf.ClusterStateError):
        cluster.inference(sc_local.parallelize(range(10), 2))


def test_keyboard_interrupt_on_the_driver_stops_every_node(sc_local):
    cluster = sparktf.run(sc_local, jobs.sleep_forever, {}, num_executors=2)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        cluster.shutdown()
    assert time.monotonic() - start < 30
    assert cluster.status is sparktf.Status.FAILED
    with pytest.raises(sparktf.ClusterStateError, match="interrupted"):
        cluster.shutdown()


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"heartbeat_timeout": -1}, "heartbeat_timeout must be a number of seconds >= 0"),
        ({"progress_timeout": "5"}, "progress_timeout must be a number of seconds >= 0"),
        ({"max_restarts": -1}, "max_restarts must be an int >= 0"),
        ({"input_mode": "spark"}, "input_mode must be sparktf.InputMode"),
        ({"env": {"A": 1}}, "env must map str to str"),
        ({"log_dir": 5}, "log_dir must be a non-empty path"),
        ({"num_ps": -1}, "num_ps"),
        ({"eval_node": True, "num_executors": 1}, "evaluator"),
    ],
)
def test_every_run_argument_is_checked(sc_local, kwargs, fragment):
    kwargs.setdefault("num_executors", 2)
    with pytest.raises(sparktf.ConfigError, match=fragment):
        sparktf.run(sc_local, jobs.describe, {}, **kwargs)


def test_a_hadoop_log_dir_that_cannot_be_reached_fails_the_job_at_the_start(sc_local):
    """run(log_dir="hdfs://...") with the NameNode down (here: nothing listens on the port):
    each node makes the directory before main_fn starts, so the job fails within seconds,
    naming the path and the cause, instead of after all of training, at the first copy
    (or never, when main_fn wrote nothing there)."""
    started = time.monotonic()
    cluster = sparktf.run(
        sc_local, jobs.sleep_forever, {}, num_executors=2, log_dir="hdfs://127.0.0.1:1/sparktf-logs"
    )
    with pytest.raises(sparktf.NodeError) as err:
        cluster.shutdown(timeout=60)
    assert "copying its log_dir to HDFS" in str(err.value)
    assert "hdfs://127.0.0.1:1/sparktf-logs" in str(err.value)
    assert "cannot reach HDFS at 127.0.0.1:1" in str(err.value)
    assert time.monotonic() - started < 30


# It stops the module's SparkContext: keep it the module's last test.
def test_the_spark_context_stopped_in_the_middle_of_a_job(spark_pool):
    sc = spark_pool.get("local[2]")
    cluster = sparktf.run(sc, jobs.sleep_forever, {}, num_executors=2)
    threading.Timer(1.0, spark_pool.stop).start()
    start = time.monotonic()
    with pytest.raises(sparktf.ClusterStateError, match="the SparkContext was stopped"):
        cluster.shutdown(timeout=60)
    assert time.monotonic() - start < 30
