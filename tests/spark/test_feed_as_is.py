"""Data whose partition count Spark already knows, one partition per training node, is fed as
it is: no shuffle deals it out first, every row arrives, and under adaptive query execution no
Spark job runs before the cluster's own (real local[4] SparkContext, 2 nodes, tiny data).

Each test counts, in Spark's status store, the stages that wrote shuffle output while the
cluster ran: the data's own shuffle (an uncached ``repartition`` or ``partitionBy``) is the
user's; the deal-out would be one more.
"""

import pytest
from helpers import feed_jobs
from helpers.procs import wait_until

import sparktf
from sparktf.common.topology import assign_roles
from sparktf.driver import stages
from sparktf.driver.sparkjobs import jobs_tagged

pytestmark = pytest.mark.usefixtures("no_leaks")
ROWS = 200  # even: 2 nodes share it without a row held back


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    session = SparkSession(sc_local)
    assert session.conf.get("spark.sql.adaptive.enabled") == "true"  # AQE, Spark's default
    return session


def all_jobs(sc):
    """Every job Spark's status store knows, whatever its group (the store runs behind the
    scheduler: a job ended a moment ago may be missing; waited for where it matters)."""
    jobs = sc._jsc.sc().statusStore().jobsList(None)  # a Scala Seq
    return {jobs.apply(i).jobId() for i in range(jobs.size())}


def shuffle_writes(sc, jobs):
    """The stages of ``jobs`` that ran and wrote shuffle output (Spark's status store), once
    the store has every stage's end (its listener runs behind the jobs)."""
    store, tracker = sc._jsc.sc().statusStore(), sc.statusTracker()
    ids = sorted({s for j in jobs for s in tracker.getJobInfo(j).stageIds})

    def attempt(stage):
        try:
            return store.lastStageAttempt(stage)
        except Exception:  # never submitted (skipped before it was planned)
            return None

    def settled():
        return all(
            a is None or a.status().toString() not in ("ACTIVE", "PENDING")
            for a in map(attempt, ids)
        )

    assert wait_until(settled, timeout=30)
    return [
        s
        for s in ids
        if (a := attempt(s)) is not None
        and a.status().toString() == "COMPLETE"
        and a.shuffleWriteRecords() > 0
    ]


