"""InputMode.SPARK on a real local[4] SparkContext: where rows go, epochs, columnar batches,
skew, early stop, timeouts, and that the nodes' temporary files are gone afterwards."""

import glob
import os
import tempfile
import threading
import time

import cloudpickle
import pytest
from helpers import feed_jobs

import sparktf
from sparktf.driver.sparkjobs import jobs_tagged

cloudpickle.register_pickle_by_value(feed_jobs)
pytestmark = pytest.mark.usefixtures("no_leaks")
SPARK = sparktf.InputMode.SPARK


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


def train(sc, fn, args, data, nodes=2, num_ps=0, **kwargs):
    cluster = sparktf.run(
        sc,
        fn,
        args,
        num_executors=nodes,
        num_ps=num_ps,
        input_mode=SPARK,
        eval_node=kwargs.pop("eval_node", False),
    )
    cluster.train(data, **kwargs)
    cluster.shutdown(timeout=120)
    return cluster


@pytest.mark.parametrize("epochs", [1, 3])
def test_every_rdd_row_reaches_exactly_one_worker_once_per_epoch(sc_local, epochs):
    data = sc_local.parallelize(range(1, 2001), 5)
    cluster = train(
        sc_local, feed_jobs.sum_ids, {"col": None}, data, nodes=4, num_ps=1, num_epochs=epochs
    )
    trainers = {k: v for k, v in cluster.results.items() if not k.startswith("ps")}
    assert set(trainers) == {"chief:0", "worker:0", "worker:1"}  # the ps got no data
    assert sum(r["sum"] for r in trainers.values()) == epochs * sum(range(1, 2001))
    assert sum(r["rows"] for r in trainers.values()) == epochs * 2000
    rows = sorted(r["rows"] for r in trainers.values())
    assert rows[-1] - rows[0] <= 5 * epochs  # dealt out evenly


def test_every_dataframe_row_reaches_exactly_one_worker_once_per_epoch(spark):
    df = spark.range(0, 3000, numPartitions=7)
    cluster = train(
        spark.sparkContext,
        feed_jobs.sum_ids,
        {"col": "id"},
        df,
        nodes=3,
        equalize=False,
        num_epochs=2,
        shuffle=True,
    )
    assert sum(r["sum"] for r in cluster.results.values()) == 2 * sum(range(3000))
    assert sum(r["rows"] for r in cluster.results.values()) == 6000


def test_dataframe_columns_become_numpy_arrays(spark):
    from pyspark.sql import functions as F

    df = (
        spark.range(0, 100, numPartitions=2)
        .withColumn("features", F.array(*[(F.col("id") + i).cast("float") for i in range(3)]))
        .withColumn("image", F.array(*[F.array(F.lit(1.0), F.lit(2.0))] * 2))
        .withColumn("raw", F.col("id").cast("string").cast("binary"))
        .withColumn("label", F.col("id").cast("string"))
    )
    cluster = train(spark.sparkContext, feed_jobs.describe_batch, {}, df, equalize=False)
    batch = cluster.results["chief:0"]
    assert batch["features"][0] == "float32" and batch["features"][1] == (4, 3)
    assert batch["image"][1] == (4, 2, 2)  # nested arrays: one more dimension each
    assert batch["id"][0] == "int64" and batch["id"][1] == (4,)
    assert batch["raw"][0] == "object" and isinstance(batch["raw"][2], bytes)
    assert batch["label"][0] == "object" and isinstance(batch["label"][2], str)


@pytest.mark.parametrize("rebalance", [None, True])
def test_spark_ml_vectors_timestamps_and_dates_are_fed_as_arrays(spark, rebalance):
    """VectorAssembler's output (dense or sparse vectors) reaches main_fn as a 2-D float64
    array; a timestamp column as datetime64 (Spark's session time zone, as Spark's own
    mapInArrow gives it); fed as it is (one partition per node) or dealt out."""
    import datetime

    from pyspark.ml.feature import VectorAssembler
    from pyspark.ml.linalg import Vectors

    rows = [
        (
            float(i),
            float(2 * i),
            Vectors.sparse(3, [i % 3], [1.0]),
            datetime.datetime(2020, 1, 1, 12, 0, i),
            datetime.date(2020, 1, 1 + i),
        )
        for i in range(8)
    ]
    df = spark.createDataFrame(rows, ["a", "b", "onehot", "when", "day"]).repartition(2)
    df = VectorAssembler(inputCols=["a", "b"], outputCol="features").transform(df)
    cluster = train(
        spark.sparkContext, feed_jobs.describe_batch, {}, df, equalize=False, rebalance=rebalance
    )
    batch = cluster.results["chief:0"]
    assert batch["features"][:2] == ("float64", (4, 2))
    assert batch["features"][2] == [batch["a"][2], batch["b"][2]]
    assert batch["onehot"][0] == "float64" and batch["onehot"][1] == (4, 3)
    assert sum(batch["onehot"][2]) == 1.0
    assert batch["when"][0].startswith("datetime64") and batch["day"][0].startswith("datetime64")


