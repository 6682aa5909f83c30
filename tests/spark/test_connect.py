"""Spark Connect: a real Spark Connect server on loopback, started from the pip-installed
pyspark (its SparkConnectServer class, local[2]). ``sparktf.predict`` and ``TFModel.transform``
work through it (barrier-free ``mapInArrow``); ``sparktf.run`` and ``train`` fail at once with
an error naming what a Connect client cannot do, and start nothing."""

import os
import socket
import subprocess
import sys
import time

import pytest
from helpers import jobs
from helpers.procs import sparktf_processes

import sparktf

pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect]")
pytestmark = [pytest.mark.tf, pytest.mark.slow]

from test_predict import B, W, model_dir  # noqa: E402,F401  (a real tf-keras SavedModel)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    import pyspark

    port = _free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [
                spark_submit,
                "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer",
                "--master",
                "local[2]",
                "--conf",
                "spark.driver.host=127.0.0.1",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                "spark.ui.enabled=false",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 120
        while b"Spark Connect server started" not in log.read_bytes():
            assert server.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()  # by its PID: spark-submit execs the server's JVM
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def remote(connect_url):
    """A Connect client session. Made with Connect's own SparkSession class: pyspark's common
    builder refuses a remote session in a process that has a classic one (as this test run
    has), and would mark the whole process as a Connect client."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    spark = ConnectSession.builder.remote(connect_url).create()
    yield spark
    spark.stop()


def test_predict_works_over_spark_connect(remote, model_dir):  # noqa: F811
    rows = [(i, [float(i), float(i % 3), 1.0]) for i in range(100)]
    df = remote.createDataFrame(rows, "id long, features array<float>").repartition(2)
    out = sparktf.predict(df, model_dir, ["features"], "prediction", batch_size=16)
    got = {r.id: r.prediction for r in out.collect()}
    assert len(got) == 100
    for i, x in rows:
        assert got[i] == pytest.approx(sum(w * v for w, v in zip(W, x)) + B, rel=1e-5)


def test_tfmodel_transform_works_over_spark_connect(remote, model_dir):  # noqa: F811
    from sparktf.ml import TFModel

    df = remote.createDataFrame([(1, [1.0, 2.0, 3.0])], "id long, features array<float>")
    model = TFModel(exportDir=model_dir, inputCols=["features"])
    (row,) = model.transform(df).collect()
    assert row.prediction == pytest.approx(0.5 - 2.0 + 6.0 + B, rel=1e-5)


def test_run_over_spark_connect_fails_at_once_saying_why(remote):
    started = time.monotonic()
    with pytest.raises(sparktf.ConfigError) as info:
        sparktf.run(remote, jobs.describe, num_executors=2)
    message = str(info.value)
    assert "Spark Connect" in message and "no SparkContext" in message
    assert "cancelJobsWithTag" in message and "classic session" in message
    assert "sparktf.predict" in message  # ... and what does work
    assert time.monotonic() - started < 5
    assert not sparktf_processes()


def test_train_with_a_connect_dataframe_fails_at_once(remote, sc_local):
    cluster = sparktf.run(
        sc_local, jobs.describe, num_executors=1, input_mode=sparktf.InputMode.SPARK
    )
    with pytest.raises(sparktf.ConfigError, match="data is a Spark Connect DataFrame"):
        cluster.train(remote.range(10))
    cluster.shutdown()
    assert not sparktf_processes()
