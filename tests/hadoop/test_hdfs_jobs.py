"""Spark and sparktf jobs with their data and outputs on the running test HDFS (Hadoop 3.5.0 on
loopback, read and written by pyspark's Hadoop 3.5 client; see conftest's hdfs_cluster): the
DataFrame and RDD paths fed from HDFS, nodes reading their own files from it, log and
checkpoint directories mirrored to it, sparktf.predict from a SavedModel on it."""

import os

import pytest
from helpers import hdfs_jobs
from helpers.events import read_scalars
from helpers.procs import TF_ENV

import sparktf
from sparktf import fs
from sparktf.errors import NodeError

# timeout(400): the first test of a session starts the test HDFS, fetching its jars (about
# 230 MB) the first time.
pytestmark = [pytest.mark.hadoop, pytest.mark.timeout(400)]
SPARK = sparktf.InputMode.SPARK
TENSORFLOW = sparktf.InputMode.TENSORFLOW


@pytest.fixture(scope="module")
def spark(sc_local, hdfs):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


@pytest.fixture(scope="module")
def parquet(spark, hdfs):
    """1,000 rows (id, 8 floats) written by Spark as 4 Parquet files on HDFS."""
    from pyspark.sql import functions as F

    path = hdfs.path("data", "ids.parquet")
    (
        spark.range(1000)
        .repartition(4)
        .select("id", F.array(*[F.lit(0.5)] * 8).cast("array<float>").alias("x"))
        .write.mode("overwrite")
        .parquet(path)
    )
    return path


def test_a_dataframe_read_from_hdfs_is_fed_whole(spark, parquet, no_leaks):
    df = spark.read.parquet(parquet)
    cluster = sparktf.run(
        spark.sparkContext,
        hdfs_jobs.count_fed_rows,
        {},
        num_executors=2,
        input_mode=SPARK,
        env=TF_ENV,
    )
    cluster.train(df, num_epochs=1, equalize=False)
    cluster.shutdown(timeout=120)
    assert sum(r["rows"] for r in cluster.results.values()) == 1000


def test_an_rdd_of_hdfs_text_lines_is_fed_whole(spark, hdfs, no_leaks):
    sc = spark.sparkContext
    path = hdfs.path("data", "lines.txt")
    sc.parallelize([f"line {i}" for i in range(300)], 3).saveAsTextFile(path)
    cluster = sparktf.run(
        sc, hdfs_jobs.count_fed_rows, {}, num_executors=2, input_mode=SPARK, env=TF_ENV
    )
    cluster.train(sc.textFile(path), num_epochs=1, equalize=False)
    cluster.shutdown(timeout=120)
    assert sum(r["rows"] for r in cluster.results.values()) == 300


@pytest.mark.parametrize("backend", ["webhdfs", "libhdfs"])
def test_nodes_read_their_own_hdfs_files(sc_local, hdfs, parquet, backend, no_leaks):
    # webhdfs: the nodes know only what the driver forwards (fs.defaultFS, the WebHDFS URL);
    # libhdfs: as on a YARN node, CLASSPATH and ARROW_LIBHDFS_DIR in the node's environment.
    env = dict(TF_ENV, SPARKTF_HDFS_BACKEND=backend)
    if backend == "libhdfs":
        env.update(hdfs.libhdfs_env)
    cluster = sparktf.run(
        sc_local,
        hdfs_jobs.read_own_files,
        {"path": parquet},
        num_executors=2,
        input_mode=TENSORFLOW,
        env=env,
    )
    cluster.shutdown(timeout=120)
    results = cluster.results.values()
    assert sum(r["rows"] for r in results) == 1000
    assert sorted(r["files"] for r in results) == [2, 2]
    assert {r["backend"] for r in results} == {backend}
    r = next(iter(results))
    assert r["absolute"] == hdfs.url + "/user/" + sc_local.sparkUser() + "/mnist/model"
    assert r["absolute_root"] == hdfs.url + "/data"


