"""What a :class:`~sparktf.driver.cluster.Cluster`'s calls accept: the arguments of ``train()``,
``inference()`` and ``shutdown()``, and the cluster's state, checked on the driver before any
barrier stage starts.

Each ``check_*`` of arguments collects every problem and raises them at once, as one
:class:`~sparktf.errors.ConfigError` saying what to change (as :mod:`~sparktf.driver.preflight`
does for ``run()``), and returns what the call goes on with. Imports pyspark lazily, never
TensorFlow.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sparktf.common.settings import InputMode, call_problems, valid_seconds
from sparktf.common.topology import NodeRole
from sparktf.driver import sparkfacts
from sparktf.driver.job.state import Status
from sparktf.driver.sparkside import ConnectContext
from sparktf.errors import ClusterStateError, ConfigError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql.types import StructType


def check_data_mode(what: str, input_mode: InputMode, status: Status, aborted: bool) -> None:
    """``train()`` or ``inference()`` (``what``) may start this cluster: InputMode.SPARK, not
    started yet, not shut down (:class:`~sparktf.errors.ClusterStateError` otherwise)."""
    if input_mode is not InputMode.SPARK:
        raise ClusterStateError(
            f"{what}() feeds data, which needs InputMode.SPARK: start "
            "with sparktf.run(..., input_mode=sparktf.InputMode.SPARK)"
        )
    if status is Status.CREATED and aborted:
        raise ClusterStateError(
            f"{what}(): this cluster was shut down before it was given "
            "data; call sparktf.run() again for a new one"
        )
    if status is not Status.CREATED or aborted:
        raise ClusterStateError(
            f"{what}() starts the cluster's nodes over the data and can be called once per "
            f"cluster (this one is {status.value}); call sparktf.run() again for "
            "another pass"
        )


def check_train(
    sc: SparkContext,
    roles: tuple[NodeRole, ...],
    data: Any,
    num_epochs: Any,
    feed_timeout: Any,
    shuffle: Any,
    equalize: Any,
    rebalance: Any,
    timeout: Any,
) -> tuple[bool, float | None]:
    """``train()``'s arguments: whether to equalize (unset: with more than one training node
    and no parameter server) and the call's deadline (None: none)."""
    if equalize is None:
        equalize = sum(r.trains for r in roles) > 1 and not any(r.job == "ps" for r in roles)
    problems = feed_problems(sc, data, num_epochs, feed_timeout, shuffle, equalize, rebalance)
    until = deadline(timeout, problems)
    if problems:
        raise ConfigError.from_problems(problems)
    return equalize, until


def check_inference(
    sc: SparkContext,
    roles: tuple[NodeRole, ...],
    data: Any,
    output_schema: Any,
    feed_timeout: Any,
    timeout: Any,
) -> tuple[Any, float | None]:
    """``inference()``'s arguments: the outputs' Spark type and the call's deadline."""
    problems = feed_problems(sc, data, 1, feed_timeout, False, False, None)
    until = deadline(timeout, problems)
    if any(r.job in ("ps", "evaluator") for r in roles):
        problems.append(
            "an inference cluster has no parameter servers or evaluator: "
            "start it with num_ps=0 and eval_node=False"
        )
    schema = None
    try:
        parse = sc.parse_ddl if isinstance(sc, ConnectContext) else None
        schema = parse_output_schema(output_schema, parse)
    except ConfigError as exc:
        problems.append(str(exc))
    if problems:
        raise ConfigError.from_problems(problems)
    return schema, until


#: What a call's timeout may be (the settings' bounds, sparktf.common.settings.valid_seconds).
SECONDS = "a positive number of seconds, 0.001 to 1e9 (not inf)"


def check_shutdown(grace_secs: Any, timeout: Any) -> tuple[float, float | None]:
    """``shutdown()``'s arguments: the grace in seconds and the call's deadline."""
    grace = valid_seconds(grace_secs, zero=True)
    if grace is None:
        raise ConfigError(
            f"grace_secs must be a number >= 0 (seconds, at most 1e9, not inf), got {grace_secs!r}"
        )
    if timeout is not None and valid_seconds(timeout) is None:
        raise ConfigError(f"timeout must be {SECONDS} or None, got {timeout!r}")
    return grace, None if timeout is None else time.monotonic() + float(timeout)


def deadline(timeout: Any, problems: list[str]) -> float | None:
    """The monotonic deadline of a call's ``timeout`` (None: none); a bad one is a problem."""
    if timeout is None:
        return None
    seconds = valid_seconds(timeout)
    if seconds is None:
        problems.append(f"timeout must be {SECONDS} or None, got {timeout!r}")
        return None
    return time.monotonic() + seconds


