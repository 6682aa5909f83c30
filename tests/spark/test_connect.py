"""Spark Connect: a real Spark Connect server on loopback (the ``connect_url`` fixture of
tests/conftest.py). ``sparktf.predict`` and ``TFModel.transform`` work through it
(barrier-free ``mapInArrow``); ``sparktf.run`` over Connect is tested in
tests/spark/test_connect_run.py."""

import pytest
from helpers import jobs
from helpers.procs import sparktf_processes

import sparktf

pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect]")
pytestmark = [pytest.mark.tf, pytest.mark.slow]

from test_predict import B, W, model_dir  # noqa: E402,F401  (a real tf-keras SavedModel)


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


def test_train_with_a_connect_dataframe_fails_at_once(remote, sc_local):
    cluster = sparktf.run(
        sc_local, jobs.describe, num_executors=1, input_mode=sparktf.InputMode.SPARK
    )
    with pytest.raises(sparktf.ConfigError, match="data is a Spark Connect DataFrame"):
        cluster.train(remote.range(10))
    cluster.shutdown()
    assert not sparktf_processes()
