"""sparktf.predict: a real tf-keras SavedModel scored over a DataFrame on Arrow batches."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sparktf

pytestmark = [pytest.mark.tf, pytest.mark.slow]

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


@pytest.fixture(params=["arrow_udf", "mapInArrow"])
def way(request, monkeypatch):
    """Which of predict's two ways runs: pyspark 4.1+'s scalar Arrow UDF (the default here),
    or the ``mapInArrow`` kept for pyspark 4.0 and Spark Connect (chosen on the driver: made
    to find no ``arrow_udf``, as on pyspark 4.0)."""
    from sparktf.batch_prediction import dataframe

    if request.param == "mapInArrow":
        monkeypatch.setattr(dataframe, "_arrow_udf", lambda: None)
    return request.param


def test_predict_scores_every_row_with_the_saved_model(spark, model_dir, way):
    rows = [(i, [float(i), float(i % 3), 1.0]) for i in range(200)]
    df = spark.createDataFrame(rows, "id long, features array<float>").repartition(3)
    out = sparktf.predict(df, model_dir, ["features"], "prediction", batch_size=32)
    assert out.columns == ["id", "features", "prediction"]
    got = {r.id: r.prediction for r in out.collect()}
    expected = {i: float(np.dot(f, W) + B) for i, f in rows}
    assert got.keys() == expected.keys()
    assert all(abs(got[i] - expected[i]) < 1e-4 for i in got)


def test_predict_reads_spark_ml_vectors(spark, model_dir, way):
    """VectorAssembler's output (dense and sparse vectors) is scored as the arrays it holds,
    and the DataFrame comes back with its own columns (the vectors, a timestamp) and the
    prediction only."""
    import datetime

    from pyspark.ml.feature import VectorAssembler
    from pyspark.sql import functions as F

    rows = [
        (i, float(i), 0.0 if i % 2 else 1.0, datetime.datetime(2020, 1, 1, 0, 0, i % 60))
        for i in range(60)
    ]
    df = VectorAssembler(inputCols=["a", "b", "c"], outputCol="v").transform(
        spark.createDataFrame(rows, "id long, a double, b double, t timestamp").withColumn(
            "c", F.lit(0.0)
        )
    )
    out = sparktf.predict(df, model_dir, ["v"], "score")
    assert out.columns == ["id", "a", "b", "t", "c", "v", "score"]
    got = {r.id: (r.score, r.v.toArray().tolist(), r.t.second) for r in out.collect()}
    assert {i: g[2] for i, g in got.items()} == {i: i % 60 for i in range(60)}
    for i, a, b, _ in rows:
        assert got[i][1] == [a, b, 0.0]  # some of them sparse
        assert abs(got[i][0] - (W[0] * a + W[1] * b + B)) < 1e-4


@pytest.mark.parametrize(
    "columns, cols, says",
    [
        (
            "f array<float>, g array<float>",
            ["f", "g"],
            "2 input_cols ['f', 'g'] for a signature with 1 input (dense_input)",
        ),
        (
            "f array<float>",
            ["f"],
            "input_cols 'f' has rows of shape (2,), but the model's input 'dense_input' takes (3,)",
        ),
    ],
)
def test_input_columns_that_do_not_fit_the_signature_are_named(
    spark, model_dir, columns, cols, says
):
    """An input column too many was silently left out (the model scored the first alone);
    rows of the wrong width failed deep in TensorFlow's tf.function binding. Both are named,
    with the signature's own input names and shapes."""
    df = spark.createDataFrame([([1.0, 2.0],) * len(cols)] * 4, columns)
    with pytest.raises(Exception) as err:
        sparktf.predict(df, model_dir, cols, "p").collect()
    assert says in str(err.value)


def test_predict_checks_its_arguments(spark, model_dir):
    df = spark.range(3)
    with pytest.raises(sparktf.ConfigError) as err:
        sparktf.predict(df, model_dir, ["nope"], "id", output_type="string")
    assert len(err.value.problems) == 3


