"""Batch inference with a SavedModel over a DataFrame, without a TensorFlow cluster.

``sparktf.predict(df, model_path, input_cols, output_col)`` is a ``mapInArrow`` over ``df``: each
Spark Python worker loads the model once (and keeps it for the tasks it runs after), turns
each Arrow batch's input columns into numpy arrays (an ``array<float>`` column becomes a 2-D
array) and appends the model's output as ``output_col``. In the spirit of Spark's
``predict_batch_udf``, on Arrow batches end to end.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from sparktf.common import logfilter, tfimport, values
from sparktf.errors import ConfigError

_MODELS: dict = {}  # model path -> loaded serving function, per Python worker
_VECTOR_SUFFIX = "__sparktf_array"  # a vector input column's array copy, for one call


def _serving_fn(model_path: str, signature: str, startup_logs: bool = False):
    """The SavedModel's signature function, loaded once per Python worker (TensorFlow's
    native start-up lines left off the executor's stderr unless ``startup_logs``)."""
    key = (model_path, signature)
    if key not in _MODELS:
        with logfilter.startup_chatter_filtered(show=startup_logs):
            _MODELS[key] = _load(model_path, signature)
    return _MODELS[key][1]


def _load(model_path: str, signature: str):
    """(the loaded SavedModel, its signature function); Hadoop paths copied locally first.
    TensorFlow without its eager Keras import (:mod:`sparktf.common.tfimport`): a signature
    needs no Keras, which is half the import."""
    from sparktf import fs

    tf = tfimport.tensorflow_without_keras()

    if fs.is_hadoop(model_path):  # TF has no hdfs://: a local copy per Python worker, removed
        import shutil  # once loaded (the worker may end without cleaning up after itself)
        import tempfile

        local = tempfile.mkdtemp(prefix="sparktf-model-")
        try:
            fs.download(model_path, local)
            loaded = tf.saved_model.load(local)
        finally:
            shutil.rmtree(local, ignore_errors=True)
    else:
        loaded = tf.saved_model.load(model_path)
    if signature not in loaded.signatures:
        raise ConfigError(f"{model_path} has no signature {signature!r}; it has "
                          f"{sorted(loaded.signatures)}")
    return loaded, loaded.signatures[signature]  # the function needs its object


def _predict_batches(batches, model_path: str, input_cols: Sequence[str], output_col: str,
                     signature: str, output_key: str | None, batch_size: int,
                     startup_logs: bool = False):
    import pyarrow as pa

    from sparktf.node.feed.batches import column_to_numpy

    fn = _serving_fn(model_path, signature, startup_logs)
    specs = fn.structured_input_signature[1]
    names = sorted(specs)
    if len(names) != len(input_cols):
        raise ConfigError(
            f"{len(input_cols)} input_cols {list(input_cols)} for a signature with "
            f"{len(names)} input{'s' if len(names) != 1 else ''} ({', '.join(names)}) in "
            f"{model_path} ({signature!r}): give one column per input, in the order of the "
            "inputs' sorted names")
    dtypes = {name: specs[name].dtype.as_numpy_dtype for name in names}
    checked = False
    for batch in batches:
        for start in range(0, batch.num_rows, batch_size):
            part = batch.slice(start, batch_size)
            arrays = [column_to_numpy(c, part.column(c)) for c in input_cols]
            feeds = {name: arr.astype(dtype)
                     for (name, dtype), arr in zip(dtypes.items(), arrays)}
            if not checked:  # rows of one column have one shape: the first batch tells
                _check_shapes(feeds, specs, input_cols)
                checked = True
            outputs = fn(**feeds)
            key = output_key or sorted(outputs)[0]
            values = outputs[key].numpy()
            column = (pa.array(values.ravel()) if values.ndim == 1 or values.shape[1:] == (1,)
                      else pa.array(list(values.reshape(len(values), -1))))
            yield part.append_column(output_col, column)


def _check_shapes(feeds: dict, specs: dict, input_cols: Sequence[str]) -> None:
    """Each column's rows against its input's shape per row, where the model fixes one."""
    for (name, arr), col in zip(feeds.items(), input_cols):
        want = specs[name].shape
        if want.rank is None:
            continue
        row, want_row = arr.shape[1:], tuple(want.as_list()[1:])
        if len(row) != len(want_row) or any(w is not None and w != r
                                            for w, r in zip(want_row, row)):
            shown = tuple("?" if w is None else w for w in want_row)
            raise ConfigError(
                f"input_cols {col!r} has rows of shape {row}, but the model's input {name!r} "
                f"takes {shown} per row: feed a column whose rows have that shape")


def saved_model_missing(session, model_path: str, connect: bool = False) -> tuple[str, bool]:
    """``model_path`` as the executors will read it, and whether it is known to hold no
    SavedModel: checked where the driver sees what the executors will (a Hadoop path; a
    local path under a ``local`` or ``local-cluster`` master, where a relative path is the
    driver's), else taken on trust."""
    from sparktf import fs

    if fs.is_hadoop(model_path):
        return model_path, not fs.exists(model_path.rstrip("/") + "/saved_model.pb")
    if not connect and session.sparkContext.master.startswith("local"):  # local[-cluster]
        # The executors share the driver's files and working directory only here; elsewhere
        # a local path may exist on the executors' hosts alone (--files, an image).
        model_path = os.path.abspath(model_path)
        return model_path, not os.path.isfile(os.path.join(model_path, "saved_model.pb"))
    return model_path, False


