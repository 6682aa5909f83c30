"""Driver-side conveniences around a Spark session: the one start-up call a script makes
(:func:`spark_session`), a console without Spark's INFO lines, and numpy arrays as a DataFrame
without large tasks.

Runs on the driver; imports pyspark (and numpy, pyarrow on the executors) when called, never
tensorflow.
"""

from __future__ import annotations

import logging
import os
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


#: The daemon that imports TensorFlow once per executor (:mod:`sparktf.daemon`).
DAEMON_CONF = "spark.python.daemon.module"
#: What that daemon imports before it forks workers (``SPARKTF_PRELOAD``).
PRELOAD_CONF = "spark.executorEnv.SPARKTF_PRELOAD"
#: ``warm_up=`` of :func:`spark_session`: which of the executors' daemons to start now.
WARM_UPS = {
    True: ("dataframes",),
    "dataframes": ("dataframes",),
    "rdds": ("rdds",),
    "both": ("dataframes", "rdds"),
    False: (),
}
_LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")


def spark_session(
    app_name: str = "sparktf",
    *,
    conf: Mapping[str, Any] | None = None,
    py_files: Iterable[str] = (),
    preload: Iterable[str] | str | None = None,
    warm_up: bool | str = True,
    log_level: str | None = "WARN",
    master: str | None = None,
) -> Any:
    """The SparkSession a sparktf script starts with: Spark's INFO lines off the console, each
    executor's Python daemon importing TensorFlow once, the script's own modules shipped, and
    the daemons started while the driver loads its data. Returns the SparkSession.

    What it does, in order (each step is what the examples did by hand):

    1. ``log_level``: :func:`quiet_spark_logs` before the SparkContext starts (None: leave
       Spark's logging as it is).
    2. Builds the session with ``conf`` (``spark.*`` keys, as ``SparkSession.builder.config``),
       adding ``spark.python.daemon.module=sparktf.daemon`` (:mod:`sparktf.daemon`) unless
       ``conf``, ``spark-submit --conf`` or spark-defaults.conf already set it, and
       ``spark.executorEnv.SPARKTF_PRELOAD`` from ``preload`` (module names; None: the
       daemon's default, ``tensorflow``; ``()``: none). If a SparkContext already runs (a
       notebook, the pyspark shell), it is used as it is: its static settings cannot change,
       and a warning says so when its daemon is not sparktf's. ``master``: the master to
       use only where none is given (``conf``, ``spark-submit --master``, spark-defaults),
       so that ``python script.py`` runs as ``spark-submit script.py`` does; spark-submit's
       own default, ``local[*]`` when no ``--master`` is given, counts as none.
    3. ``py_files``: ``SparkContext.addPyFile`` for each (``.py``, ``.zip``, ``.egg``): the
       executors, the TF nodes and the driver import them.
    4. ``warm_up``: :func:`sparktf.warm_up` in the background: ``True`` or ``"dataframes"``
       (the daemon that DataFrame feeds and ``sparktf.predict`` use), ``"rdds"`` (RDD feeds,
       InputMode.TENSORFLOW), ``"both"``, or ``False``.

    Over Spark Connect (``spark.remote`` in ``conf``, or ``SPARK_REMOTE``) the client reaches
    no JVM: the session is built with ``conf``, ``py_files`` go as artifacts
    (``addArtifacts(pyfile=True)``), the warm-up starts the DataFrame stages' daemons (Connect
    has no RDD stages), and the daemon, the preload and the log level are the server's to set
    (they are skipped, and logged).

    Bad arguments raise :class:`~sparktf.errors.ConfigError` before anything starts.
    """
    files, modules, kinds, opts = _start_up_arguments(
        app_name, conf, py_files, preload, warm_up, log_level, master
    )
    from pyspark.sql import SparkSession

    remote = opts.get("spark.remote") or os.environ.get("SPARK_REMOTE")
    if remote or str(opts.get("spark.api.mode", "")).lower() == "connect":
        session = _connect_session(app_name, opts, files)
        if "dataframes" in kinds:
            from sparktf.driver.warmup import warm_up as start

            start(session)  # Connect's stages are DataFrame stages: their daemons alone
        return session
    from pyspark import SparkConf, SparkContext

    running = SparkContext._active_spark_context is not None
    if log_level and not running:
        quiet_spark_logs(log_level)
    builder = SparkSession.builder.appName(app_name)
    if running:
        session = builder.getOrCreate()
        daemon = session.sparkContext.getConf().get(DAEMON_CONF, "pyspark.daemon")
        if daemon != "sparktf.daemon":
            log.warning(
                "sparktf.spark_session: a SparkContext was already running, with %s=%s; its "
                "executors' Python workers each import TensorFlow themselves. Call "
                "sparktf.spark_session before anything starts Spark, or set %s=sparktf.daemon",
                DAEMON_CONF,
                daemon,
                DAEMON_CONF,
            )
    else:
        SparkContext._ensure_initialized()  # the JVM, whose properties SparkConf() reads
        given = SparkConf()  # spark-submit's --conf and spark-defaults.conf, as Spark reads them
        # spark-submit without --master says local[*], its default: that names no master
        if (
            master
            and "spark.master" not in opts
            and given.get("spark.master", "local[*]") == "local[*]"
        ):
            opts["spark.master"] = master
        if DAEMON_CONF not in opts and not given.contains(DAEMON_CONF):
            opts[DAEMON_CONF] = "sparktf.daemon"
        if modules is not None and PRELOAD_CONF not in opts:
            opts[PRELOAD_CONF] = ",".join(modules)
        for key, value in opts.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    for path in files:
        session.sparkContext.addPyFile(path)
    if kinds:
        from sparktf.driver.warmup import warm_up as start

        start(session, dataframes="dataframes" in kinds, rdds="rdds" in kinds)
    return session