@pytest.mark.parametrize(
    "call, says",
    [
        (lambda df, m: sparktf.predict(df.rdd, m, ["id"]), "df must be a pyspark DataFrame"),
        (lambda df, m: sparktf.predict(df, 123, ["id"]), "model_path must be"),
        (lambda df, m: sparktf.predict(df, None, ["id"]), "model_path must be"),
        (lambda df, m: sparktf.predict(df, m, ["id"], 7), "output_col must be"),
        (lambda df, m: sparktf.predict(df, m, ["id"], batch_size=0), "batch_size must be"),
        (lambda df, m: sparktf.predict(df, m, ["id"], batch_size="64"), "batch_size must be"),
        (lambda df, m: sparktf.predict(df, m, ["id"], signature=None), "signature must be"),
        (lambda df, m: sparktf.predict(df, m, ["id"], output_key=3), "output_key must be"),
        (lambda df, m: sparktf.predict(df, m, [1]), "input_cols must be"),
    ],
)
def test_predict_refuses_arguments_of_the_wrong_type_before_any_spark_job(
    spark, model_dir, call, says
):
    """Wrong types are named on the driver at the call, not as a Python worker's traceback
    once the DataFrame is computed (or never, for a lazy DataFrame nobody collects)."""
    with pytest.raises(sparktf.ConfigError, match=says):
        call(spark.range(3), model_dir)


@pytest.mark.parametrize(
    "name, says",
    [
        ("not-there", "holds no saved_model.pb: it does not exist"),
        ("model.keras", "holds no saved_model.pb: it is a Keras model file.*model.export"),
        ("weights.h5", "holds no saved_model.pb: it is a Keras model file"),
        ("empty-dir", "holds no saved_model.pb: give the directory a SavedModel was exported to"),
    ],
)
def test_a_local_model_path_without_a_saved_model_is_refused_at_the_call(
    spark, tmp_path, name, says
):
    """Under a local master the executors share the driver's files: a wrong path is named at
    once, not as a TensorFlow traceback from a Python worker when the output is computed; a
    Keras file (model.save('m.keras')) is told apart from a SavedModel directory."""
    path = tmp_path / name
    if name == "empty-dir":
        path.mkdir()
    elif name != "not-there":
        path.write_bytes(b"not a SavedModel")
    with pytest.raises(sparktf.ConfigError, match=says):
        sparktf.predict(spark.range(3), str(path), ["id"])


def test_a_relative_model_path_is_the_drivers(spark, model_dir, monkeypatch):
    import os

    monkeypatch.chdir(os.path.dirname(model_dir))
    out = sparktf.predict(
        spark.range(1).selectExpr("array(1.0f, 0.0f, 0.0f) AS f"),
        os.path.basename(model_dir),
        ["f"],
    )
    assert round(out.collect()[0].prediction, 4) == round(0.5 + B, 4)


def test_predict_takes_a_path_object(spark, model_dir):
    import pathlib

    out = sparktf.predict(
        spark.range(2).selectExpr("array(1.0f, 2.0f, 3.0f) AS f"), pathlib.Path(model_dir), ["f"]
    )
    assert [round(r.prediction, 4) for r in out.collect()] == [round(0.5 - 2 + 6 + B, 4)] * 2


