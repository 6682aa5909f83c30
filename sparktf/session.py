"""Driver-side conveniences around a Spark session: a console without Spark's INFO lines, and
numpy arrays as a DataFrame without large tasks.

Runs on the driver; imports pyspark (and numpy, pyarrow on the executors) when called, never
tensorflow.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: Where Spark's own log4j defaults come from; a configuration from anywhere else is the user's.
SPARK_DEFAULT_PROFILE = "org/apache/spark/log4j2-defaults.properties"
#: Loggers that warn about nothing a sparktf user can change: kept to errors.
NOISY_LOGGERS = (
    "org.apache.hadoop.util.NativeCodeLoader",
    "org.apache.spark.BarrierCoordinator",
    "org.sparkproject.jetty",
    "org.apache.parquet",
)


def quiet_spark_logs(level: str = "WARN") -> bool:
    """Keep Spark's INFO lines off the driver's console, from the SparkContext's first line.

    Call it before the SparkSession starts (``spark.log.level`` and ``setLogLevel`` act only
    after the SparkContext has logged its start-up). It acts only where log4j runs on Spark's
    default profile: a ``log4j2.properties`` of yours (``SPARK_CONF_DIR``, or
    ``-Dlog4j2.configurationFile``) is left as it is.

    Parameters
    ----------
    level : str
        The driver JVM's root log level: ``WARN`` (default), ``ERROR``, ``INFO``, ...

    Returns
    -------
    bool
        True if the level was set; False if a SparkContext runs already, log4j has a
        configuration of the user's, or this Spark cannot be asked.
    """
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        return False  # started, and configured, by whoever started it
    try:
        SparkContext._ensure_initialized()
        jvm = SparkContext._jvm
        if jvm is None:
            raise RuntimeError("no JVM after SparkContext._ensure_initialized()")
        getattr(jvm.org.apache.spark.util, "Utils$").__getattr__(
            "MODULE$"
        ).initializeLogIfNecessary(False)
        config = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration()
        source = config.getConfigurationSource().getLocation() or ""
        if not source.endswith(SPARK_DEFAULT_PROFILE):
            return False
        levels = jvm.org.apache.logging.log4j.Level
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        configurator.setRootLevel(levels.toLevel(level))
        for name in NOISY_LOGGERS:
            configurator.setLevel(name, levels.ERROR)
    except Exception as exc:  # an older or different Spark: leave its logging alone
        log.debug("sparktf: could not set Spark's log level: %s", exc)
        return False
    return True


def from_numpy(
    spark: Any, columns: Mapping[str, Any], num_partitions: int | None = None
) -> DataFrame:
    """A DataFrame of numpy arrays, ``num_partitions`` even parts, without large tasks.

    The arrays travel once per executor as a Spark broadcast, and each partition cuts its
    rows from them as Arrow on the executor: no task carries the data in its closure (Spark
    warns of tasks over 1 MiB, and resends them on every retry).

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
    columns : mapping of str to numpy.ndarray
        Column name to array, all of the same length. A 1-d array is a scalar column; a 2-d
        array ``[N, k]`` an ``array<...>`` column of ``k`` values per row.
    num_partitions : int, optional
        Default: ``spark.sparkContext.defaultParallelism``.

    Returns
    -------
    pyspark.sql.DataFrame
    """
    import numpy as np
    import pyarrow as pa

    arrays = {name: np.ascontiguousarray(a) for name, a in columns.items()}
    lengths = {len(a) for a in arrays.values()}
    if len(lengths) != 1 or any(a.ndim not in (1, 2) for a in arrays.values()):
        from sparktf.errors import ConfigError

        shapes = {name: a.shape for name, a in arrays.items()}
        raise ConfigError(
            f"from_numpy: give 1-d or 2-d arrays of one length; got the shapes {shapes}"
        )
    parts = int(num_partitions or spark.sparkContext.defaultParallelism)
    bounds = np.linspace(0, lengths.pop(), parts + 1).astype(int).tolist()
    schema = pa.schema(
        [
            pa.field(n, pa.from_numpy_dtype(a.dtype))
            if a.ndim == 1
            else pa.field(n, pa.list_(pa.from_numpy_dtype(a.dtype)))
            for n, a in arrays.items()
        ]
    )
    shared = spark.sparkContext.broadcast(arrays)

    def slices(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        data = shared.value
        for batch in batches:
            for part in batch.column(0).to_pylist():
                lo, hi = bounds[part], bounds[part + 1]
                yield pa.RecordBatch.from_arrays(
                    [_arrow(data[f.name][lo:hi], f.type) for f in schema], schema=schema
                )

    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.range(0, parts, 1, parts).mapInArrow(slices, from_arrow_schema(schema))


def _arrow(values, arrow_type):
    import pyarrow as pa

    if values.ndim == 1:
        return pa.array(values, arrow_type)
    flat = pa.array(values.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, values.shape[1]).cast(arrow_type)
