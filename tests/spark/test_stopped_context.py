"""A SparkContext that was stopped, given to sparktf (or data made on one): a clear error, not
py4j's NullPointerException. Its own module: it stops the session's shared context."""

import pytest
from helpers import feed_jobs, jobs

import sparktf


def test_a_stopped_spark_context_or_its_data_is_named(spark_pool):
    sc = spark_pool.get("local[2]")
    rdd = sc.parallelize(range(10), 2)
    spark_pool.stop()
    with pytest.raises(sparktf.ClusterStateError, match="SparkContext is stopped"):
        sparktf.run(sc, jobs.describe, num_executors=2)
    live = spark_pool.get("local[2]")  # a new context (the pool's next tests get it too)
    cluster = sparktf.run(
        live, feed_jobs.sum_ids, {"col": "id"}, num_executors=2, input_mode=sparktf.InputMode.SPARK
    )
    with pytest.raises(sparktf.ConfigError, match="another SparkContext"):
        cluster.train(rdd)
    cluster.train(live.parallelize(range(10), 2))  # the refusal changed nothing
    assert cluster.shutdown()["sum"] + cluster.results["worker:0"]["sum"] == 45