def test_log_dir_and_checkpoints_on_hdfs_arrive_there(sc_local, hdfs, no_leaks):
    logs, model = hdfs.path("runs", "logs"), hdfs.path("runs", "model")
    cluster = sparktf.run(
        sc_local,
        hdfs_jobs.write_logs_and_checkpoint,
        {"model_dir": model},
        num_executors=2,
        log_dir=logs,
        env=TF_ENV,
    )
    cluster.shutdown(timeout=120)
    assert sorted(fs.listdir(logs)) == ["chief_0", "worker_0"]
    assert fs.read_bytes(logs + "/worker_0/events.out") == b"worker:0"
    assert fs.read_bytes(model + "/checkpoint").startswith(b"model_checkpoint_path")
    assert not fs.is_hadoop(cluster.results["chief:0"]["log_dir"])


def test_a_hadoop_log_dir_gets_the_node_logs_and_the_scalars_once_each(
    sc_local, hdfs, tmp_path, no_leaks
):
    """With log_dir on HDFS, the driver's copies arrive there at the end: every node's whole
    output under sparktf-logs/<job>/attempt-N, the TensorBoard scalars under sparktf/<job>
    (and not a second time among the logs)."""
    logs = hdfs.path("runs", "history")
    cluster = sparktf.run(
        sc_local, hdfs_jobs.print_and_report, None, num_executors=2, log_dir=logs, env=TF_ENV
    )
    cluster.shutdown(timeout=120)
    job = cluster.job_id
    assert sorted(fs.listdir(logs)) == ["sparktf", "sparktf-logs"]
    assert fs.listdir(f"{logs}/sparktf-logs/{job}") == ["attempt-0"]
    for node in ("chief:0", "worker:0"):
        name = node.replace(":", "-")
        text = fs.read_bytes(f"{logs}/sparktf-logs/{job}/attempt-0/{name}.log").decode()
        assert f"hello from {node}" in text
        [events] = fs.listdir(f"{logs}/sparktf/{job}/{name}")
        fs.download(f"{logs}/sparktf/{job}/{name}/{events}", str(tmp_path / name))
        scalars = read_scalars(str(tmp_path / name))
        assert [(step, v) for step, tag, v in scalars if tag == "loss"] == [
            (s, pytest.approx(1 / s)) for s in (1, 2, 3)
        ]


def test_a_missing_hdfs_file_fails_the_node_naming_the_path(sc_local, hdfs, no_leaks):
    path = hdfs.path("no", "such", "file.bin")
    cluster = sparktf.run(
        sc_local, hdfs_jobs.read_a_missing_file, {"path": path}, num_executors=1, env=TF_ENV
    )
    with pytest.raises(NodeError) as err:
        cluster.shutdown(timeout=120)
    assert "HadoopFSError" in str(err.value) and path in str(err.value)
    assert "no such file" in str(err.value)


@pytest.mark.tf
def test_predict_scores_from_a_savedmodel_on_hdfs(spark, hdfs, tmp_path):
    import tensorflow as tf

    class Double(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.reduce_sum(x, axis=1) * 2}

    m = Double()
    tf.saved_model.save(m, str(tmp_path / "m"), signatures={"serving_default": m.serve})
    remote = hdfs.path("models", "double")
    fs.upload(str(tmp_path / "m"), remote)
    df = spark.createDataFrame([([1.0, 2.0],), ([3.0, 4.0],)], "x array<float>")
    import glob
    import tempfile

    copies = os.path.join(tempfile.gettempdir(), "sparktf-model-*")
    before = set(glob.glob(copies))
    out = sparktf.predict(df, remote, ["x"], "y").collect()
    assert sorted(r.y for r in out) == [6.0, 14.0]
    # each Python worker's local copy of the model is gone once the model is loaded
    assert set(glob.glob(copies)) <= before
    from sparktf.errors import ConfigError

    with pytest.raises(ConfigError, match="holds no saved_model.pb"):
        sparktf.predict(df, hdfs.path("models", "nothing"), ["x"], "y")
