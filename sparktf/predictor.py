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
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

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
    return (fingerprint,) + tuple(
        (rel, st[1], st[2]) if st else (rel, None, None) for rel, st in files
    )


def _serving_fn(
    model_path: str, signature: str, startup_logs: bool = False, identity: tuple | None = None
):
    """The SavedModel's signature function, loaded once per Python worker and export
    (TensorFlow's native start-up lines left off the executor's stderr unless
    ``startup_logs``). ``identity``: the export the driver saw when the call was made (None:
    whatever the path holds now); a path that holds another export is a
    :class:`ModelChangedError`, as is an export replaced while it was loaded."""
    from sparktf import fs

    now = export_identity(model_path)
    if now is None:
        raise ConfigError(
            f"model_path {model_path} holds no saved_model.pb on this executor: "
            f"{_not_a_saved_model(model_path, fs.is_hadoop(model_path))}"
        )
    if identity is not None and now != identity:
        raise ModelChangedError(
            f"model_path {model_path} holds another export than when predict() was called "
            "(a model was exported there since predict() was called): call predict() (or "
            "TFModel.transform) again to score with the model there now"
        )
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
            "call predict() (or TFModel.transform) again once the export is done"
        )
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
        raise ConfigError(
            f"{model_path} has no signature {signature!r}; it has {sorted(loaded.signatures)}"
        )
    return loaded, loaded.signatures[signature]  # the function needs its object


# ------------------------------------------------------------------ what predict() writes
_NUMPY = {"float": "float32", "double": "float64", "int": "int32", "long": "int64"}
OUTPUT_TYPES = tuple(_NUMPY) + tuple(f"array<{t}>" for t in _NUMPY)


@dataclass(frozen=True)
class _Outputs:
    """Which outputs of the signature ``predict`` writes, as what, where: ``keys`` (None: the
    first output by name), one type of :data:`OUTPUT_TYPES` per key, and the new columns'
    ``names``: one per key, or one struct column (``struct``) whose fields are the keys."""

    keys: tuple
    types: tuple
    names: tuple
    struct: bool = False


def _names(value, what: str, problems: list) -> tuple | None:
    """A str or a non-empty list of distinct str, as a tuple; None (and a problem) otherwise."""
    if isinstance(value, str) and value:
        return (value,)
    if (
        not isinstance(value, str)
        and isinstance(value, Sequence)
        and value
        and all(isinstance(v, str) and v for v in value)
        and len(set(value)) == len(value)
    ):
        return tuple(value)
    problems.append(f"{what} must be a name or a list of distinct names, got {value!r}")
    return None


def _output_plan(
    output_col, output_type, output_key, columns: Sequence[str], problems: list
) -> _Outputs | None:
    """The outputs' plan from ``predict``'s arguments, or None with what is wrong added to
    ``problems``. Pure: the driver's check, table-tested without Spark."""
    n = len(problems)
    cols = _names(output_col, "output_col", problems)
    keys = (None,) if output_key is None else _names(output_key, "output_key", problems)
    types = _names(output_type, "output_type", problems)
    if types and any(t not in OUTPUT_TYPES for t in types):
        problems.append(
            f"output_type must be one of {list(OUTPUT_TYPES)} (or a list of them, "
            f"one per output_key), got {output_type!r}"
        )
    taken = [c for c in cols or () if c in columns]
    if taken:
        problems.append(
            f"output_col {taken if len(taken) > 1 else repr(taken[0])} "
            f"{'are' if len(taken) > 1 else 'is'} already a column; pick another name"
        )
    if not (cols and keys and types):
        return None
    several = not isinstance(output_key, (str, type(None)))
    struct = several and isinstance(output_col, str)
    outputs = f"{len(keys)} output{'s' if len(keys) != 1 else ''}"
    if len(types) not in (1, len(keys)):
        problems.append(
            f"output_type lists {len(types)} types for {outputs} ({list(keys)}): "
            "give one type per output_key, or one type for all"
        )
    if not struct and len(cols) != len(keys):
        problems.append(
            f"output_col names {len(cols)} columns for {outputs}: "
            + (
                "give one column per output_key, or one name for a struct column holding them all"
                if several
                else "name the signature's outputs to write in output_key (a list, one per column)"
            )
        )
    if len(problems) > n:
        return None
    return _Outputs(keys, types * len(keys) if len(types) == 1 else types, cols, struct)