def test_inference_reads_vectors_and_answers_timestamps(spark):
    from pyspark.ml.feature import VectorAssembler

    df = VectorAssembler(inputCols=["id"], outputCol="v").transform(
        spark.range(0, 10, numPartitions=3).selectExpr("cast(id as double) id")
    )
    cluster = sparktf.run(
        spark.sparkContext, feed_jobs.infer_timestamps, {}, num_executors=2, input_mode=SPARK
    )
    out = cluster.inference(df, output_schema="at timestamp, v double").collect()
    cluster.shutdown(timeout=120)
    assert [r.v for r in out] == [float(i) for i in range(10)]
    assert [r.at.second for r in out] == list(range(10))


def test_input_mapping_selects_and_renames_columns(spark):
    df = spark.range(0, 10, numPartitions=2).selectExpr("id", "id * 2 as y")
    cluster = train(
        spark.sparkContext,
        feed_jobs.describe_batch,
        {"mapping": {"y": "label"}},
        df,
        equalize=False,
    )
    assert set(cluster.results["chief:0"]) == {"label"}


def test_skewed_input_gives_synchronous_workers_equal_steps(sc_local):
    data = sc_local.parallelize(range(10000), 1).union(sc_local.parallelize(range(10000, 10010), 1))
    assert data.glom().map(len).collect() == [10000, 10]
    cluster = train(sc_local, feed_jobs.sum_ids, {"col": None, "batch": 64}, data, nodes=2)
    chief, worker = cluster.results["chief:0"], cluster.results["worker:0"]
    assert chief["batches"] == worker["batches"]  # equal steps: synchronous training can't hang
    assert chief["rows"] == worker["rows"]
    held = chief["held_back"] + worker["held_back"]
    assert held == cluster.rows_held_back == 0  # rebalanced, then equalized: 10,010 is even
    assert chief["rows"] + worker["rows"] + held == 10010


def test_skew_without_rebalancing_holds_back_and_still_completes(sc_local):
    data = (
        sc_local.parallelize(range(1010), 4)
        .map(lambda x: (x, x))
        .partitionBy(2, lambda k: 0 if k < 1000 else 1)
        .values()
    )
    assert data.glom().map(len).collect() == [1000, 10]
    cluster = train(
        sc_local, feed_jobs.sum_ids, {"col": None}, data, nodes=2, rebalance=False, num_epochs=2
    )
    assert cluster.results["chief:0"]["rows"] == cluster.results["worker:0"]["rows"] == 20
    assert cluster.rows_held_back == 2 * 990


def test_a_lineage_spark_cannot_barrier_gets_a_hint(sc_local):
    data = sc_local.parallelize(range(10), 1).union(sc_local.parallelize(range(10), 1))
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {"col": None}, num_executors=2, input_mode=SPARK
    )
    with pytest.raises(sparktf.SparkJobError, match="without rebalance=False"):
        cluster.train(data, rebalance=False)


def test_terminate_stops_the_feed_without_reading_the_rest(sc_local):
    data = sc_local.parallelize(range(2_000_000), 2)
    start = time.monotonic()
    cluster = train(
        sc_local, feed_jobs.read_one_then_stop, None, data, nodes=2, rebalance=False, equalize=False
    )
    assert time.monotonic() - start < 30
    assert cluster.results["chief:0"] == {"rows": 10, "stopped": True}


def test_feed_timeout_is_an_idle_timeout(sc_local):
    # Far more than the read-ahead and socket buffers hold (200 MB a node), so Spark must wait.
    data = sc_local.parallelize(range(100_000), 2).map(lambda i: i.to_bytes(8, "little") * 512)
    cluster = sparktf.run(
        sc_local, feed_jobs.read_one_then_sleep, {"sleep": 60}, num_executors=2, input_mode=SPARK
    )
    start = time.monotonic()
    with pytest.raises(sparktf.SparkTFError, match="feed_timeout=2s"):
        cluster.train(data, feed_timeout=2, rebalance=False, equalize=False)
    assert time.monotonic() - start < 30


def test_only_the_chief_and_workers_get_data(spark):
    cluster = train(
        spark.sparkContext,
        feed_jobs.evaluator_asks_for_data,
        None,
        spark.range(0, 100, numPartitions=2),
        nodes=3,
        eval_node=True,
    )
    assert "only the chief and the workers" in cluster.results["evaluator:0"]
    assert cluster.results["chief:0"]["rows"] + cluster.results["worker:0"]["rows"] == 100


def test_node_directories_and_spools_are_removed(sc_local):
    cluster = train(
        sc_local,
        feed_jobs.sum_ids,
        {"col": None},
        sc_local.parallelize(range(500), 2),
        nodes=2,
        num_epochs=2,
    )
    spool_dir = cluster.results["chief:0"]["spool_dir"]
    assert spool_dir and not os.path.exists(spool_dir)
    where = os.path.dirname(spool_dir)
    assert not glob.glob(os.path.join(where, f"sparktf-{cluster.job_id}-*"))
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"sparktf-{cluster.job_id}-*"))