def _connect_session(app_name: str, opts: dict[str, str], files: list[str]) -> Any:
    from pyspark.sql import SparkSession

    from sparktf.driver.sparkside import check_connect_server

    url = opts.get("spark.remote") or os.environ.get("SPARK_REMOTE")
    if url:
        check_connect_server(url)

    builder = SparkSession.builder.appName(app_name)
    for key, value in opts.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if files:
        session.addArtifacts(*files, pyfile=True)
    log.info(
        "sparktf.spark_session: a Spark Connect session; the executors' daemon (%s) and its "
        "preload are the server's settings, not the client's",
        DAEMON_CONF,
    )
    return session


def _bad(what: str) -> Exception:
    from sparktf.errors import ConfigError

    return ConfigError(f"sparktf.spark_session: {what}")


def _start_up_arguments(app_name, conf, py_files, preload, warm_up, log_level, master=None):
    """spark_session's arguments, checked: (files, preload modules or None, warm-up kinds,
    the conf as strings). Every problem is a ConfigError that says what to pass instead."""
    if not isinstance(app_name, str) or not app_name.strip():
        raise _bad(f"app_name must be a non-empty str, not {app_name!r}")
    if isinstance(warm_up, (bool, str)) and warm_up in WARM_UPS:
        kinds = WARM_UPS[warm_up]
    else:
        raise _bad(f"warm_up must be True, False, 'dataframes', 'rdds' or 'both', not {warm_up!r}")
    if log_level is not None and (
        not isinstance(log_level, str) or log_level.upper() not in _LOG_LEVELS
    ):
        raise _bad(f"log_level must be one of {', '.join(_LOG_LEVELS)} or None, not {log_level!r}")
    if master is not None and (not isinstance(master, str) or not master.strip()):
        raise _bad(
            f"master must be a Spark master URL such as 'local[2]' or 'yarn', not {master!r}"
        )
    return _files(py_files), _modules(preload), kinds, _spark_conf(conf)


def _spark_conf(conf) -> dict[str, str]:
    if conf is not None and not isinstance(conf, Mapping):
        raise _bad(f"conf must be a mapping of Spark keys to values, not {type(conf).__name__}")
    opts: dict[str, str] = {}
    for key, value in (conf or {}).items():
        if not isinstance(key, str) or not key.startswith("spark."):
            raise _bad(f"conf key {key!r} is not a Spark setting (spark.*)")
        if not isinstance(value, (str, int, float, bool)):
            raise _bad(f"conf[{key!r}] must be a str, int, float or bool, not {value!r}")
        opts[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return opts


def _files(py_files) -> list[str]:
    files = []
    for path in [py_files] if isinstance(py_files, str) else py_files:
        if not isinstance(path, (str, os.PathLike)):
            raise _bad(f"py_files must be paths, not {path!r}")
        path = os.fspath(path)
        if "://" not in path and not os.path.exists(path):
            raise _bad(f"py_files: {path!r} does not exist (a .py, .zip or .egg to ship)")
        files.append(path)
    return files


def _modules(preload) -> tuple[str, ...] | None:
    if preload is None:
        return None
    names = preload.replace(" ", ",").split(",") if isinstance(preload, str) else preload
    try:
        modules = tuple(n for n in names if n)
    except TypeError:
        raise _bad(f"preload must be module names, not {preload!r}") from None
    if not all(
        isinstance(n, str) and all(part.isidentifier() for part in n.split(".")) for n in modules
    ):
        raise _bad(
            f"preload must be module names such as ('tensorflow', 'tf_keras'), not {preload!r}"
        )
    return modules


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