def _spark_type(output_type: str):
    from pyspark.sql.types import ArrayType, DoubleType, FloatType, IntegerType, LongType

    element = _element(output_type)
    spark = {"float": FloatType, "double": DoubleType, "int": IntegerType, "long": LongType}[
        element
    ]()
    return ArrayType(spark) if element != output_type else spark


def _spark_schema(outputs: _Outputs):
    """The new columns, as Spark fields."""
    from pyspark.sql.types import StructField, StructType

    types = [_spark_type(t) for t in outputs.types]
    if outputs.struct:
        return [
            StructField(
                outputs.names[0],
                StructType([StructField(k, t) for k, t in zip(outputs.keys, types)]),
            )
        ]
    return [StructField(name, t) for name, t in zip(outputs.names, types)]


def _arrow_type(output_type: str):
    import pyarrow as pa

    element = _element(output_type)
    arrow = pa.from_numpy_dtype(_NUMPY[element])
    return pa.list_(arrow) if element != output_type else arrow


class _Scorer:
    """Scores Arrow batches with a signature in one Python worker: the input columns as numpy
    arrays (an ``array<float>`` column as a 2-D view of its values, no copy), the model
    called every ``batch_size`` rows, each output written into one array of the type asked
    for and handed to Arrow as it is (a list column from its values and offsets)."""

    def __init__(
        self,
        model_path: str,
        signature: str,
        input_cols: Sequence[str],
        outputs: _Outputs,
        batch_size: int,
        startup_logs: bool = False,
        identity: tuple | None = None,
    ) -> None:
        self.fn = _serving_fn(model_path, signature, startup_logs, identity)
        self.input_cols, self.batch_size = list(input_cols), batch_size
        self.specs = self.fn.structured_input_signature[1]
        self.inputs = sorted(self.specs)
        if len(self.inputs) != len(input_cols):
            raise ConfigError(
                f"{len(input_cols)} input_cols {list(input_cols)} for a signature with "
                f"{len(self.inputs)} input{'s' if len(self.inputs) != 1 else ''} "
                f"({', '.join(self.inputs)}) in {model_path} ({signature!r}): give one column "
                "per input, in the order of the inputs' sorted names"
            )
        self.dtypes = [self.specs[name].dtype.as_numpy_dtype for name in self.inputs]
        found = self.fn.structured_outputs
        self.keys = [k if k is not None else sorted(found)[0] for k in outputs.keys]
        missing = [k for k in self.keys if k not in found]
        if missing:
            listed = ", ".join(
                f"{k} ({spec.dtype.name}, {_per_row(spec.shape)} per row)"
                for k, spec in sorted(found.items())
            )
            raise ConfigError(
                f"output_key {missing if len(missing) > 1 else repr(missing[0])} "
                f"{'are not outputs' if len(missing) > 1 else 'is no output'} of "
                f"{signature!r} in {model_path}; its outputs: {listed}"
            )
        self.types, self.checked = outputs.types, False

    def score(self, columns: Sequence) -> list:
        """One Arrow array per output for these input columns (Arrow arrays of one batch)."""
        import numpy as np

        from sparktf.node.feed.batches import column_to_numpy

        rows = len(columns[0])
        feeds = [
            np.asarray(column_to_numpy(c, a), dtype=d)
            for c, a, d in zip(self.input_cols, columns, self.dtypes)
        ]
        if not self.checked and rows:  # rows of one column have one shape: a batch tells
            _check_shapes(dict(zip(self.inputs, feeds)), self.specs, self.input_cols)
        outs: list = [None] * len(self.keys)
        for start in range(0, rows, self.batch_size):
            got = self.fn(
                **{name: f[start : start + self.batch_size] for name, f in zip(self.inputs, feeds)}
            )
            for i, key in enumerate(self.keys):
                values = got[key].numpy()
                if outs[i] is None:
                    if not self.checked:
                        _check_output(
                            key, values, self.types[i], min(rows - start, self.batch_size)
                        )
                    outs[i] = np.empty((rows,) + values.shape[1:], _NUMPY[_element(self.types[i])])
                if (
                    values.dtype.kind in "iu"
                    and outs[i].dtype.kind == "i"
                    and outs[i].dtype != values.dtype
                ):
                    _check_range(key, values, outs[i].dtype, self.types[i])
                outs[i][start : start + len(values)] = values
            self.checked = True
        return [_to_arrow(o, t, rows) for o, t in zip(outs, self.types)]