def feed_problems(
    sc: SparkContext,
    data: Any,
    num_epochs: Any,
    feed_timeout: Any,
    shuffle: Any,
    equalize: Any,
    rebalance: Any,
) -> list[str]:
    """Every problem with the arguments of ``train()`` or ``inference()`` on ``sc``'s cluster."""
    from pyspark import RDD
    from pyspark.sql import DataFrame

    problems = []
    if isinstance(sc, ConnectContext) or sparkfacts.is_connect(data):
        problems += connect_data_problems(sc, data)
    elif not isinstance(data, (RDD, DataFrame)):
        problems.append(f"data must be a pyspark RDD or DataFrame, got {_what(data)}")
    else:
        made_on = data.context if isinstance(data, RDD) else data.sparkSession.sparkContext
        if made_on is not sc:
            stopped = " (a stopped one)" if getattr(made_on, "_jsc", None) is None else ""
            problems.append(
                f"data was made on another SparkContext{stopped} than the "
                "cluster's: make it with the SparkContext given to sparktf.run()"
            )
        elif isinstance(data, DataFrame):
            problems += _dataframe_problems(data)
    arguments = {"num_epochs": num_epochs, "feed_timeout": feed_timeout, "shuffle": shuffle}
    arguments.update(equalize=equalize, rebalance=rebalance)
    problems += call_problems("train", arguments)[1]
    return problems


def connect_data_problems(sc: Any, data: Any) -> list[str]:
    """Why ``data`` cannot feed a cluster where either is Spark Connect's: a cluster on a
    Connect session takes a DataFrame of that session (Connect has no RDDs); a cluster on a
    classic session takes none of Connect's."""
    from pyspark import RDD

    if not isinstance(sc, ConnectContext):
        return [
            "data is a Spark Connect DataFrame, but the cluster runs on a classic session: "
            "make the data with the session given to sparktf.run(), or run the cluster on "
            "the Connect session"
        ]
    if isinstance(data, RDD):
        return [
            "data is an RDD, but the cluster runs on a Spark Connect session, which has no "
            "RDDs: give train()/inference() a DataFrame of that session "
            "(spark.createDataFrame(rows, schema))"
        ]
    if not sparkfacts.is_connect(data) or not hasattr(data, "sparkSession"):
        return [
            f"data must be a DataFrame of the cluster's Spark Connect session, got {_what(data)}"
        ]
    if data.sparkSession is not sc.session:
        return [
            "data was made on another Spark Connect session than the cluster's: make it "
            "with the session given to sparktf.run()"
        ]
    return _dataframe_problems(data)


def _dataframe_problems(df) -> list[str]:
    """Why a DataFrame cannot be fed: a stream has no end to an epoch, and a node's batch is a
    dict by column name."""
    if df.isStreaming:
        return [
            "data is a streaming DataFrame: sparktf feeds finite data, epoch by epoch; "
            "read the same source with spark.read instead of spark.readStream, or write "
            "the stream to a table and train on that"
        ]
    names = df.columns
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        return [
            f"data has more than one column named {dupes}; a node's batch is a dict by "
            "column name: rename them first (df.toDF(*names) or selectExpr('... AS ...'))"
        ]
    return []


def _what(data) -> str:
    """``data``'s type as a user would recognise it, and how to make Spark data of it."""
    kind = type(data)
    if kind.__module__.startswith("pyspark.pandas"):
        return f"a pandas-on-Spark {kind.__name__} (.to_spark() makes a Spark DataFrame of it)"
    module = kind.__module__.split(".")[0]
    name = kind.__name__ if module == "builtins" else f"a {module} {kind.__name__}"
    if module == "pandas":
        return f"{name} (spark.createDataFrame(pdf) makes a Spark DataFrame of it)"
    if module == "numpy" or isinstance(data, (list, tuple, range)):
        return f"{name} (sc.parallelize(...) makes an RDD of it)"
    return name


def parse_output_schema(output_schema: Any, parse: Any = None) -> StructType:
    """The Spark type of an inference output: a DDL string or a ``StructType``, as Spark's own
    APIs take it (``ConfigError`` naming it if invalid). ``parse``: what parses DDL (default
    the classic SparkContext's; a Connect session's server on Connect)."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    parse = parse or _parse_datatype_string
    if isinstance(output_schema, StructType):
        if not output_schema.fields:
            raise ConfigError(
                "output_schema is a StructType without fields: give it the "
                "output's columns, like 'prediction double'"
            )
        return output_schema
    if not isinstance(output_schema, str) or not output_schema.strip():
        raise ConfigError(
            f"output_schema must be a DDL string such as 'prediction double' "
            f"or a StructType, got {output_schema!r}"
        )
    try:
        schema = parse(output_schema)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"output_schema {output_schema!r} is not a valid DDL schema "
            f"({first}); write it like 'prediction double' or "
            "'label int, scores array<float>'"
        ) from None
    if not isinstance(schema, StructType):
        raise ConfigError(
            f"output_schema {output_schema!r} must name its columns, like 'prediction double'"
        )
    return schema