def test_train_arguments_and_state_are_checked(sc_local):
    tf_mode = sparktf.run(sc_local, feed_jobs.sum_ids, {}, num_executors=1)
    with pytest.raises(sparktf.ClusterStateError, match="needs InputMode.SPARK"):
        tf_mode.train(sc_local.parallelize([1]))
    with pytest.raises(sparktf.NodeError):
        tf_mode.shutdown()  # its main_fn asked for a feed it cannot have
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {"col": None}, num_executors=2, input_mode=SPARK
    )
    with pytest.raises(sparktf.ConfigError) as err:
        cluster.train([1, 2, 3], num_epochs=0, feed_timeout=-1, shuffle="yes")
    assert len(err.value.problems) == 4
    cluster.train(sc_local.parallelize(range(10), 2))
    with pytest.raises(sparktf.ClusterStateError, match="can be called once per cluster"):
        cluster.train(sc_local.parallelize(range(10), 2))
    cluster.shutdown()


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda spark: spark.range(10).select("id", "id"), r"more than one column named \['id'\]"),
        (lambda spark: spark.readStream.format("rate").load(), "data is a streaming DataFrame"),
    ],
)
def test_dataframes_that_cannot_be_fed_are_refused_before_any_node_starts(spark, make, says):
    cluster = sparktf.run(
        spark.sparkContext, feed_jobs.sum_ids, {"col": "id"}, num_executors=2, input_mode=SPARK
    )
    for call in (cluster.train, cluster.inference):
        with pytest.raises(sparktf.ConfigError, match=says):
            call(make(spark))
    assert cluster.status is sparktf.Status.CREATED
    cluster.shutdown()


@pytest.mark.slow
@pytest.mark.tf
def test_multi_worker_mirrored_training_on_skewed_spark_data(spark):
    """Real MWMS + tf-keras fit on a DataFrame split 2000 : 7 over two partitions, fed as they
    are: the worker's steps wait for the chief's last 996 rows while the chief's steps wait for
    the worker's (MWMS's all-reduce), so the rows must move while both train."""
    import numpy as np
    from helpers.procs import TF_ENV

    rng = np.random.RandomState(0)
    x = rng.randn(2007, 4)
    y = x @ np.array([1.0, 2.0, 3.0, 4.0]) + 0.5
    rows = [(x[i].tolist(), float(y[i])) for i in range(2007)]
    split = (
        spark.sparkContext.parallelize(list(enumerate(rows)), 4)
        .partitionBy(2, lambda i: 0 if i < 2000 else 1)
        .values()
    )
    df = spark.createDataFrame(split, "x array<float>, y float")
    assert df.rdd.glom().map(len).collect() == [2000, 7]
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.mwms_on_feed,
        {"batch": 32, "epochs": 3},
        num_executors=2,
        input_mode=SPARK,
        env=TF_ENV,
    )
    cluster.train(df, num_epochs=3)
    chief = cluster.shutdown(timeout=300)
    assert chief["loss"][-1] < 0.1 * chief["loss"][0]
    assert cluster.rows_moved == 996 and cluster.rows_held_back == 3  # a row an epoch
    # batch=32 is the global batch: TF splits each of a node's 32-row batches over the 2
    # replicas, so a step takes 16 rows of each node and an epoch is ~2007 / 32 = 63 steps
    # (not 126, as a per-node batch of 16 would make it): 2 per 32-row batch of the share.
    worker = cluster.results["worker:0"]
    rows = chief["rows_per_epoch"]
    assert worker["rows_per_epoch"] == rows  # equalized
    assert chief["steps"] == worker["steps"] == [2 * -(-rows // 32)] * 3, (chief["steps"], rows)
    assert 62 <= chief["steps"][0] <= 64


def test_inference_over_an_rdd_keeps_input_order(sc_local):
    cluster = sparktf.run(sc_local, feed_jobs.infer_double, {}, num_executors=3, input_mode=SPARK)
    out = cluster.inference(sc_local.parallelize(range(1000), 7))
    assert out.collect() == [2 * x for x in range(1000)]
    assert cluster.shutdown() == "inferred"


def test_inference_over_an_rdd_read_from_sparks_socket_answers_every_row_in_order(sc_local):
    """Large enough partitions that the nodes read Spark's socket themselves (a small one is
    wholly in the worker's buffer and is forwarded): outputs come back through the task,
    every row once, in order, and the reused workers run the next jobs."""
    cluster = sparktf.run(
        sc_local,
        feed_jobs.infer_double_saying_where_from,
        {"batch": 512},
        num_executors=2,
        input_mode=SPARK,
    )
    out = cluster.inference(sc_local.parallelize(range(300_000), 2))
    assert out.collect() == [2 * x for x in range(300_000)]
    assert cluster.shutdown() == {"from_spark_socket": True}
    check_plain_jobs(sc_local)


def test_inference_over_a_dataframe_keeps_input_order(spark):
    df = spark.range(0, 500, numPartitions=2)
    cluster = sparktf.run(
        spark.sparkContext, feed_jobs.infer_double, {"batch": 7}, num_executors=2, input_mode=SPARK
    )
    out = cluster.inference(df, output_schema="doubled long")
    assert out.columns == ["doubled"]
    assert [r.doubled for r in out.collect()] == [2 * x for x in range(500)]
    cluster.shutdown()
    # persisted before the nodes went: read again (two stages of its own), not recomputed
    assert out.count() == 500 and out.storageLevel.useMemory


def test_inference_takes_a_structtype_output_schema_as_spark_does(spark):
    """output_schema as Spark's own APIs take it (mapInArrow, createDataFrame): a StructType
    as well as a DDL string (a ConfigError before)."""
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField("doubled", LongType())])
    cluster = sparktf.run(
        spark.sparkContext, feed_jobs.infer_double, {"batch": 7}, num_executors=2, input_mode=SPARK
    )
    out = cluster.inference(spark.range(0, 50, numPartitions=2), output_schema=schema)
    cluster.shutdown()
    assert out.schema == schema
    assert [r.doubled for r in out.collect()] == [2 * x for x in range(50)]