def _element(output_type: str) -> str:
    return output_type[6:-1] if output_type.startswith("array<") else output_type


def _per_row(shape) -> str:
    dims = shape.as_list()[1:] if shape.rank is not None else None
    return "any shape" if dims is None else str(tuple("?" if d is None else d for d in dims))


def _check_output(key: str, values, output_type: str, rows: int) -> None:
    """An output's values fit ``output_type``: a value (or array) per row, numbers, integers
    for an integer type (a float is not rounded or cut behind the user's back), one value per
    row for a scalar type."""
    element, row = _element(output_type), values.shape[1:]
    if values.ndim == 0 or len(values) != rows:
        raise ConfigError(
            f"output {key!r} has shape {values.shape} for {rows} rows in: "
            "predict takes outputs with a row per input row (write another "
            "output with output_key)"
        )
    if values.dtype.kind not in "fiub":
        raise ConfigError(
            f"output {key!r} holds {values.dtype} values; output_type "
            f"{output_type!r} takes numbers: write another output (output_key)"
        )
    if element in ("int", "long") and values.dtype.kind == "f":
        kind = "array<double>" if element != output_type else "double"
        raise ConfigError(
            f"output {key!r} holds {values.dtype} values; output_type {output_type!r} takes "
            f"integer outputs (a class index: tf.argmax in the signature): use "
            f"{kind!r} for these, or export a signature that returns the integers"
        )
    if element == output_type and math.prod(row) != 1:
        raise ConfigError(
            f"output {key!r} has {math.prod(row)} values per row (shape {row}); output_type "
            f"{output_type!r} takes one: use 'array<{element}>' for a vector per row"
        )


def _check_range(key: str, values, dtype, output_type: str) -> None:
    import numpy as np

    info = np.iinfo(dtype)
    if values.size and (values.min() < info.min or values.max() > info.max):
        raise ConfigError(
            f"output {key!r} holds {values.dtype} values beyond {dtype}'s range "
            f"({values.min()} to {values.max()}); output_type {output_type!r}: "
            f"use '{output_type.replace('int', 'long')}'"
        )


def _to_arrow(values, output_type: str, rows: int):
    """``values`` (an output's rows, any shape per row) as an Arrow array of ``output_type``
    over the same memory: a number per row, or a list column of each row's values, flat."""
    import numpy as np
    import pyarrow as pa

    if values is None:  # no rows
        return pa.array([], type=_arrow_type(output_type))
    flat = pa.array(values.reshape(-1))
    if _element(output_type) == output_type:
        return flat
    width = math.prod(values.shape[1:])
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * np.int32(width))
    return pa.ListArray.from_arrays(offsets, flat)


def _check_shapes(feeds: dict, specs: dict, input_cols: Sequence[str]) -> None:
    """Each column's rows against its input's shape per row, where the model fixes one."""
    for (name, arr), col in zip(feeds.items(), input_cols):
        want = specs[name].shape
        if want.rank is None:
            continue
        row, want_row = arr.shape[1:], tuple(want.as_list()[1:])
        if len(row) != len(want_row) or any(
            w is not None and w != r for w, r in zip(want_row, row)
        ):
            shown = tuple("?" if w is None else w for w in want_row)
            raise ConfigError(
                f"input_cols {col!r} has rows of shape {row}, but the model's input {name!r} "
                f"takes {shown} per row: feed a column whose rows have that shape"
            )


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
    export = (
        "give the directory a SavedModel was exported to (Keras 3: model.export(dir); "
        "tf-keras: model.save(dir), a path without .keras or .h5; or "
        "tf.saved_model.save(model, dir))"
    )
    if path.rstrip("/").lower().endswith((".keras", ".h5", ".hdf5")):
        return f"it is a Keras model file, not a SavedModel directory: {export}"
    if not hadoop and not os.path.exists(path):
        return f"it does not exist; {export}"
    return export