@pytest.fixture(scope="module")
def keras3_export(tmp_path_factory):
    """The same linear model written by Keras 3's ``model.export`` (a plain TF SavedModel)."""
    path = tmp_path_factory.mktemp("model") / "keras3"
    code = textwrap.dedent(f"""
        import os
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import numpy as np, keras
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.set_weights([np.array({W}, "float32").reshape(3, 1), np.array([{B}], "float32")])
        model.export({str(path)!r}, verbose=False)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    return str(path)


@pytest.mark.parametrize("saved", ["tf_keras model.save", "keras 3 model.export"])
def test_the_python_worker_loads_the_model_without_importing_keras(saved, model_dir, request):
    """What a predict worker runs (``_serving_fn``) in a fresh interpreter: TensorFlow without
    its eager import of all of Keras (half of TF's import), the SavedModel's answers unchanged,
    and Keras still there for whoever uses it afterwards in the same worker."""
    path = model_dir if saved.startswith("tf_keras") else request.getfixturevalue("keras3_export")
    code = textwrap.dedent(f"""
        import json, os, sys
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        from sparktf.batch_prediction import model
        # (private: the loader sparktf.predict uses on the executors, run in a fresh interpreter)
        fn = model._serving_fn({path!r}, "serving_default")
        (name,) = fn.structured_input_signature[1]
        out = fn(**{{name: [[1.0, 2.0, 3.0]]}})
        value = float(list(out.values())[0].numpy()[0][0])
        loaded = sorted(m for m in ("keras", "tf_keras", "matplotlib", "sklearn")
                        if m in sys.modules)
        import tensorflow as tf
        layer = tf.keras.layers.Dense(2)  # the lazy tf.keras still imports Keras on use
        print(json.dumps({{"value": value, "loaded": loaded,
                           "keras_after": type(layer).__module__}}))
    """)
    # a fresh interpreter as a Python worker starts: not this test process's environment,
    # where another test may have set TF_USE_LEGACY_KERAS
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert abs(got["value"] - (np.dot([1.0, 2.0, 3.0], W) + B)) < 1e-5
    assert got["loaded"] == []
    assert got["keras_after"].startswith("keras")


# ---------------------------------------------------------------- a model replaced in place
W_A, W_B = [1.0, 1.0, 1.0], [2.0, -3.0, 0.5]


@pytest.fixture(scope="module")
def two_exports(tmp_path_factory):
    """Two real tf-keras SavedModels of the same shape and file sizes, told apart only by their
    weights: linear A (W_A) and linear B (W_B), no bias."""
    root = tmp_path_factory.mktemp("exports")
    code = textwrap.dedent(f"""
        import os
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import numpy as np, tf_keras as keras
        for name, w in (("a", {W_A}), ("b", {W_B})):
            model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
            model.set_weights([np.array(w, "float32").reshape(3, 1), np.zeros(1, "float32")])
            model.save(os.path.join({str(root)!r}, name))
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    return {"a": str(root / "a"), "b": str(root / "b")}


def _export(source, path):
    """Put the SavedModel ``source`` at ``path`` the way a chief's main_fn does."""
    import shutil

    with sparktf.fs.export_dir(path) as local:
        shutil.copytree(source, local, dirs_exist_ok=True)


def _rows(spark):
    rows = [(i, [float(i), 1.0, -1.0]) for i in range(40)]
    return spark.createDataFrame(rows, "id long, f array<float>").repartition(4), {
        name: {i: float(np.dot(f, w)) for i, f in rows} for name, w in (("a", W_A), ("b", W_B))
    }


def _scores(out):
    return {r.id: round(r.p, 3) for r in out.collect()}


def _rounded(expected):
    return {i: round(v, 3) for i, v in expected.items()}


def test_predict_scores_with_the_model_at_the_path_now_after_it_was_replaced(
    spark, two_exports, tmp_path, way
):
    """Each Python worker kept the model it loaded by its path: exporting a new model to the
    same path and predicting again in the same session gave the old model's outputs, with
    nothing said. A worker now keys its model by the export's identity (its fingerprint, its
    files' sizes and times), taken by the driver once per call."""
    path = str(tmp_path / "served")
    df, expected = _rows(spark)
    for name in ("a", "b", "a", "b"):
        _export(two_exports[name], path)
        assert _scores(sparktf.predict(df, path, ["f"], "p")) == _rounded(expected[name]), name


def test_tfmodel_transform_scores_with_the_model_at_its_export_dir_now(
    spark, two_exports, tmp_path
):
    from sparktf.ml import TFModel

    path = str(tmp_path / "served")
    model = TFModel(exportDir=path, inputCols=["f"], predictionCol="p")
    df, expected = _rows(spark)
    for name in ("b", "a", "b"):
        _export(two_exports[name], path)
        assert _scores(model.transform(df)) == _rounded(expected[name]), name


def test_a_dataframe_from_before_the_model_was_replaced_says_so_instead_of_mixing(
    spark, two_exports, tmp_path
):
    """predict() takes the export that is at the path when it is called; computing its
    DataFrame after another export replaced it fails, naming the path and what to do, rather
    than scoring some rows with one model and some with the other."""
    path = str(tmp_path / "served")
    df, expected = _rows(spark)
    _export(two_exports["a"], path)
    out = sparktf.predict(df, path, ["f"], "p")
    assert _scores(out) == _rounded(expected["a"])
    _export(two_exports["b"], path)
    with pytest.raises(Exception, match=r"another export.*since predict\(\) was called") as err:
        out.collect()
    assert path in str(err.value)
    assert _scores(sparktf.predict(df, path, ["f"], "p")) == _rounded(expected["b"])


def _failing_to(path, real, tried):
    """``os.rename``/``os.replace`` failing the first call that moves something in at
    ``path`` (the new export). Faked: no local filesystem condition makes that one rename fail
    and not the others beside it (the tests run as root, so permissions do not stop it)."""

    def rename(src, dst, *args, **kwargs):
        if str(dst) == path:
            tried.append(src)
            if len(tried) == 1:
                raise OSError(28, "No space left on device (injected)")
        return real(src, dst, *args, **kwargs)

    return rename


def test_an_export_whose_final_rename_fails_leaves_the_old_model_in_service(
    spark, two_exports, tmp_path, monkeypatch
):
    """fs.export_dir removed the old model before renaming the new one into place: a failing
    rename lost both. The old one is now set aside first and put back if the new one cannot
    go in, and predict still scores with it."""
    import os

    path = str(tmp_path / "served")
    df, expected = _rows(spark)
    _export(two_exports["a"], path)
    tried = []
    for name in ("rename", "replace"):
        monkeypatch.setattr(os, name, _failing_to(path, getattr(os, name), tried))
    with pytest.raises(OSError, match="injected"):
        _export(two_exports["b"], path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["served"]
    assert _scores(sparktf.predict(df, path, ["f"], "p")) == _rounded(expected["a"])


# ---------------------------------------------------------------- output types, several outputs
M = [[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [0.5, 0.5, 0.5]]


@pytest.fixture(scope="module")
def outputs_model(tmp_path_factory):
    """A real SavedModel (``tf.saved_model.save`` of a ``tf.Module``, no Keras) whose
    signature has outputs of every kind a Spark user asks for: a score per row (float32, as
    (n,) and as (n, 1)), class scores (n, 3), the argmax class (int64), a one-hot int64 (n, 3),
    a (n, 2, 2) grid, int64 values beyond int32, and strings."""
    path = tmp_path_factory.mktemp("model") / "outputs"
    code = textwrap.dedent(f"""
        import os
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import tensorflow as tf
        W = tf.constant({M})
        class Model(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
            def serve(self, x):
                scores = tf.matmul(x, W)
                label = tf.argmax(scores, axis=1)
                return {{"scores": scores, "score": tf.reduce_sum(scores, 1), "label": label,
                        "column": tf.reduce_sum(scores, 1, keepdims=True),
                        "hot": tf.one_hot(label, 3, dtype=tf.int64),
                        "grid": tf.reshape(tf.concat([scores, scores[:, :1]], 1), [-1, 2, 2]),
                        "big": label + 2 ** 40, "name": tf.strings.as_string(label)}}
        model = Model()
        tf.saved_model.save(model, {str(path)!r}, signatures={{"serving_default": model.serve}})
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    return str(path)


def _inputs(spark, n=30, parts=3):
    rows = [(i, [float(i % 7), float(i % 3) - 1.0, 0.5 * i]) for i in range(n)]
    df = spark.createDataFrame(rows, "id long, x array<float>").repartition(parts)
    scores = {i: np.asarray(x, "float32") @ np.asarray(M, "float32") for i, x in rows}
    return df, {
        "scores": scores,
        "score": {i: float(s.sum()) for i, s in scores.items()},
        "column": {i: float(s.sum()) for i, s in scores.items()},
        "label": {i: int(s.argmax()) for i, s in scores.items()},
        "hot": {i: np.eye(3, dtype=int)[s.argmax()] for i, s in scores.items()},
        "grid": {i: np.concatenate([s, s[:1]]) for i, s in scores.items()},
    }


def _close(got, want):
    return np.allclose(np.asarray(got, "float64"), np.asarray(want, "float64"), rtol=1e-5)


@pytest.mark.parametrize(
    "key, output_type, spark_type",
    [
        ("score", "float", "float"),
        ("score", "double", "double"),
        ("column", "double", "double"),
        ("label", "int", "int"),
        ("label", "long", "bigint"),
        ("label", "double", "double"),
        ("scores", "array<float>", "array<float>"),
        ("scores", "array<double>", "array<double>"),
        ("hot", "array<int>", "array<int>"),
        ("hot", "array<long>", "array<bigint>"),
        ("grid", "array<float>", "array<float>"),
    ],
)
def test_each_output_type_is_a_column_of_that_spark_type(
    spark, outputs_model, key, output_type, spark_type
):
    """A number per row as float/double, a class index (the signature's tf.argmax) as
    int/long, a vector per row as an array of each (an output of higher rank flattened row by
    row), each scored by the real SavedModel."""
    df, expected = _inputs(spark)
    out = sparktf.predict(df, outputs_model, ["x"], "p", output_key=key, output_type=output_type)
    assert out.schema["p"].dataType.simpleString() == spark_type
    got = {r.id: r.p for r in out.collect()}
    assert got.keys() == expected[key].keys()
    for i, value in got.items():
        if output_type in ("int", "long"):
            assert isinstance(value, int) and value == expected[key][i]
        else:
            assert _close(value, expected[key][i]), (i, value, expected[key][i])


def test_several_outputs_go_to_a_struct_column_or_to_columns_of_their_own(
    spark, outputs_model, way
):
    """output_key lists outputs; one output_col name holds them as a struct (fields named by
    the outputs), a list of names spreads them over as many columns; the rows' other columns
    stay as they were. A partition without rows (3 rows, 4 partitions) is no trouble."""
    df, expected = _inputs(spark, n=3, parts=4)
    keys, types = ["label", "scores", "score"], ["long", "array<float>", "double"]
    struct = sparktf.predict(df, outputs_model, ["x"], "out", output_key=keys, output_type=types)
    assert struct.schema.simpleString() == (
        "struct<id:bigint,x:array<float>,out:struct<label:bigint,scores:array<float>,score:double>>"
    )
    cols = sparktf.predict(
        df, outputs_model, ["x"], ["cls", "probs", "total"], output_key=keys, output_type=types
    )
    assert cols.columns == ["id", "x", "cls", "probs", "total"]
    assert [f.dataType.simpleString() for f in cols.schema.fields[2:]] == [
        "bigint",
        "array<float>",
        "double",
    ]
    for row in struct.collect():
        assert row.out.label == expected["label"][row.id]
        assert _close(row.out.scores, expected["scores"][row.id])
        assert _close(row.out.score, expected["score"][row.id])
    rows = cols.collect()
    assert sorted(r.id for r in rows) == [0, 1, 2]
    for row in rows:
        assert row.cls == expected["label"][row.id] and _close(row.total, expected["score"][row.id])
        assert _close(row.probs, expected["scores"][row.id])


def test_every_output_type_comes_back_from_the_map_in_arrow_way_too(
    spark, outputs_model, monkeypatch
):
    """pyspark 4.0 and Spark Connect score through mapInArrow: each type there, in one call
    of several columns."""
    from sparktf.batch_prediction import dataframe

    monkeypatch.setattr(dataframe, "_arrow_udf", lambda: None)
    df, expected = _inputs(spark)
    keys = ["score", "column", "label", "scores", "hot", "grid"]
    types = ["float", "double", "int", "array<double>", "array<long>", "array<float>"]
    out = sparktf.predict(df, outputs_model, ["x"], keys, output_key=keys, output_type=types)
    assert [f.dataType.simpleString() for f in out.schema.fields[2:]] == [
        "float",
        "double",
        "int",
        "array<double>",
        "array<bigint>",
        "array<float>",
    ]
    assert "MapInArrow" in out._jdf.queryExecution().executedPlan().toString()
    for row in out.collect():
        for key in keys:
            assert _close(row[key], expected[key][row.id]), (key, row)


@pytest.mark.parametrize(
    "key, output_type, says",
    [
        (
            "scores",
            "double",
            r"output 'scores' has 3 values per row \(shape \(3,\)\); output_type "
            r"'double' takes one: use 'array<double>' for a vector per row",
        ),
        ("grid", "float", r"output 'grid' has 4 values per row \(shape \(2, 2\)\).*'array<float>'"),
        (
            "scores",
            "long",
            r"output 'scores' holds float32 values; output_type 'long' takes integer "
            r"outputs \(a class index: tf.argmax in the signature\): use 'double'",
        ),
        (
            "score",
            "array<int>",
            r"output 'score' holds float32 values; output_type 'array<int>' "
            r"takes integer outputs.*use 'array<double>'",
        ),
        ("big", "int", r"output 'big' holds int64 values beyond int32's range .*use 'long'"),
        (
            "name",
            "double",
            r"output 'name' holds object values; output_type 'double' takes numbers",
        ),
        (
            "nope",
            "double",
            r"output_key 'nope' is no output of 'serving_default' in .*; its outputs: "
            r"big \(int64, \(\) per row\), column \(float32, \(1,\) per row\)",
        ),
    ],
)
def test_an_output_type_that_does_not_fit_the_output_is_named(
    spark, outputs_model, key, output_type, says, way
):
    """Told on the executor, where the model is loaded, with the output's own dtype and shape
    and the type to ask for instead; nothing is silently rounded, cut or wrapped around."""
    df, _ = _inputs(spark, n=4, parts=1)
    with pytest.raises(Exception, match=says):
        sparktf.predict(
            df, outputs_model, ["x"], "p", output_key=key, output_type=output_type
        ).collect()
