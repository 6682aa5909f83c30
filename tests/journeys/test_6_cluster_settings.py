"""Journey 6, settings common on clusters (issue 38, section 4): a user's spark-defaults.conf
carries what YARN and standalone clusters commonly set; each job under it either works, its
result checked, or is refused at once with a ConfigError that names the setting and what to
use instead. Each group of settings needs a SparkContext of its own (about 15 s each on this
machine): this module comes last in the tier, so that the others share one local[4].

- worker reuse off, tiny Arrow batches, AQE off, 3 shuffle partitions (local[4]);
- spark.task.cpus=2 on local[4] (two slots), AQE on with 3 shuffle partitions;
- spark.executor.cores=2 and speculation on (local-cluster[1,2,1024]: both nodes in one
  executor; on one host Spark never launches a speculative copy, so this shows the setting
  is accepted, not a speculated task);
- spark.executor.pyspark.memory=1g: refused, naming spark.executor.memoryOverhead.
"""

import subprocess
import sys
import textwrap
import time

import cloudpickle
import journey_jobs
import pytest
from helpers import feed_jobs, jobs

import sparktf

cloudpickle.register_pickle_by_value(journey_jobs)
pytestmark = [pytest.mark.journeys, pytest.mark.usefixtures("no_leaks")]

SPARK = sparktf.InputMode.SPARK

