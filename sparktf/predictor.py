"""Batch inference with a SavedModel over a DataFrame, without a TensorFlow cluster.

``sparktf.predict(df, model_path, input_cols, output_col)`` is a ``mapInArrow`` over ``df``: each
Spark Python worker loads the model once (and keeps it for the tasks it runs after), turns
each Arrow batch's input columns into numpy arrays (an ``array<float>`` column becomes a 2-D
array) and appends the model's output as ``output_col``. In the spirit of Spark's
``predict_batch_udf``, on Arrow batches end to end.

A worker keeps its model by the export's identity (:func:`export_identity`), not by its path:
a model exported again to the same path is loaded again. The driver takes the identity once
per call and ships it to the tasks, and every task checks the path still holds that export,
so one call never scores with two.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

from sparktf.common import logfilter, tfimport, values
from sparktf.errors import ConfigError, SparkTFError

# (model path, signature) -> (export identity, loaded SavedModel, signature function), per
# Python worker: the latest export loaded from that path only
_MODELS: dict = {}
_VECTOR_SUFFIX = "__sparktf_array"  # a vector input column's array copy, for one call
_IDENTITY_FILES = ("saved_model.pb", "variables/variables.index")


class ModelChangedError(SparkTFError, RuntimeError):
    """The SavedModel at a ``model_path`` is another export than the one a call was made for
    (exported again since ``predict()`` was called, or while a worker loaded it)."""


def export_identity(model_path: str) -> tuple | None:
    """What tells one SavedModel export at ``model_path`` from another: a hash of its
    fingerprint (``fingerprint.pb``: TensorFlow's hashes of the graph and of the variables'
    checkpoint), and the size and modification time of ``saved_model.pb`` and
    ``variables/variables.index`` (a model exported again counts as another export, even with
    the same bytes, once the clock has moved: HDFS through libhdfs gives whole seconds).
    Plain data; None when the path holds no ``saved_model.pb``. Local and Hadoop paths
    (:mod:`sparktf.fs`); a few metadata calls and one small read."""
    from sparktf import fs

    root = model_path.rstrip("/")
    files = [(rel, fs.stat(f"{root}/{rel}")) for rel in _IDENTITY_FILES]
    if files[0][1] is None or files[0][1][0] != "file":
        return None
    fingerprint = None  # (none before TensorFlow 2.12)
    if fs.stat(f"{root}/fingerprint.pb") is not None:
        fingerprint = hashlib.sha256(fs.read_bytes(f"{root}/fingerprint.pb")).hexdigest()
    return (fingerprint,) + tuple((rel, st[1], st[2]) if st else (rel, None, None)
                                  for rel, st in files)


def _serving_fn(model_path: str, signature: str, startup_logs: bool = False,
                identity: tuple | None = None):
    """The SavedModel's signature function, loaded once per Python worker and export
    (TensorFlow's native start-up lines left off the executor's stderr unless
    ``startup_logs``). ``identity``: the export the driver saw when the call was made (None:
    whatever the path holds now); a path that holds another export is a
    :class:`ModelChangedError`, as is an export replaced while it was loaded."""
    from sparktf import fs

    now = export_identity(model_path)
    if now is None:
        raise ConfigError(f"model_path {model_path} holds no saved_model.pb on this executor: "
                          f"{_not_a_saved_model(model_path, fs.is_hadoop(model_path))}")
    if identity is not None and now != identity:
        raise ModelChangedError(
            f"model_path {model_path} holds another export than when predict() was called "
            "(a model was exported there since predict() was called): call predict() (or "
            "TFModel.transform) again to score with the model there now")
    key = (model_path, signature)
    cached = _MODELS.get(key)
    if cached is not None and cached[0] == now:
        return cached[2]
    _MODELS.pop(key, None)  # the former export's model goes before the new one is loaded
    with logfilter.startup_chatter_filtered(show=startup_logs):
        loaded, fn = _load(model_path, signature)
    if export_identity(model_path) != now:  # (read half of one export, half of the next)
        raise ModelChangedError(
            f"model_path {model_path} was exported to again while a Python worker loaded it: "
            "call predict() (or TFModel.transform) again once the export is done")
    _MODELS[key] = (now, loaded, fn)
    return fn


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
                     startup_logs: bool = False, identity: tuple | None = None):
    import pyarrow as pa

    from sparktf.node.feed.batches import column_to_numpy

    fn = _serving_fn(model_path, signature, startup_logs, identity)
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


def as_executors_read(session, model_path: str, connect: bool = False) -> tuple[str, bool]:
    """``model_path`` as the executors will read it, and whether the driver sees the same
    files: a Hadoop path; a local path under a ``local`` or ``local-cluster`` master, where a
    relative path is the driver's. Elsewhere a local path may exist on the executors' hosts
    alone (``--files``, an image), and is taken on trust."""
    from sparktf import fs

    if fs.is_hadoop(model_path):
        return model_path, True
    if not connect and session.sparkContext.master.startswith("local"):  # local[-cluster]
        if model_path.startswith("file:"):
            return model_path, True
        return os.path.abspath(model_path), True
    return model_path, False


def saved_model_missing(session, model_path: str, connect: bool = False) -> tuple[str, bool]:
    """``model_path`` as the executors will read it, and whether it is known to hold no
    SavedModel (checked where the driver sees what the executors will: see
    :func:`as_executors_read`)."""
    from sparktf import fs

    model_path, seen = as_executors_read(session, model_path, connect)
    return model_path, seen and not fs.exists(model_path.rstrip("/") + "/saved_model.pb")


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

    Notes
    -----
    The call scores with the export at ``model_path`` when it is made: each Python worker
    keeps its model by the export's identity (:func:`export_identity`: its fingerprint, its
    files' sizes and times), so a model exported again to the same path is loaded again by the
    next call. Computing the returned DataFrame after another export replaced that one raises
    :class:`ModelChangedError` (call ``predict`` again) rather than mixing the two. Where the
    driver does not see the executors' files (a local path under a cluster master), each task
    takes the identity of what its host holds.
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
    model_path, seen = as_executors_read(session, model_path, connect)
    # The export this call scores with, taken once here and shipped to every task
    identity = export_identity(model_path) if seen else None
    if seen and identity is None:
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
                                      output_key, batch_size, startup_logs, identity):
            col = batch.column(output_col)
            target = pa.list_(pa.float64()) if probe else pa.float64()
            yield batch.set_column(batch.num_columns - 1, output_col, col.cast(target))

    out = df.mapInArrow(run, schema)
    return out.drop(*added) if added else out