@pytest.mark.parametrize(
    "data, fragment",
    [
        ("pandas", "a pandas DataFrame (spark.createDataFrame(pdf) makes a Spark DataFrame of it)"),
        ("list", "list (sc.parallelize(...) makes an RDD of it)"),
        ("numpy", "a numpy ndarray (sc.parallelize(...) makes an RDD of it)"),
        ("pandas-on-Spark", "a pandas-on-Spark DataFrame (.to_spark() makes a Spark DataFrame"),
    ],
)
def test_data_that_is_not_sparks_says_what_it_is_and_how_to_make_it(sc_local, data, fragment):
    import numpy as np
    import pandas as pd

    if data == "pandas-on-Spark":
        import pyspark.pandas as ps

        # PySpark 4.0 refuses pandas-on-Spark under ANSI mode (its default) unless told
        with ps.option_context("compute.fail_on_ansi_mode", False):
            given = ps.DataFrame({"a": [1]})
    else:
        given = {"pandas": pd.DataFrame({"a": [1]}), "list": [1, 2], "numpy": np.arange(3)}[data]
    cluster = sparktf.run(sc_local, feed_jobs.infer_double, {}, num_executors=2, input_mode=SPARK)
    with pytest.raises(sparktf.ConfigError) as err:
        cluster.train(given)
    assert f"data must be a pyspark RDD or DataFrame, got {fragment}" in str(err.value)
    cluster.shutdown()


@pytest.mark.parametrize("partitions", [2, 3], ids=["one-per-node", "dealt-out"])
def test_inference_over_an_empty_dataframe_answers_nothing_and_ends(spark, partitions):
    df = spark.range(0, 10, numPartitions=partitions).where("id < 0")
    cluster = sparktf.run(
        spark.sparkContext, feed_jobs.infer_double, {"batch": 7}, num_executors=2, input_mode=SPARK
    )
    out = cluster.inference(df, output_schema="doubled long")
    assert out.columns == ["doubled"] and out.collect() == []
    assert cluster.shutdown(timeout=60) == "inferred"


@pytest.mark.parametrize(
    "shape, schema, expected, tensor",
    [
        ("(n, 1)", "prediction double", [[2.0 * i] for i in range(10)], False),  # model.predict
        ("(n,)", "prediction float", [[2.0 * i] for i in range(10)], False),
        ("(n, 2)", "scores array<float>", [[[i, 2.0 * i]] for i in range(10)], False),
        ("dict", "a float, b double", [[i, 2.0 * i] for i in range(10)], False),  # named outputs
        ("(n, 1)", "prediction double", [[2.0 * i] for i in range(10)], True),  # model(x)
        ("dict", "b double, a float", [[2.0 * i, i] for i in range(10)], True),
    ],
)
@pytest.mark.tf
def test_inference_takes_a_numpy_batch_of_outputs(spark, shape, schema, expected, tensor):
    """feed.batch_results(model.predict(x)): a numpy array with a row per input row, as Keras
    returns it ((n, 1) for one number per row), fills a scalar or an array column; a dict of
    them (a model's named outputs) fills the columns of those names; eager tensors (what
    model(x) returns) count as their numpy values."""
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.infer_numpy,
        {"shape": shape, "tensor": tensor},
        num_executors=2,
        input_mode=SPARK,
    )
    out = cluster.inference(spark.range(0, 10, numPartitions=3), output_schema=schema)
    assert [list(r) for r in out.collect()] == expected
    cluster.shutdown(timeout=120)


@pytest.mark.tf
def test_inference_outputs_that_do_not_fit_the_schema_say_so(spark):
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.infer_numpy,
        {"shape": "(n, 2)"},
        num_executors=2,
        input_mode=SPARK,
    )
    with pytest.raises(
        sparktf.NodeError,
        match=r"output_schema's prediction is double: one "
        r"number per row, but main_fn's outputs are "
        r"arrays of shape \(2,\)",
    ):
        cluster.inference(spark.range(0, 10, numPartitions=2))
    with pytest.raises(sparktf.SparkTFError):
        cluster.shutdown(timeout=120)