def predict(
    df,
    model_path: str,
    input_cols: Sequence[str],
    output_col: str | Sequence[str] = "prediction",
    *,
    output_type: str | Sequence[str] = "double",
    signature: str = "serving_default",
    output_key: str | Sequence[str] | None = None,
    batch_size: int = 1024,
):
    """``df`` with the SavedModel's outputs for each row as new columns.

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
        Columns fed to the signature's inputs, in the order of the inputs' sorted names
        (numbers, arrays of numbers, Spark ML vectors).
    output_col : str or list of str
        Name of the new column; with several ``output_key``: one name for a struct column
        whose fields are the outputs, or one name per output for as many columns.
    output_type : str or list of str
        ``"float"``, ``"double"``, ``"int"``, ``"long"`` (one value per row: a score, a class
        index such as a signature's ``tf.argmax``), or ``"array<float>"``, ``"array<double>"``,
        ``"array<int>"``, ``"array<long>"`` (a vector per row, e.g. class scores; an output
        of higher rank is flattened row by row). One type for all outputs, or one per
        ``output_key``. Integer types take integer outputs only: a float output is not
        rounded behind your back.
    output_key : str or list of str, optional
        Which output(s) of the signature (default: the first by name).
    batch_size : int
        Rows per call of the signature.

    Notes
    -----
    The inputs reach the model and its outputs leave it as Arrow arrays, without pandas:
    on pyspark 4.1+ a scalar Arrow UDF (``arrow_udf``), so that only the input columns travel
    to Python and only the outputs come back; on pyspark 4.0 and over Spark Connect, a
    ``mapInArrow`` that returns each batch with the outputs appended.

    The call scores with the export at ``model_path`` when it is made: each Python worker
    keeps its model by the export's identity (:func:`export_identity`: its fingerprint, its
    files' sizes and times), so a model exported again to the same path is loaded again by the
    next call. Computing the returned DataFrame after another export replaced that one raises
    :class:`ModelChangedError` (call ``predict`` again) rather than mixing the two. Where the
    driver does not see the executors' files (a local path under a cluster master), each task
    takes the identity of what its host holds.

    Examples
    --------
    >>> sparktf.predict(df, path, ["features"], "scores", output_type="array<float>")
    >>> sparktf.predict(df, path, ["features"], ["label", "scores"],
    ...                 output_key=["label", "probabilities"], output_type=["long", "array<float>"])
    """
    from pyspark.sql import DataFrame

    from sparktf.driver import partition, preflight

    connect = preflight.is_connect(df)  # a Spark Connect client: only the DataFrame API
    if not (isinstance(df, DataFrame) or connect):
        raise ConfigError(
            f"df must be a pyspark DataFrame, got {type(df).__name__} (an RDD: "
            "spark.createDataFrame(rdd, schema) first)"
        )
    problems: list = []
    if isinstance(model_path, os.PathLike):
        model_path = os.fspath(model_path)
    if not isinstance(model_path, str) or not model_path:
        problems.append(
            f"model_path must be the path of a SavedModel directory (a str), got {model_path!r}"
        )
    if (
        isinstance(input_cols, str)
        or not isinstance(input_cols, Sequence)
        or not input_cols
        or not all(isinstance(c, str) for c in input_cols)
    ):
        problems.append(f"input_cols must be a non-empty list of column names, got {input_cols!r}")
    else:
        missing = [c for c in input_cols if c not in df.columns]
        if missing:
            problems.append(f"input_cols {missing} are not columns of the DataFrame ({df.columns})")
    outputs = _output_plan(output_col, output_type, output_key, df.columns, problems)
    if not isinstance(signature, str) or not signature:
        problems.append(
            f"signature must be the name of one of the SavedModel's signatures "
            f"(a str, 'serving_default' by default), got {signature!r}"
        )
    if (values.integer(batch_size) or 0) < 1:
        problems.append(f"batch_size must be an int >= 1, got {batch_size!r}")
    if not connect:  # the Spark Python workers load TensorFlow themselves: the same cap
        problems += [
            p
            for p in preflight.conf_problems(df.sparkSession.sparkContext.getConf())
            if p.startswith("spark.executor.pyspark.memory")
        ]
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
        raise ConfigError(
            f"model_path {model_path} holds no saved_model.pb: "
            f"{_not_a_saved_model(model_path, hadoop)}"
        )
    # Spark ML vector inputs (VectorAssembler's output) read from array columns added for
    # the call and dropped after it (not on Spark Connect, which has no vector_to_array here)
    source, cols, added = (
        (df, list(input_cols), [])
        if connect
        else partition.vectors_as_arrays(df, input_cols, suffix=_VECTOR_SUFFIX)
    )
    from sparktf.driver.cluster import hadoop_env

    # The session's conf: the Spark conf, and what spark.conf.set changed since
    startup_logs = (
        session.conf.get("spark.sparktf.tfStartupLogs", "false") or "false"
    ).lower() == "true"
    # (Spark Connect: the executors' own Hadoop environment applies)
    defaults = hadoop_env(session.sparkContext) if hadoop and not connect else ()
    scorer = (model_path, signature, cols, outputs, batch_size, startup_logs, identity)
    make_udf = None if connect else _arrow_udf()
    out = (
        _with_udf(source, make_udf, scorer, defaults)
        if make_udf is not None
        else _with_map(source, scorer, defaults)
    )
    return out.drop(*added) if added else out


