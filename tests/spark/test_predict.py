"""sparktf.predict: a real tf-keras SavedModel scored over a DataFrame on Arrow batches."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sparktf

pytestmark = pytest.mark.slow

W = [0.5, -1.0, 2.0]
B = 0.25


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "linear"
    code = textwrap.dedent(f"""
        import os
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import numpy as np, tf_keras as keras
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
        model.set_weights([np.array({W}, "float32").reshape(3, 1), np.array([{B}], "float32")])
        model.save({str(path)!r})
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    return str(path)


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


def test_predict_scores_every_row_with_the_saved_model(spark, model_dir):
    rows = [(i, [float(i), float(i % 3), 1.0]) for i in range(200)]
    df = spark.createDataFrame(rows, "id long, features array<float>").repartition(3)
    out = sparktf.predict(df, model_dir, ["features"], "prediction", batch_size=32)
    assert out.columns == ["id", "features", "prediction"]
    got = {r.id: r.prediction for r in out.collect()}
    expected = {i: float(np.dot(f, W) + B) for i, f in rows}
    assert got.keys() == expected.keys()
    assert all(abs(got[i] - expected[i]) < 1e-4 for i in got)


def test_predict_checks_its_arguments(spark, model_dir):
    df = spark.range(3)
    with pytest.raises(sparktf.ConfigError) as err:
        sparktf.predict(df, model_dir, ["nope"], "id", output_type="int")
    assert len(err.value.problems) == 3