def test_a_training_main_fn_under_inference_is_told_what_to_change(spark):
    cluster = sparktf.run(
        spark.sparkContext, feed_jobs.sum_ids, {"col": "id"}, num_executors=2, input_mode=SPARK
    )
    with pytest.raises(sparktf.NodeError, match="use train_mode=False"):
        cluster.inference(spark.range(0, 50, numPartitions=2))


def test_node_directories_are_removed_when_spark_sigkills_a_task(sc_local, tmp_path):
    """A SIGKILLed Spark Python worker never runs its cleanup: the supervisor does it."""
    import json
    import signal

    from helpers.procs import wait_until

    data = sc_local.parallelize(range(50_000), 2).map(lambda i: i.to_bytes(8, "little") * 512)
    cluster = sparktf.run(
        sc_local,
        feed_jobs.read_then_record_pids,
        {"dir": str(tmp_path)},
        num_executors=2,
        input_mode=SPARK,
    )
    files = [tmp_path / "chief_0.json", tmp_path / "worker_0.json"]
    errors = []
    trainer = threading.Thread(target=lambda: _train_expecting_failure(cluster, data, errors))
    trainer.start()
    assert wait_until(lambda: all(f.exists() for f in files), timeout=60)
    nodes = [json.loads(f.read_text()) for f in files]
    assert all(os.path.isdir(n["work_dir"]) for n in nodes)
    os.kill(nodes[1]["task_worker"], signal.SIGKILL)
    trainer.join(timeout=60)
    assert errors and isinstance(errors[0], sparktf.NodeError)
    assert wait_until(lambda: not any(os.path.exists(n["work_dir"]) for n in nodes), timeout=15)
    pattern = os.path.join(tempfile.gettempdir(), f"sparktf-{cluster.job_id}-*")
    assert not glob.glob(pattern)


def _train_expecting_failure(cluster, data, errors):
    try:
        cluster.train(data, num_epochs=2, rebalance=False, equalize=False)
    except Exception as exc:
        errors.append(exc)


@pytest.mark.parametrize("kind", ["rdd", "dataframe"])
def test_default_equalization_delivers_each_row_at_most_once_and_counts_the_rest(spark, kind):
    """Under the default (equalize on, no ps): which rows, not only how many. In every epoch
    no row reaches two nodes or one node twice, every node takes the same number of rows, and
    the rows nobody got are exactly what cluster.rows_held_back reports."""
    n = 1003  # not a multiple of the 2 workers: equalization must hold rows back
    data = (
        spark.sparkContext.parallelize(range(n), 3)
        if kind == "rdd"
        else spark.range(0, n, numPartitions=3)
    )
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.ids_per_epoch,
        {"col": "id"},
        num_executors=2,
        input_mode=SPARK,
    )
    cluster.train(data, num_epochs=2)
    cluster.shutdown(timeout=120)
    results = list(cluster.results.values())
    held = 0
    for epoch in range(2):
        per_node = [r["epochs"][epoch] for r in results]
        delivered = [i for ids in per_node for i in ids]
        assert len(delivered) == len(set(delivered))  # at most once
        assert set(delivered) <= set(range(n))
        assert len({len(ids) for ids in per_node}) == 1  # equal steps for every worker
        held += n - len(delivered)
    assert held == cluster.rows_held_back == sum(r["held_back"] for r in results)
    assert held == 2 * (n % 2)  # the odd row of each epoch, no more


def _barrier_runs(data) -> bool:
    from pyspark import RDD

    try:
        if isinstance(data, RDD):
            data.barrier().mapPartitions(lambda it: [sum(1 for _ in it)]).collect()
        else:
            data.mapInArrow(lambda it: it, data.schema, barrier=True).collect()
        return True
    except Exception as exc:
        assert "BarrierJobUnsupportedRDDChainException" in str(exc)
        return False


def test_lineages_spark_cannot_barrier_are_told_apart_without_a_job(spark, sc_local):
    """Data with one partition per node is fed as it is only where Spark accepts a barrier
    stage over it (a union or coalesce in its last stage must be dealt out instead); the
    check runs no Spark job beyond counting the partitions, and agrees with what Spark does."""
    from sparktf.driver import partition

    sc = sc_local
    data = [
        sc.parallelize(range(10), 2),
        sc.parallelize(range(10), 4).map(lambda x: (x, x)).partitionBy(2).values(),
        spark.range(0, 10, numPartitions=2).where("id > 3"),
        spark.range(0, 10, numPartitions=5).repartition(2),
        spark.range(0, 10, numPartitions=1).union(spark.range(0, 10, numPartitions=1)),
        sc.parallelize(range(10), 1).union(sc.parallelize(range(10), 1)),
        sc.parallelize(range(10), 4).coalesce(2),
        spark.range(0, 10, numPartitions=4).coalesce(2),
        spark.range(0, 10, numPartitions=1).union(spark.range(0, 10, numPartitions=1).coalesce(1)),
    ]
    for d in data:  # as train() does first
        (d if hasattr(d, "getNumPartitions") else d.rdd).getNumPartitions()
    jobs_before = set(sc.statusTracker().getJobIdsForGroup())
    said = [partition.barrier_ready(d) for d in data]
    assert set(sc.statusTracker().getJobIdsForGroup()) == jobs_before
    assert said == [_barrier_runs(d) for d in data]
    assert said.count(False) >= 3 and said.count(True) >= 4