def _arrow_udf():
    """pyspark's ``arrow_udf`` (4.1+) where it makes a UDF for a classic session here, else
    None (4.0; a process that pyspark marked as a Spark Connect client)."""
    from pyspark.sql import functions
    from pyspark.sql.utils import is_remote

    return None if is_remote() else getattr(functions, "arrow_udf", None)


def _worker_env(defaults) -> None:
    """How to reach HDFS, as the driver knows it, where the executor's environment does not
    say."""
    for key, value in defaults:
        if not os.environ.get(key):
            os.environ[key] = value


def _with_udf(df, make_udf, scorer: tuple, defaults):
    """The outputs as a scalar Arrow UDF's result: one struct column, split into columns where
    asked. Only the input columns go to Python and only the outputs come back."""
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import functions as F

    outputs: _Outputs = scorer[3]
    one = len(outputs.keys) == 1 and not outputs.struct
    # one output: its own type; several: a struct of them, split into columns where asked
    returns = (
        _spark_type(outputs.types[0])
        if one
        else _spark_schema(_Outputs(outputs.keys, outputs.types, ("_",), True))[0].dataType
    )
    names = list(outputs.keys)

    def run(batches):
        _worker_env(defaults)
        model = None
        for columns in batches:
            model = model or _Scorer(*scorer)
            got = model.score(columns if isinstance(columns, tuple) else (columns,))
            yield got[0] if one else pa.StructArray.from_arrays(got, names=names)

    # type hints tell arrow_udf the kind of UDF: arrays in batches, an array out per batch
    run.__annotations__ = {"batches": Iterator[tuple[pa.Array, ...]], "return": Iterator[pa.Array]}
    udf = make_udf(run, returns)
    call = udf(*[F.col(_quoted(c)) for c in scorer[2]])
    if one or outputs.struct:
        return df.withColumn(outputs.names[0], call)
    scratch = "__sparktf_outputs"
    while scratch in df.columns:
        scratch += "_"
    out = df.withColumn(scratch, call)
    return out.select(
        *[F.col(_quoted(c)) for c in df.columns],
        *[F.col(scratch)[k].alias(n) for k, n in zip(outputs.keys, outputs.names)],
    )


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _with_map(df, scorer: tuple, defaults):
    """The outputs appended to each Arrow batch by a ``mapInArrow`` (pyspark 4.0, Spark
    Connect): every column goes to Python and comes back."""
    import pyarrow as pa
    from pyspark.sql.types import StructType

    outputs: _Outputs = scorer[3]
    schema = StructType(df.schema.fields + _spark_schema(outputs))

    def run(batches):
        _worker_env(defaults)
        model = None
        for batch in batches:
            model = model or _Scorer(*scorer)
            got = model.score([batch.column(c) for c in scorer[2]])
            if outputs.struct:
                got = [pa.StructArray.from_arrays(got, names=list(outputs.keys))]
            for name, column in zip(outputs.names, got):
                batch = batch.append_column(name, column)
            yield batch

    return df.mapInArrow(run, schema)