def _not_a_saved_model(path: str, hadoop: bool) -> str:
    """Why a path without ``saved_model.pb`` is not what ``predict`` reads, and what to give."""
    export = ("give the directory a SavedModel was exported to (Keras 3: model.export(dir); "
              "tf-keras: model.save(dir), a path without .keras or .h5; or "
              "tf.saved_model.save(model, dir))")
    if path.rstrip("/").lower().endswith((".keras", ".h5", ".hdf5")):
        return f"it is a Keras model file, not a SavedModel directory: {export}"
    if not hadoop and not os.path.exists(path):
        return f"it does not exist; {export}"
    return export


def predict(df, model_path: str, input_cols: Sequence[str], output_col: str = "prediction", *,
            output_type: str = "double", signature: str = "serving_default",
            output_key: str | None = None, batch_size: int = 1024):
    """``df`` with one more column, ``output_col``: the SavedModel's output for each row.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
    model_path : str or os.PathLike
        A SavedModel directory every executor can read: a Hadoop path (``hdfs://...``, copied
        once to each Python worker through :mod:`sparktf.fs`), a local path on every host, or a
        path shipped with ``--files``/``spark.archives``. Checked at the call where the driver
        can see what the executors will (a Hadoop path; a local path under a ``local`` or
        ``local-cluster`` master, where a relative path is the driver's).
    input_cols : list of str
        Columns fed to the signature's inputs, in the order of the inputs' sorted names.
    output_col : str
        Name of the new column.
    output_type : {"double", "array<double>"}
        A number per row, or a vector per row (e.g. class scores).
    output_key : str, optional
        Which output of the signature (default: the first by name).
    """
    from pyspark.sql import DataFrame
    from pyspark.sql.types import ArrayType, DoubleType, StructField, StructType

    from sparktf.driver import partition, preflight

    connect = preflight.is_connect(df)  # a Spark Connect client: only the DataFrame API
    if not (isinstance(df, DataFrame) or connect):
        raise ConfigError(f"df must be a pyspark DataFrame, got {type(df).__name__} (an RDD: "
                          "spark.createDataFrame(rdd, schema) first)")
    problems = []
    if isinstance(model_path, os.PathLike):
        model_path = os.fspath(model_path)
    if not isinstance(model_path, str) or not model_path:
        problems.append(f"model_path must be the path of a SavedModel directory (a str), got "
                        f"{model_path!r}")
    if isinstance(input_cols, str) or not isinstance(input_cols, Sequence) or not input_cols \
            or not all(isinstance(c, str) for c in input_cols):
        problems.append(f"input_cols must be a non-empty list of column names, got {input_cols!r}")
    else:
        missing = [c for c in input_cols if c not in df.columns]
        if missing:
            problems.append(f"input_cols {missing} are not columns of the DataFrame "
                            f"({df.columns})")
    if not isinstance(output_col, str) or not output_col:
        problems.append(f"output_col must be a column name (a str), got {output_col!r}")
    elif output_col in df.columns:
        problems.append(f"output_col {output_col!r} is already a column; pick another name")
    if output_type not in ("double", "array<double>"):
        problems.append(f"output_type must be 'double' or 'array<double>', got {output_type!r}")
    if not isinstance(signature, str) or not signature:
        problems.append(f"signature must be the name of one of the SavedModel's signatures "
                        f"(a str, 'serving_default' by default), got {signature!r}")
    if output_key is not None and not isinstance(output_key, str):
        problems.append(f"output_key must be the name of one of the signature's outputs or "
                        f"None, got {output_key!r}")
    if (values.integer(batch_size) or 0) < 1:
        problems.append(f"batch_size must be an int >= 1, got {batch_size!r}")
    if problems:
        raise ConfigError.from_problems(problems)
    batch_size = int(batch_size)
    from sparktf import fs

    session = df.sparkSession
    hadoop = fs.is_hadoop(model_path)
    model_path, missing = saved_model_missing(session, model_path, connect)
    if missing:
        raise ConfigError(f"model_path {model_path} holds no saved_model.pb: "
                          f"{_not_a_saved_model(model_path, hadoop)}")
    probe = output_type == "array<double>"
    out_type = ArrayType(DoubleType()) if probe else DoubleType()
    # Spark ML vector inputs (VectorAssembler's output) read from array columns added for
    # the call and dropped after it (not on Spark Connect, which has no vector_to_array here)
    df, cols, added = (df, list(input_cols), []) if connect else partition.vectors_as_arrays(
        df, input_cols, suffix=_VECTOR_SUFFIX)
    schema = StructType(df.schema.fields + [StructField(output_col, out_type)])
    from sparktf.driver.cluster import hadoop_env

    # The session's conf: the Spark conf, and what spark.conf.set changed since
    startup_logs = (session.conf.get("spark.sparktf.tfStartupLogs", "false") or
                    "false").lower() == "true"
    # (Spark Connect: the executors' own Hadoop environment applies)
    defaults = hadoop_env(session.sparkContext) if hadoop and not connect else ()

    def run(batches):
        import os

        import pyarrow as pa

        for key, value in defaults:  # how to reach HDFS, as the driver knows it
            if not os.environ.get(key):
                os.environ[key] = value

        for batch in _predict_batches(batches, model_path, cols, output_col, signature,
                                      output_key, batch_size, startup_logs):
            col = batch.column(output_col)
            target = pa.list_(pa.float64()) if probe else pa.float64()
            yield batch.set_column(batch.num_columns - 1, output_col, col.cast(target))

    out = df.mapInArrow(run, schema)
    return out.drop(*added) if added else out