def test_data_found_barrier_ready_is_not_walked_again(spark, sc_local, monkeypatch):
    """train() over the same RDD or DataFrame again (epochs in a loop, a second job) does
    not walk its lineage on the JVM again: the answer stays with the data; data that Spark
    cannot barrier is checked every time."""
    import py4j.clientserver
    import py4j.java_gateway

    from sparktf.driver import partition

    ready = [
        sc_local.parallelize(range(10), 2).map(lambda x: (x, x)),
        spark.range(0, 10, numPartitions=2).where("id > 3"),
    ]
    not_ready = sc_local.parallelize(range(10), 4).coalesce(2)
    assert [partition.barrier_ready(d) for d in ready] == [True, True]
    assert partition.barrier_ready(not_ready) is False
    calls = []
    for cls in (py4j.clientserver.ClientServerConnection, py4j.java_gateway.GatewayConnection):

        def counted(self, command, _send=cls.send_command):
            calls.append(command)
            return _send(self, command)

        monkeypatch.setattr(cls, "send_command", counted)
    assert [partition.barrier_ready(d) for d in ready] == [True, True]
    assert calls == []
    assert partition.barrier_ready(not_ready) is False
    assert calls  # walked again


@pytest.mark.parametrize("kind", ["rdd", "dataframe", "dataframe in 18 batches"])
def test_partitions_fed_as_they_are_move_only_the_surplus_rows(spark, kind):
    """One partition per node, 30 : 171 rows, not cached: no Spark job counts them and no
    shuffle deals them out; the chief keeps its 30 rows and takes 70 of the worker's last rows
    after its own, the worker keeps its first 101 and holds back the one row that cannot be
    split. Every epoch (shuffled from the spools) has the same rows on each node.

    In 18 Arrow batches, the worker's partition is more than its read-ahead (4 frames) while
    its consumer waits at the chief's 30 rows: it must still read to its end (the rest goes to
    its spool), or no share would ever be known as final."""
    ids = list(range(30)) + list(range(1000, 1171))
    if kind == "rdd":
        data = (
            spark.sparkContext.parallelize(ids, 4)
            .map(lambda x: (x, x))
            .partitionBy(2, lambda k: 0 if k < 1000 else 1)
            .values()
        )
        assert data.glom().map(len).collect() == [30, 171]
    else:
        data = spark.range(0, 1171, numPartitions=2).where("id < 30 or id >= 1000")
    sc = spark.sparkContext
    cluster = sparktf.run(
        sc, feed_jobs.ids_per_epoch, {"col": "id", "batch": 8}, num_executors=2, input_mode=SPARK
    )
    jobs_before = set(sc.statusTracker().getJobIdsForGroup())
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    if "18 batches" in kind:
        spark.conf.set(key, "10")
    try:
        cluster.train(data, num_epochs=3, shuffle=True, feed_timeout=15)
    finally:
        spark.conf.unset(key)
    cluster.shutdown(timeout=120)
    # no Spark job but the barrier stage's (tagged with the cluster's id)
    jobs_after = set(sc.statusTracker().getJobIdsForGroup())
    assert jobs_after - set(jobs_tagged(sc, cluster.job_id)) == jobs_before
    chief, worker = cluster.results["chief:0"], cluster.results["worker:0"]
    assert cluster.rows_moved == 70 and cluster.rows_held_back == 3  # one row, 3 epochs
    first = chief["epochs"][0]
    assert first[:30] == list(range(30))  # its own partition first, as it came
    assert sorted(first[30:]) == list(range(1101, 1171))  # then the worker's last rows
    assert worker["epochs"][0] == list(range(1000, 1100))  # its first rows, in order
    for epoch in range(3):
        mine, theirs = chief["epochs"][epoch], worker["epochs"][epoch]
        assert len(mine) == len(theirs) == 100
        assert set(mine) == set(first)  # the moved rows stay the chief's in later epochs
        assert len(set(theirs)) == 100 and set(theirs) <= set(range(1000, 1101))
    assert chief["epochs"][1] != chief["epochs"][2]  # shuffled between epochs


def test_a_giver_that_dies_while_its_rows_move_fails_the_job_at_once(spark):
    """The worker holds 171 of 201 rows and must give 70 to the chief; it exits as soon as it
    has taken its 40th row. The chief, waiting for those rows, must not wait out the
    feed_timeout: the job fails with the worker's exit, and nothing is left behind."""
    data = spark.range(0, 1171, numPartitions=2).where("id < 30 or id >= 1000")
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.give_then_die,
        {"col": "id", "die": "worker:0", "after": 40},
        num_executors=2,
        input_mode=SPARK,
    )
    started = time.monotonic()
    with pytest.raises(sparktf.NodeError, match="worker:0") as err:
        cluster.train(data)
    assert "exited with code 3" in str(err.value)
    assert time.monotonic() - started < 60  # feed_timeout is 600


