"""predict() over a DataFrame: its arguments checked on the driver, then the scorer mapped over
Arrow batches (mapInArrow, or an Arrow UDF under Spark Connect).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from sparktf.batch_prediction.model import _not_a_saved_model, as_executors_read, export_identity
from sparktf.batch_prediction.outputs import _output_plan, _Outputs, _spark_schema, _spark_type
from sparktf.batch_prediction.scorer import _Scorer
from sparktf.common.settings import checked, count
from sparktf.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

_VECTOR_SUFFIX = "__sparktf_array"  # a vector input column's array copy, for one call


def predict(
    df: DataFrame,
    model_path: str,
    input_cols: Sequence[str],
    output_col: str | Sequence[str] = "prediction",
    *,
    output_type: str | Sequence[str] = "double",
    signature: str = "serving_default",
    output_key: str | Sequence[str] | None = None,
    batch_size: int = 1024,
) -> DataFrame:
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

    from sparktf.driver import partition, sparkfacts

    connect = sparkfacts.is_connect(df)  # a Spark Connect client: only the DataFrame API
    if not (isinstance(df, DataFrame) or connect):
        raise ConfigError(
            f"df must be a pyspark DataFrame, got {type(df).__name__} (an RDD: "
            "spark.createDataFrame(rdd, schema) first)"
        )
    model_path, outputs = _checked_arguments(
        df,
        connect,
        model_path,
        input_cols,
        output_col,
        output_type,
        output_key,
        signature,
        batch_size,
    )
    batch_size = int(batch_size)
    from sparktf import fs

    session = df.sparkSession
    hadoop = fs.is_hadoop(model_path)
    model_path, seen = as_executors_read(session, model_path)
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
    from sparktf.driver.sparkfacts import driver_tokens, hadoop_env

    # The session's conf: the Spark conf, and what spark.conf.set changed since
    startup_logs = (
        session.conf.get("spark.sparktf.tfStartupLogs", "false") or "false"
    ).lower() == "true"
    # (Spark Connect: the executors' own Hadoop environment applies)
    defaults = hadoop_env(session.sparkContext) if hadoop and not connect else ()
    # A secure cluster's tokens as the driver holds them now, for executors whose own are
    # past their maximum date (an application older than that: sparktf.fs.tokens.adopt)
    shipped = driver_tokens(session.sparkContext) if hadoop and not connect else None
    scorer = (model_path, signature, cols, outputs, batch_size, startup_logs, identity)
    make_udf = None if connect else _arrow_udf()
    out = (
        _with_udf(source, make_udf, scorer, (defaults, shipped))
        if make_udf is not None
        else _with_map(source, scorer, (defaults, shipped))
    )
    return out.drop(*added) if added else out


def _checked_arguments(
    df: DataFrame,
    connect: bool,
    model_path: str,
    input_cols: Sequence[str],
    output_col: str | Sequence[str],
    output_type: str | Sequence[str],
    output_key: str | Sequence[str] | None,
    signature: str,
    batch_size: int,
) -> tuple[str, _Outputs | None]:
    """predict's arguments checked, every problem at once (a ConfigError): the model's path,
    as a str, and the outputs' plan."""
    from sparktf.driver import preflight

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
    try:
        checked("batch_size", batch_size, count(1))
    except ConfigError as exc:
        problems.append(str(exc))
    if not connect:  # the Spark Python workers load TensorFlow themselves: the same cap
        problems += [
            p
            for p in preflight.conf_problems(df.sparkSession.sparkContext.getConf())
            if p.startswith("spark.executor.pyspark.memory")
        ]
    if problems:
        raise ConfigError.from_problems(problems)
    return model_path, outputs


def _arrow_udf():
    """pyspark's ``arrow_udf`` (4.1+) where it makes a UDF for a classic session here, else
    None (4.0; a process that pyspark marked as a Spark Connect client)."""
    from pyspark.sql import functions
    from pyspark.sql.utils import is_remote

    return None if is_remote() else getattr(functions, "arrow_udf", None)


def _worker_env(hadoop: tuple) -> None:
    """How to reach HDFS, as the driver knows it, where the executor's environment does not
    say; and the driver's delegation tokens where the executor's own are dead."""
    defaults, shipped = hadoop
    for key, value in defaults:
        if not os.environ.get(key):
            os.environ[key] = value
    if shipped:
        from sparktf.fs import tokens

        tokens.adopt(shipped)


def _with_udf(df, make_udf, scorer: tuple, hadoop: tuple):
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

    def run(batches: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        _worker_env(hadoop)
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


def _with_map(df, scorer: tuple, hadoop: tuple):
    """The outputs appended to each Arrow batch by a ``mapInArrow`` (pyspark 4.0, Spark
    Connect): every column goes to Python and comes back."""
    import pyarrow as pa
    from pyspark.sql.types import StructType

    outputs: _Outputs = scorer[3]
    schema = StructType(df.schema.fields + _spark_schema(outputs))

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _worker_env(hadoop)
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
