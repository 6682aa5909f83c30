"""Timeouts mean what they say: ``reservation_timeout`` counts from the moment Spark submits
the nodes' barrier stage, never the user's upstream work (slow maps, the shuffles that deal the
data out, adaptive execution's stages), and no Spark job of a ``train()``/``inference()`` runs
outside the cluster's own Spark job."""

import time

import pytest
from helpers import feed_jobs

import sparktf
from sparktf.driver.sparkjobs import jobs_tagged

pytestmark = pytest.mark.usefixtures("no_leaks")

SPARK = sparktf.InputMode.SPARK


#: The user's map that takes its time: half a second an element (a lambda, which PySpark
#: ships by value: the executors cannot import the tests' modules).
slow = lambda x: (time.sleep(0.5), x)[1]  # noqa: E731


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


def test_slow_upstream_work_before_a_deal_out_does_not_count_as_reservation(sc_local):
    """A map that takes 8 s per partition (16 elements of 0.5 s) before the shuffle that deals
    4 partitions out to 2 nodes: with reservation_timeout=4 the nodes still start and train
    (before: ClusterTimeoutError blaming busy task slots)."""
    data = sc_local.parallelize(range(64), 4).map(slow)
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {}, num_executors=2, input_mode=SPARK, reservation_timeout=4
    )
    started = time.monotonic()
    cluster.train(data, num_epochs=1)
    assert time.monotonic() - started > 6  # the upstream work did take longer than 4 s
    results = cluster.shutdown()
    assert results is not None
    total = sum(r["sum"] for r in cluster.results.values() if r)
    assert total == sum(range(64))


def test_slow_upstream_shuffles_of_a_dataframe_under_aqe_do_not_count(spark):
    """A DataFrame whose plan has its own shuffle (a groupBy, planned adaptively) behind a slow
    UDF: the shuffles run in the cluster's Spark job, tagged, once, and do not count against a
    reservation_timeout shorter than they take."""
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    slow_udf = F.udf(slow, "long")
    df = (
        spark.range(0, 32, numPartitions=4)
        .withColumn("id", slow_udf("id"))
        .groupBy((F.col("id") % 32).alias("id"))
        .count()
        .select("id")
    )
    before = set(sc.statusTracker().getJobIdsForGroup())
    cluster = sparktf.run(
        sc,
        feed_jobs.sum_ids,
        {"col": "id"},
        num_executors=2,
        input_mode=SPARK,
        reservation_timeout=3,
    )
    cluster.train(df, num_epochs=1)
    cluster.shutdown()
    assert sum(r["sum"] for r in cluster.results.values() if r) == sum(range(32))
    untagged = (
        set(sc.statusTracker().getJobIdsForGroup()) - before - set(jobs_tagged(sc, cluster.job_id))
    )
    assert not untagged, f"Spark jobs ran outside the cluster's job: {sorted(untagged)}"


def test_inference_deals_out_and_counts_inside_the_clusters_job(sc_local):
    """Counting and dealing out an RDD for inference runs in the cluster's Spark job: no job
    of the caller's thread, untagged, comes before it."""
    data = sc_local.parallelize(range(40), 5).map(slow)
    before = set(sc_local.statusTracker().getJobIdsForGroup())
    cluster = sparktf.run(
        sc_local,
        feed_jobs.infer_double,
        {},
        num_executors=2,
        input_mode=SPARK,
        reservation_timeout=3,
    )
    out = cluster.inference(data)
    cluster.shutdown()
    assert out.collect() == [2 * x for x in range(40)]
    ran = set(sc_local.statusTracker().getJobIdsForGroup()) - before
    untagged = ran - set(jobs_tagged(sc_local, cluster.job_id))
    # the test's own collect() above is the one job of its own
    assert len(untagged) <= 1, f"Spark jobs ran outside the cluster's job: {sorted(untagged)}"


def test_busy_slots_still_time_out_within_the_reservation(sc_local):
    """The reservation clock still runs while Spark cannot launch the barrier stage: every
    slot held by another job fails within the timeout, not after that job."""
    import threading

    hog = sc_local.parallelize(range(4), 4).map(lambda x: time.sleep(10))
    holder = threading.Thread(target=hog.count, daemon=True)
    holder.start()
    from helpers.procs import wait_until

    assert wait_until(
        lambda: (
            sum(
                s.numActiveTasks
                for s in (
                    sc_local.statusTracker().getStageInfo(i)
                    for i in sc_local.statusTracker().getActiveStageIds()
                )
                if s
            )
            == 4
        )
    )
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {}, num_executors=2, input_mode=SPARK, reservation_timeout=2
    )
    started = time.monotonic()
    with pytest.raises(sparktf.ClusterTimeoutError, match="reservation_timeout"):
        cluster.train(sc_local.parallelize(range(8), 2))
    assert time.monotonic() - started < 8
    holder.join()


def test_upstream_work_that_fails_is_the_error_not_a_reservation_timeout(sc_local):
    """The user's map raises before any node started: the Spark job's own error, at once."""
    data = sc_local.parallelize(range(8), 4).map(lambda x: 1 // (x - x))
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {}, num_executors=2, input_mode=SPARK, reservation_timeout=60
    )
    started = time.monotonic()
    with pytest.raises(sparktf.SparkJobError, match="ZeroDivisionError"):
        cluster.train(data)
    assert time.monotonic() - started < 30


def test_a_large_slow_share_fed_as_it_is_keeps_every_feed_alive(sc_local):
    """feed_timeout is an idle timeout: two partitions fed as they are, one of 10 rows, one of
    120 rows that Spark computes over ~6 s. The small share's node waits for the large one to
    end (equalizing moves rows once both counts are known) far longer than feed_timeout=3,
    while rows still flow: it does not time out (before: FeedError, no progress from the
    other training nodes' feeds)."""

    def rows(index, items):
        for i in items:
            if index == 1:
                time.sleep(0.05)
            yield (i, b"x" * 20_000)  # big rows: Spark sends them a few at a time

    data = (
        sc_local.parallelize([0, 1], 2)
        .flatMap(lambda p: range(10) if p == 0 else range(10, 130))
        .mapPartitionsWithIndex(rows)
    )
    cluster = sparktf.run(sc_local, feed_jobs.sum_ids, {}, num_executors=2, input_mode=SPARK)
    cluster.train(data, num_epochs=1, feed_timeout=3)
    cluster.shutdown()
    assert sum(r["rows"] for r in cluster.results.values()) == 130
    assert cluster.rows_moved == 55


@pytest.mark.parametrize("call", ["train", "inference"])
def test_train_and_inference_take_a_timeout_as_shutdown_does(sc_local, call):
    """A node that never ends its feed: the call gives up after timeout=, stops every node
    (no_leaks) and raises ClusterTimeoutError naming the call; a bad timeout is a ConfigError."""
    cluster = sparktf.run(
        sc_local, feed_jobs.read_one_then_sleep, {"sleep": 120}, num_executors=2, input_mode=SPARK
    )
    with pytest.raises(sparktf.ConfigError, match="timeout must be a positive number"):
        getattr(cluster, call)(sc_local.parallelize(range(10), 2), timeout=-1)
    started = time.monotonic()
    with pytest.raises(sparktf.ClusterTimeoutError, match=rf"{call}\(timeout=3\) expired"):
        getattr(cluster, call)(sc_local.parallelize(range(10), 2), timeout=3)
    assert time.monotonic() - started < 30