def feed(sc, data, caplog, **train_args):
    """Train 2 nodes over ``data`` summing its ids; returns the cluster, the stages that wrote
    shuffle output meanwhile and the driver's line saying how the data was fed."""
    caplog.set_level("INFO", logger="sparktf")
    caplog.clear()
    before = all_jobs(sc)
    cluster = sparktf.run(
        sc,
        feed_jobs.sum_ids,
        {"col": "id" if not hasattr(data, "getNumPartitions") else None},
        num_executors=2,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(data, **train_args)
    cluster.shutdown(timeout=120)
    ours = set(jobs_tagged(sc, cluster.job_id))
    assert wait_until(lambda: ours <= all_jobs(sc), timeout=30)
    ran = all_jobs(sc) - before
    assert ran == ours  # no job but the cluster's own
    said = " | ".join(r.getMessage() for r in caplog.records if "partitions" in r.getMessage())
    return cluster, shuffle_writes(sc, ran), said


def every_row_arrived(cluster):
    got = cluster.results.values()
    assert sum(r["rows"] for r in got) == ROWS and cluster.rows_held_back == 0
    assert sum(r["sum"] for r in got) == sum(range(ROWS))


def cached(data):
    data = data.cache()
    data.count()
    return data


def parquet(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("scan") / "ids.parquet")
    spark.range(0, ROWS, numPartitions=2).write.parquet(path)
    return spark.read.parquet(path)


#: The DataFrame sources, each 2 partitions of ids 0..ROWS-1 (made when a test asks: a cached
#: plan serves every equal plan after it), and how many shuffles of its own it runs.
DATAFRAMES = {
    "cached DataFrame": (
        lambda spark, _: cached(spark.range(0, ROWS, numPartitions=5).repartition(2)),
        0,
    ),
    "cached DataFrame, not computed yet": (
        lambda spark, _: spark.range(0, ROWS, numPartitions=3).repartition(2).cache(),
        1,
    ),
    "repartition(2)": (lambda spark, _: spark.range(0, ROWS, numPartitions=5).repartition(2), 1),
    "repartition(2, col)": (
        lambda spark, _: spark.range(0, ROWS, numPartitions=5).repartition(2, "id"),
        1,
    ),
    "a file scan's splits": (parquet, 0),
}


@pytest.mark.parametrize("source", list(DATAFRAMES))
def test_a_dataframe_spark_knows_in_2_partitions_is_fed_as_it_is(
    spark, tmp_path_factory, caplog, source
):
    make, own_shuffles = DATAFRAMES[source]
    df = make(spark, tmp_path_factory)
    cluster, shuffled, said = feed(spark.sparkContext, df, caplog)
    every_row_arrived(cluster)
    assert len(shuffled) == own_shuffles, said  # the data's own shuffle, no deal-out
    assert said.startswith("sparktf: feeding 2 partitions as they are (")
    assert source.split(",")[0] in said
    df.unpersist()


#: The RDD sources, each 2 partitions of 0..ROWS-1, and how many shuffles of its own it runs.
RDDS = {
    "parallelize(..., 2)": (lambda sc: sc.parallelize(range(ROWS), 2), 0),
    "partitionBy(2)": (
        lambda sc: sc.parallelize(range(ROWS), 5).map(lambda x: (x, x)).partitionBy(2).values(),
        1,
    ),
    "cached RDD": (lambda sc: cached(sc.parallelize(range(ROWS), 2)), 0),
}


@pytest.mark.parametrize("source", list(RDDS))
def test_an_rdd_in_2_partitions_is_fed_as_it_is(sc_local, caplog, source):
    make, own_shuffles = RDDS[source]
    rdd = make(sc_local)
    cluster, shuffled, said = feed(sc_local, rdd, caplog)
    every_row_arrived(cluster)
    assert len(shuffled) == own_shuffles, said
    assert said.startswith("sparktf: feeding 2 partitions as they are (")
    rdd.unpersist()


def test_rebalance_false_feeds_a_cached_dataframe_as_it_is(spark, caplog):
    df = spark.range(0, ROWS, numPartitions=5).repartition(2).selectExpr("id", "id AS x").cache()
    df.count()
    cluster, shuffled, said = feed(spark.sparkContext, df, caplog, rebalance=False)
    every_row_arrived(cluster)
    assert shuffled == [] and "cached DataFrame" in said
    df.unpersist()


def test_data_of_another_count_is_shuffled_and_the_log_says_why(spark, caplog):
    df = spark.range(0, ROWS, numPartitions=3)
    cluster, shuffled, said = feed(spark.sparkContext, df, caplog)
    every_row_arrived(cluster)
    assert len(shuffled) == 1  # the deal-out
    assert said.startswith("sparktf: shuffling into 2 partitions: ")
    assert "3 partition(s) for 2 training nodes" in said


def test_an_aggregations_output_is_not_taken_for_its_inputs_partitions(spark):
    """A groupBy over 2 partitions: adaptive execution's input plan has no exchange yet (it is
    added to the initial plan), and the aggregation looked like 2 partitions fed as they are;
    a shuffle AQE may resize is unknown until it runs."""
    from pyspark.sql import functions as F

    from sparktf.driver import layout

    rdd = spark.sparkContext.parallelize(range(ROWS), 2).map(lambda i: (i,))
    df = spark.createDataFrame(rdd, "id long").groupBy("id").agg(F.count("*").alias("n"))
    known = layout.known(df.select("id"))
    assert known.count is None and "ENSURE_REQUIREMENTS" in known.source, known


def test_adaptive_execution_runs_no_job_before_the_cluster_exists(spark):
    """Planning the feed (the cluster's stage, built before its Spark job starts) reads the
    partition count from the plan: neither the data's shuffle nor an aggregation's (whose
    count AQE may change, so it is dealt out) runs before the cluster's job."""
    sc = spark.sparkContext
    roles = assign_roles(2)
    data = [
        spark.range(0, ROWS, numPartitions=5).repartition(2),
        spark.range(0, ROWS, numPartitions=5).selectExpr("id % 7 AS k").groupBy("k").count(),
        spark.range(0, ROWS, numPartitions=4).repartition(2).cache(),
    ]
    before = all_jobs(sc)
    planned = [stages.Training(sc, roles, df, None, True) for df in data]
    assert all_jobs(sc) == before
    assert [t.rebalance for t in planned] == [False, True, False]
    data[2].unpersist()


@pytest.mark.parametrize("cache", [False, True], ids=["repartition(2)", "cached"])
def test_an_empty_dataframe_fed_as_it_is_still_starts_and_ends_the_nodes(spark, cache):
    """Adaptive execution plans an empty shuffle's result as no partitions at all: the barrier
    stage then runs no task, and the nodes must still start, get the end of their (empty)
    data and return."""
    df = spark.range(0, 0, numPartitions=3).repartition(2)
    if cache:
        df = cached(df)
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.sum_ids,
        {"col": "id"},
        num_executors=2,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(df, timeout=120)
    cluster.shutdown(timeout=120)
    assert [r["rows"] for r in cluster.results.values()] == [0, 0]
    df.unpersist()