SMALL_BATCHES = (
    ("spark.python.worker.reuse", "false"),
    ("spark.sql.execution.arrow.maxRecordsPerBatch", "7"),
    ("spark.sql.adaptive.enabled", "false"),
    ("spark.sql.shuffle.partitions", "3"),
)
TWO_CPUS = (("spark.task.cpus", "2"),)
CORES_AND_SPECULATION = (("spark.executor.cores", "2"), ("spark.speculation", "true"))
PYSPARK_MEMORY = (("spark.executor.pyspark.memory", "1g"),)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A SavedModel whose serving signature maps ``features`` (float32 [N, 3]) to
    a + 2b + 3c, made by TensorFlow in a process of its own (the driver imports no TF)."""
    path = str(tmp_path_factory.mktemp("model") / "weighted_sum")
    script = textwrap.dedent(f"""
        import tensorflow as tf

        class WeightedSum(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, "features")])
            def serve(self, features):
                return {{"out": tf.reduce_sum(features * [1.0, 2.0, 3.0], axis=1)}}

        model = WeightedSum()
        tf.saved_model.save(model, {path!r}, signatures={{"serving_default": model.serve}})
    """)
    subprocess.run(
        [sys.executable, "-c", script],
        check=True,
        capture_output=True,
        timeout=120,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"},
    )
    return path


#: Every setting this module tries.
ALL_KEYS = {
    key
    for group in (SMALL_BATCHES, TWO_CPUS, CORES_AND_SPECULATION, PYSPARK_MEMORY)
    for key, _ in group
}


def _context(spark_pool, master, conf):
    """A SparkContext with ``conf`` and none of the other groups' settings. PySpark launches
    its JVM with the first context's settings as system properties (spark-submit's --conf),
    from which every later SparkConf in the process loads its defaults: were this the first
    context of the run, its settings would leak into every later one. They are cleared."""
    sc = spark_pool.get(master, conf=conf)
    for key in ALL_KEYS:
        sc._jvm.System.clearProperty(key)
    spark_conf = sc.getConf()
    assert {k: spark_conf.get(k) for k in ALL_KEYS if spark_conf.contains(k)} == dict(conf)
    return sc


def _session(spark_pool, master, conf, **runtime):
    from pyspark.sql import SparkSession

    spark = SparkSession(_context(spark_pool, master, conf))
    for key, value in runtime.items():
        spark.conf.set(key.replace("_", "."), value)
    return spark


def _triples(spark, n=60, partitions=2):
    """(id, features, label): features [a, b, c] as floats, label a + 2b + 3c."""
    rows = [
        (i, [float(i % 5), float(i % 3), float(i % 2)], float(i % 5 + 2 * (i % 3) + 3 * (i % 2)))
        for i in range(n)
    ]
    return spark.createDataFrame(rows, "id long, features array<float>, label double").repartition(
        partitions
    )


def _trains_and_scores(spark, tmp_path, n=60, nodes=2):
    """A DataFrame dealt out to two nodes (a shuffle under this session's settings) for 2
    epochs, then scored on a new cluster: every row once per epoch, every output its row's."""
    from pyspark.sql import functions as F

    df = (
        spark.range(0, n, numPartitions=5)
        .withColumn("x", F.col("id") * 0.5)
        .withColumn("y", F.col("x") * 4.0 - 1.0)
    )
    model_dir = str(tmp_path / "model")
    trainer = sparktf.run(
        spark.sparkContext,
        journey_jobs.fit_line_share,
        {"model_dir": model_dir, "batch": 4},
        num_executors=nodes,
        input_mode=SPARK,
    )
    trainer.train(df.select("x", "y"), num_epochs=2)
    trainer.shutdown()
    assert (
        sorted(r["rows_per_epoch"] for r in trainer.results.values()) == [[n // 2, n // 2]] * 2
    ), trainer.results
    scorer = sparktf.run(
        spark.sparkContext,
        journey_jobs.predict_line,
        {"model_dir": model_dir, "batch": 5},
        num_executors=2,
        input_mode=SPARK,
    )
    scores = scorer.inference(df.select("id", "x"), "id long, prediction double")
    line = scorer.shutdown()
    assert line["slope"] == pytest.approx(4.0) and line["intercept"] == pytest.approx(-1.0)
    got = df.join(scores, "id").collect()
    assert sorted(r.id for r in got) == list(range(n))
    assert all(r.prediction == pytest.approx(r.y) for r in got)
    return trainer, scores


def _predicts(spark, saved_model):
    df = _triples(spark)
    scored = sparktf.predict(df, saved_model, ["features"], "prediction", batch_size=5)
    got = scored.collect()
    assert len(got) == 60
    assert all(r.prediction == pytest.approx(r.label) for r in got)


# ------------------------------------ worker reuse off, tiny Arrow batches, AQE off, 3 parts
@pytest.mark.tf
def test_small_batches_no_worker_reuse_and_no_aqe_train_score_and_predict(
    spark_pool, tmp_path, saved_model
):
    spark = _session(spark_pool, "local[4]", SMALL_BATCHES)
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    assert spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") == "7"
    _, scores = _trains_and_scores(spark, tmp_path)
    assert scores.count() == 60
    _predicts(spark, saved_model)


def test_no_worker_reuse_runs_rdd_jobs_and_plain_clusters_one_after_another(spark_pool):
    sc = _context(spark_pool, "local[4]", SMALL_BATCHES)
    cluster = sparktf.run(sc, jobs.describe, {}, num_executors=2)
    cluster.shutdown()
    assert sorted(r["name"] for r in cluster.results.values()) == ["chief:0", "worker:0"]
    # nodes that stop in the middle of Spark's data (read from Spark's own socket)
    big = sc.parallelize(range(200_000), 2).map(lambda i: (i, bytes(64)))
    early = sparktf.run(
        sc, feed_jobs.read_some_then_return, {"rows": 7}, num_executors=2, input_mode=SPARK
    )
    early.train(big, equalize=False)
    early.shutdown()
    assert [r["rows"] for r in early.results.values()] == [7, 7]
    assert sc.parallelize(range(100), 4).map(lambda i: i * 3).sum() == 3 * 4950
    scorer = sparktf.run(
        sc, feed_jobs.infer_double, {"batch": 3}, num_executors=2, input_mode=SPARK
    )
    out = scorer.inference(sc.parallelize(range(50), 3))
    scorer.shutdown()
    assert out.take(3) == [0, 2, 4] and out.collect() == [2 * i for i in range(50)]


# ------------------------------------------------ spark.task.cpus=2, AQE on, 3 shuffle parts
def test_two_cpus_a_task_gives_two_nodes_of_two_cpus_that_train_and_score(spark_pool, tmp_path):
    spark = _session(spark_pool, "local[4]", TWO_CPUS, spark_sql_shuffle_partitions="3")
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    trainer, _ = _trains_and_scores(spark, tmp_path, nodes=None)  # every slot: two
    assert sorted(trainer.results) == ["chief:0", "worker:0"]
    assert [r["num_cpus"] for r in trainer.results.values()] == [2, 2]


def test_two_cpus_a_task_refuses_more_nodes_than_slots_saying_why(spark_pool):
    sc = _context(spark_pool, "local[4]", TWO_CPUS)
    started = time.monotonic()
    with pytest.raises(sparktf.ConfigError, match=r"spark.task.cpus=2"):
        sparktf.run(sc, jobs.describe, {}, num_executors=3)
    assert time.monotonic() - started < 10


# --------------------------------------- executor cores 2, speculation on (local-cluster)
@pytest.mark.slow
def test_two_cores_an_executor_and_speculation_on_train_and_score(spark_pool, tmp_path):
    spark = _session(spark_pool, "local-cluster[1,2,1024]", CORES_AND_SPECULATION)
    trainer, _ = _trains_and_scores(spark, tmp_path)
    assert [r["num_cpus"] for r in trainer.results.values()] == [1, 1]  # 2 cores, 2 nodes


# ------------------------------------------------- spark.executor.pyspark.memory: refused
@pytest.mark.parametrize("mode", [sparktf.InputMode.TENSORFLOW, SPARK])
def test_pyspark_memory_is_refused_at_once_naming_memory_overhead(spark_pool, mode):
    sc = _context(spark_pool, "local[2]", PYSPARK_MEMORY)
    started = time.monotonic()
    with pytest.raises(sparktf.ConfigError) as info:
        sparktf.run(sc, jobs.describe, {}, num_executors=2, input_mode=mode)
    assert time.monotonic() - started < 10
    assert "spark.executor.pyspark.memory=1g" in str(info.value)
    assert "spark.executor.memoryOverhead" in str(info.value)


@pytest.mark.tf
def test_pyspark_memory_and_predict_work_or_are_refused_naming_the_setting(spark_pool, saved_model):
    """sparktf.predict loads TensorFlow in the Spark Python workers themselves, which
    spark.executor.pyspark.memory caps: it scores, or says at once what to change."""
    from pyspark.sql import SparkSession

    spark = SparkSession(_context(spark_pool, "local[2]", PYSPARK_MEMORY))
    try:
        _predicts(spark, saved_model)
    except sparktf.ConfigError as exc:
        assert "spark.executor.pyspark.memory" in str(exc)
