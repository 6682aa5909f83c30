"""Journey 2, Spark ML: a user puts a TFEstimator in a Pipeline behind a VectorAssembler, fits
it, transforms, looks at the scores, refits with another param, compares the two models, and
saves and loads the fitted pipeline. Real Spark (local[4]) and real TensorFlow (tf-keras, a
SavedModel scored on the executors); the estimator's main_fn is tests/helpers/ml_jobs.py's
``tiny_linear`` (one dense unit, plain SGD), so that a model's scores are a line in its three
inputs and two params give two lines."""

import numpy as np
import pytest
from helpers import ml_jobs

from sparktf.ml import TFEstimator, TFModel

pytestmark = [
    pytest.mark.tf,
    pytest.mark.journeys,
    pytest.mark.slow,
    pytest.mark.usefixtures("no_leaks"),
]


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


@pytest.fixture(scope="module")
def rows(spark):
    """48 rows of three numeric columns and label = 2a - b + 0.5c, in 2 partitions."""
    data = [(i, float(i % 4), float(i % 3), float(i % 5) / 4, 0.0) for i in range(48)]
    data = [(i, a, b, c, 2 * a - b + 0.5 * c) for i, a, b, c, _ in data]
    return spark.createDataFrame(
        data, "id long, a double, b double, c double, label double"
    ).repartition(2)


def _scores(scored):
    """What a transform gave: {id: (a, b, c, label, prediction)}, from one Spark job."""
    return {
        r.id: (r.a, r.b, r.c, r.label, r.prediction)
        for r in scored.select("id", "a", "b", "c", "label", "prediction").collect()
    }


def _line_through(scores):
    """The scores as a line in (a, b, c): its coefficients and the largest residual."""
    design = np.array([[a, b, c, 1.0] for a, b, c, _, _ in scores.values()])
    pred = np.array([p for *_, p in scores.values()])
    coef, *_ = np.linalg.lstsq(design, pred, rcond=None)
    return coef, float(np.abs(design @ coef - pred).max())


def _mse(scores):
    return float(np.mean([(label - p) ** 2 for *_, label, p in scores.values()]))


def test_pipeline_fit_transform_show_refit_compare_save_and_load(spark, rows, tmp_path, capsys):
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import VectorAssembler

    assembler = VectorAssembler(inputCols=["a", "b", "c"], outputCol="features")
    estimator = TFEstimator(
        ml_jobs.tiny_linear,
        {"seed": 3},
        inputCols=["features"],
        labelCol="label",
        clusterSize=1,
        epochs=4,
        batchSize=4,
        exportDir=str(tmp_path / "export"),
    )
    pipeline = Pipeline(stages=[assembler, estimator])

    # fit, transform, show
    model = pipeline.fit(rows)
    assert isinstance(model.stages[-1], TFModel)
    scored = model.transform(rows)
    assert scored.columns == rows.columns + ["features", "prediction"]
    scored.select("id", "label", "prediction").show(4)
    assert "prediction" in capsys.readouterr().out
    first = _scores(scored)
    assert sorted(first) == list(range(48))  # every input row, once
    coef, residual = _line_through(first)
    assert residual < 1e-4, "the scores are not one linear model's"
    baseline = float(np.var([label for *_, label, _ in first.values()]))
    assert _mse(first) < baseline / 2, "4 epochs of SGD learnt nothing"

    # refit with another param: another model, scoring otherwise; the first one unchanged
    model2 = pipeline.fit(rows, {estimator.batchSize: 48})
    second = _scores(model2.transform(rows))
    coef2, residual2 = _line_through(second)
    assert residual2 < 1e-4
    assert not np.allclose(coef, coef2, atol=1e-3), "both fits gave the same model"
    assert _mse(second) > _mse(first)  # 4 steps of 48 rows learn less than 48 steps of 4
    assert _scores(model.transform(rows)) == first

    # save the fitted pipeline, load it, score the same
    model.save(str(tmp_path / "pipeline"))
    loaded = PipelineModel.load(str(tmp_path / "pipeline"))
    assert loaded.stages[-1].getOrDefault("exportDir") == model.stages[-1].getOrDefault("exportDir")
    assert _scores(loaded.transform(rows)) == first

    # the TFModel alone, saved and loaded, and the estimator too (its main_fn travels)
    model2.stages[-1].save(str(tmp_path / "tfmodel"))
    alone = TFModel.load(str(tmp_path / "tfmodel"))
    assert _scores(alone.transform(assembler.transform(rows))) == second
    estimator.save(str(tmp_path / "estimator"))
    again = TFEstimator.load(str(tmp_path / "estimator"))
    assert again.main_fn.__name__ == "tiny_linear" and again.getOrDefault("epochs") == 4