def test_a_worker_that_ignores_its_feed_fails_the_job_instead_of_stalling_the_chief(sc_local):
    """Under equalization the chief waits for the worker's rows; a worker whose main_fn returns
    without opening its feed used to leave it waiting until feed_timeout (600 s)."""
    started = time.monotonic()
    with pytest.raises(sparktf.NodeError, match="without reading its data feed") as err:
        train(sc_local, feed_jobs.only_the_chief_reads, {}, sc_local.parallelize(range(100), 2))
    assert err.value.node == "worker:0" and "equalize=False" in str(err.value)
    assert time.monotonic() - started < 60
    cluster = train(
        sc_local,
        feed_jobs.only_the_chief_reads,
        {},
        sc_local.parallelize(range(100), 2),
        equalize=False,
    )
    assert cluster.results == {"chief:0": 50, "worker:0": 0}  # what equalize=False allows


def test_a_dataframe_fed_node_has_a_forked_supervisor_too(spark):
    """The Spark Python worker of a barrier mapInArrow has pyarrow's jemalloc background
    thread besides its own: that thread is fork-safe (jemalloc's fork handlers), so the
    supervisor is still forked, not started as an interpreter of its own."""
    df = spark.range(0, 500, numPartitions=2).selectExpr("id", "id * 2.0 AS x")
    cluster = train(spark.sparkContext, feed_jobs.drain_then_describe_supervisor, None, df)
    for node, r in cluster.results.items():
        assert "sparktf.task.supervisor" not in " ".join(r["supervisor_cmdline"]), (node, r)


@pytest.mark.parametrize("parts,trainers", [(4, 3), (7, 3), (5, 2), (6, 4), (9, 5)])
def test_data_dealt_out_over_a_shuffle_gives_every_trainer_an_even_share(spark, parts, trainers):
    """rebalance deals each partition's rows round the trainers from an offset of its own, so
    that the shares differ by a row at most and equalization holds back fewer rows than there
    are trainers. (The DataFrame's offset came out 0 for every partition with 3 trainers:
    2**33, the step of monotonically_increasing_id between partitions, is 2 mod 3; 1,000 rows
    in 4 partitions gave 336/332/332, and 4 rows an epoch were held back.)"""
    from sparktf.driver import partition

    nodes = trainers + 1  # a parameter server's partition stays empty
    df = spark.range(0, 1000, numPartitions=parts)
    shares = partition.dataframe_for_nodes(df, nodes, trainers).rdd.glom().map(len).collect()
    assert sum(shares) == 1000 and shares[trainers:] == [0]
    assert max(shares[:trainers]) - min(shares[:trainers]) <= 1, shares
    rdd = spark.sparkContext.parallelize(range(1000), parts)
    shares = partition.rdd_for_nodes(rdd, nodes, trainers).glom().map(len).collect()
    assert sum(shares) == 1000 and shares[trainers:] == [0]
    assert max(shares[:trainers]) - min(shares[:trainers]) <= 1, shares


def check_plain_jobs(sc):
    """Jobs after a feed, on the Python workers Spark reuses: each must find its stream where
    the worker expects it (a worker left in the middle of a partition's data would fail)."""
    for _ in range(3):
        assert sc.parallelize(range(10_000), 4).map(lambda i: i * 2).sum() == 99_990_000
        assert sc.parallelize(range(100), 4).glom().map(len).collect() == [25] * 4


def test_an_rdd_feed_reads_sparks_socket_and_leaves_the_workers_fit_for_reuse(sc_local):
    """The barrier task passes its node the Python worker's own socket to the executor; the
    node reads the partition's data to its end, not a byte further, and the workers Spark
    reuses afterwards work, for plain jobs and for the next feed."""
    data = sc_local.parallelize(range(200_000), 2).map(lambda i: (i, bytes(64)))  # > buffers
    for _ in range(2):
        cluster = train(
            sc_local,
            feed_jobs.sum_ids_saying_where_from,
            {"col": None},
            data,
            nodes=2,
            rebalance=False,
            equalize=False,
        )
        got = cluster.results
        assert got["chief:0"]["from_spark_socket"] and got["worker:0"]["from_spark_socket"]
        assert got["chief:0"]["rows"] + got["worker:0"]["rows"] == 200_000
        assert got["chief:0"]["sum"] + got["worker:0"]["sum"] == sum(range(200_000))
        check_plain_jobs(sc_local)


def test_a_node_that_stops_reading_sparks_socket_early_leaves_no_worker_behind(sc_local):
    """A node that returns after a few rows (or terminates) stops in the middle of Spark's
    data: its task closes the worker's reader, so Spark does not reuse that worker, and the
    jobs after it run on fresh ones."""
    data = sc_local.parallelize(range(400_000), 2).map(lambda i: (i, bytes(64)))
    cluster = train(
        sc_local,
        feed_jobs.read_some_then_return,
        {"rows": 7},
        data,
        nodes=2,
        rebalance=False,
        equalize=False,
    )
    assert cluster.results["chief:0"] == {"rows": 7, "from_spark_socket": True}
    check_plain_jobs(sc_local)
    cluster = train(
        sc_local, feed_jobs.read_one_then_stop, None, data, nodes=2, rebalance=False, equalize=False
    )
    assert cluster.results["chief:0"] == {"rows": 10, "stopped": True}
    check_plain_jobs(sc_local)


