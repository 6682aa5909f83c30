"""What ``cluster.inference()`` returns is an ordinary Spark result: everything a user does next
with an RDD or a DataFrame works on it (issue: ``take``/``show`` raised
``BarrierJobUnsupportedRDDChainException``), in input order, one output per input row, and
after the nodes are gone (its blocks are recomputed from shuffle files, never by contacting the
cluster's closed control server)."""

import os

import pytest
from helpers import feed_jobs

import sparktf

pytestmark = pytest.mark.usefixtures("no_leaks")

SPARK = sparktf.InputMode.SPARK


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


@pytest.fixture(scope="module")
def rdd_out(sc_local):
    """An RDD of 7 partitions scored by 2 nodes, and the input it came from."""
    rdd = sc_local.parallelize(range(1000), 7)
    cluster = sparktf.run(sc_local, feed_jobs.infer_double, {}, num_executors=2, input_mode=SPARK)
    out = cluster.inference(rdd)
    assert cluster.shutdown() == "inferred"
    return rdd, out


@pytest.fixture(scope="module")
def df_out(spark):
    """A DataFrame of 3 partitions scored by 2 nodes, and the input it came from."""
    df = spark.range(0, 500, numPartitions=3)
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.infer_double_keeping_id,
        {"batch": 7},
        num_executors=2,
        input_mode=SPARK,
    )
    out = cluster.inference(df, output_schema="id long, doubled long")
    cluster.shutdown()
    return df, out


def test_an_inference_rdd_takes_firsts_and_scans_twice(rdd_out):
    _, out = rdd_out
    assert out.take(3) == [0, 2, 4]
    assert out.first() == 0
    assert out.top(2) == [1998, 1996]
    assert out.collect() == [2 * x for x in range(1000)]
    assert out.count() == 1000 and out.sum() == 2 * sum(range(1000))


def test_an_inference_rdd_zips_with_its_input_and_combines_like_any_rdd(sc_local, spark, rdd_out):
    rdd, out = rdd_out
    assert out.getNumPartitions() == rdd.getNumPartitions()
    pairs = rdd.zip(out).collect()
    assert pairs == [(x, 2 * x) for x in range(1000)]
    assert sorted(out.coalesce(2).collect()) == [2 * x for x in range(1000)]
    assert out.union(sc_local.parallelize([-1])).count() == 1001
    keyed = rdd.map(lambda x: (x, "in")).join(out.map(lambda y: (y // 2, y)))
    assert sorted(keyed.collect())[:2] == [(0, ("in", 0)), (1, ("in", 2))]
    assert out.map(lambda y: (y,)).toDF(["doubled"]).where("doubled < 6").count() == 3


def test_an_inference_dataframe_shows_limits_and_joins_back(spark, df_out, capsys):
    df, out = df_out
    out.show(3)
    assert "doubled" in capsys.readouterr().out
    assert [r.doubled for r in out.limit(3).collect()] == [0, 2, 4]
    assert out.head().doubled == 0 and out.first().id == 0
    assert [r.doubled for r in out.take(2)] == [0, 2]
    joined = df.join(out, "id").orderBy("id")
    assert [(r.id, r.doubled) for r in joined.limit(3).collect()] == [(0, 0), (1, 2), (2, 4)]
    assert joined.count() == 500
    assert out.union(out).count() == 1000
    assert [r.doubled for r in out.coalesce(1).collect()] == [2 * x for x in range(500)]
    assert [r.doubled for r in out.collect()] == [2 * x for x in range(500)]


def test_an_inference_dataframe_round_trips_through_parquet(spark, df_out, tmp_path):
    _, out = df_out
    path = os.path.join(str(tmp_path), "scores.parquet")
    out.write.parquet(path)
    back = spark.read.parquet(path).orderBy("id")
    assert [(r.id, r.doubled) for r in back.collect()] == [(x, 2 * x) for x in range(500)]


def test_an_inference_rdd_becomes_a_dataframe(spark, rdd_out):
    _, out = rdd_out
    df = spark.createDataFrame(out.map(lambda y: (y,)), "doubled long")
    assert df.where("doubled % 4 = 0").count() == 500
    assert df.limit(2).collect()[1].doubled == 2


def test_a_lost_cached_block_is_recomputed_without_the_closed_cluster(sc_local, rdd_out):
    """Unpersisting drops every cached block, as losing them would: the next scan recomputes
    from what the inference left behind, not by starting nodes again (the control server that
    would have answered them is closed)."""
    _, out = rdd_out
    out.unpersist(blocking=True)
    assert out.collect() == [2 * x for x in range(1000)]
    assert out.take(1) == [0]


def test_a_second_inference_in_the_same_session_gives_its_own_result(sc_local, rdd_out):
    _, first = rdd_out
    cluster = sparktf.run(sc_local, feed_jobs.infer_double, {}, num_executors=2, input_mode=SPARK)
    second = cluster.inference(sc_local.parallelize(range(10, 20), 2))
    cluster.shutdown()
    assert second.take(2) == [20, 22]
    assert first.take(2) == [0, 2]


@pytest.mark.tf
def test_the_guides_inference_example_runs_as_written(spark):
    """docs/guides/input-modes.md: ``{"id": ..., "prediction": model.predict(x)}`` under
    ``output_schema="id long, prediction double"``. Keras' predict gives (n, 1): inside a dict
    it fills the scalar column as a bare (n, 1) array does (it raised ArrowInvalid)."""
    df = spark.range(0, 10, numPartitions=3).selectExpr(
        "id", "array(cast(id as float), cast(1 as float)) as x"
    )
    cluster = sparktf.run(
        spark.sparkContext, feed_jobs.score_as_the_guide_does, {}, num_executors=2, input_mode=SPARK
    )
    out = cluster.inference(df, output_schema="id long, prediction double")
    cluster.shutdown(timeout=120)
    rows = df.join(out, "id").orderBy("id").collect()
    assert [(r.id, r.prediction) for r in rows] == [(i, i + 1.0) for i in range(10)]