def test_a_node_that_returns_with_its_share_unread_says_so(sc_local, capfd):
    """train(num_epochs=2) while main_fn trains one epoch (model.fit(ds, epochs=1)), or stops
    in the middle of an epoch: the rows left are not trained on. The job still ends (returning
    stops the feed, as terminate() does), and the node's output says what was left and how to
    read it all. A main_fn that read exactly its share, never asking for more, or that
    called terminate(), gets no such line."""
    rdd = sc_local.parallelize(range(400), 2).cache()
    rdd.count()
    cases = [
        ({"epochs": 1, "batch": 50}, 200, ": epoch 2 of 2 not started;"),
        (
            {"exact": 130, "batch": 50},
            130,
            ": at least 70 more rows of epoch 1, epoch 2 of 2 not started;",
        ),
        ({"exact": 400, "batch": 50}, 400, None),
    ]
    for args, rows, said in cases:
        capfd.readouterr()
        cluster = sparktf.run(
            sc_local,
            feed_jobs.read_epochs,
            args,
            num_executors=2,
            input_mode=sparktf.InputMode.SPARK,
        )
        cluster.train(rdd, num_epochs=2)
        cluster.shutdown(timeout=60)
        assert cluster.results == {"chief:0": rows, "worker:0": rows}
        out = "".join(capfd.readouterr())  # a node's stderr goes to the driver's
        lines = [line for line in out.splitlines() if "left its share unread" in line]
        if said is None:
            assert not lines, out
        else:
            assert len(lines) == 2 and all(said in line for line in lines), out
            assert {line.split("]")[0] for line in lines} == {"[chief:0", "[worker:0"}


def test_a_node_that_never_opens_its_feed_says_its_share_was_not_read(sc_local, capfd):
    """With a parameter server equalization is off, so a worker whose main_fn never calls
    get_data_feed() holds nobody up: the job ends, and the worker's output says its share
    of the data was not read (it was dropped with nothing said)."""
    rdd = sc_local.parallelize(range(600), 2)
    cluster = sparktf.run(
        sc_local,
        feed_jobs.only_the_chief_reads,
        None,
        num_executors=3,
        num_ps=1,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(rdd)
    cluster.shutdown(timeout=60)
    assert cluster.results["chief:0"] == 300 and cluster.results["worker:0"] == 0
    lines = [
        line
        for line in "".join(capfd.readouterr()).splitlines()
        if "without opening its data feed" in line
    ]
    assert len(lines) == 1 and lines[0].startswith("[worker:0]"), lines


def test_the_readme_loop_never_gets_an_empty_batch_training_or_inference(sc_local):
    """``while not feed.should_stop(): feed.next_batch(n)`` over shares that are a multiple of n
    (64 rows a node, batches of 16): 4 full batches an epoch and no empty one, in training
    (2 epochs, equalized) and in inference, where an empty batch given to Keras' predict
    fails (both failed the node before should_stop() looked ahead)."""
    rdd = sc_local.parallelize(range(128), 2)
    cluster = sparktf.run(
        sc_local,
        feed_jobs.refuses_empty_batches,
        {"batch": 16},
        num_executors=2,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(rdd, num_epochs=2)
    cluster.shutdown()
    assert cluster.results == {n: {0: [16] * 4, 1: [16] * 4} for n in ("chief:0", "worker:0")}
    cluster = sparktf.run(
        sc_local,
        feed_jobs.refuses_empty_batches,
        {"batch": 16},
        num_executors=2,
        input_mode=sparktf.InputMode.SPARK,
    )
    out = cluster.inference(rdd)
    cluster.shutdown()
    assert out.collect() == [2.0 * i for i in range(128)]


def test_a_tfos_train_call_without_num_epochs_feeds_ten_passes_as_tfos_did(sc_local, caplog):
    """TensorFlowOnSpark's ``cluster.train(dataRDD)`` (its default ``num_epochs=0``) fed ten
    passes; ``sparktf.TFCluster`` takes the call as written and does the same, saying so."""
    from sparktf import TFCluster

    cluster = TFCluster.run(
        sc_local, feed_jobs.sum_ids, {"col": None}, 2, 0, False, TFCluster.InputMode.SPARK
    )
    with caplog.at_level("WARNING", logger="sparktf"):
        cluster.train(sc_local.parallelize(range(1, 101), 2))
    cluster.shutdown(timeout=120)
    results = cluster.results.values()
    assert sum(r["rows"] for r in results) == 10 * 100
    assert sum(r["sum"] for r in results) == 10 * sum(range(1, 101))
    assert "num_epochs=0 (TensorFlowOnSpark's default): feeding 10 passes" in caplog.text
