"""``sparktf.warm_up(spark)``: start every executor's Python worker daemon now, in a background
Spark job, so that the first stage that needs a Python worker (sparktf's barrier stage,
``sparktf.predict``) finds the daemon started instead of starting it on its own critical path.

With ``spark.python.daemon.module=sparktf.daemon`` the daemon imports TensorFlow before it forks
a worker (:mod:`sparktf.daemon`), so warming up moves that import (1.5-3 s of a core) to where
the driver is busy with something else, typically loading and planning the training data. Without
it the warm-up only starts pyspark's own daemon, which is cheap; nothing breaks either way.

Spark keeps one daemon per executor and per worker environment, and Spark SQL's Python stages
(``mapInArrow``: sparktf's DataFrame feeding and ``sparktf.predict``) run with one more variable
than RDD stages (``mapPartitions``: RDD feeding, InputMode.TENSORFLOW), so they have daemons of
their own: ``dataframes`` and ``rdds`` say which to start. Both are started with a plain RDD
stage (the DataFrame one given the SQL stages' variables): a cold Spark SQL stage would take
about 2 s more to get there.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import uuid
from typing import TYPE_CHECKING

from sparktf.errors import ConfigError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

#: How long the driver's exit waits for a warm-up still running (its tasks import TensorFlow:
#: 1.5-3 s of a core each).
SETTLE_SECS = 10.0


def _report(batches):
    """The warm-up task (on an executor): which daemon forked this worker, and whether it had
    TensorFlow imported already."""
    import pyarrow as pa

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict(
        {"daemon": [os.getppid()], "tensorflow": ["tensorflow" in sys.modules]}
    )


def _report_rdd(_rows):
    return [(os.getppid(), "tensorflow" in sys.modules)]


#: What Spark SQL's Python runners add to a worker's environment, by the setting that decides it
#: (Spark 3.1+ and 4.x; the worker factory, so the daemon, is chosen by the environment).
_SQL_ENV = (
    (
        "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled",
        "true",
        "SPARK_SIMPLIFIED_TRACEBACK",
    ),
    ("spark.sql.execution.pyspark.udf.hideTraceback.enabled", "false", "SPARK_HIDE_TRACEBACK"),
)


def _sql_worker_env(conf) -> dict[str, str]:
    """The variables a DataFrame stage's Python workers get beyond an RDD stage's."""
    env = {}
    for key, default, variable in _SQL_ENV:
        try:
            value = conf.get(key, default)
        except Exception:
            value = default
        if str(value).strip().lower() == "true":
            env[variable] = "1"
    return env


def _rdd_job(sc, tasks: int, extra_env: dict[str, str]) -> list[tuple[int, bool]] | None:
    """One task per slot in an RDD stage whose Python workers get ``extra_env`` as well: with
    a DataFrame stage's variables it reaches the daemon DataFrame stages use without Spark SQL's
    planning and its first stage's set-up (about 2 s before the daemon even starts, cold).
    None where pyspark's internals for that are not there (the caller then runs a DataFrame
    stage instead)."""
    rdd = sc.parallelize(range(tasks), tasks).mapPartitions(_report_rdd)
    if extra_env:
        try:
            try:
                from pyspark.core.rdd import _wrap_function  # pyspark 4
            except ImportError:
                from pyspark.rdd import _wrap_function  # type: ignore[no-redef]  # pyspark 3
            func = _wrap_function(sc, rdd.func, rdd._prev_jrdd_deserializer, rdd._jrdd_deserializer)
            env = func.envVars()
            for key, value in extra_env.items():
                env.put(key, value)
            rdd._jrdd_val = sc._jvm.PythonRDD(
                rdd._prev_jrdd.rdd(), func, rdd.preservesPartitioning, False
            ).asJavaRDD()
        except Exception:
            return None
    return [tuple(row) for row in rdd.collect()]


class WarmUp:
    """The background warm-up: :meth:`wait` for it (never needed before a sparktf call: Spark
    queues the next stage behind it), :meth:`cancel` it, read what the workers reported."""

    def __init__(self, sc, session, job_group: str, kinds: tuple[str, ...], tasks: int) -> None:
        self._sc = sc
        self._session = session
        self.job_group = job_group
        self.kinds = kinds
        self.tasks = tasks
        #: {"dataframes"|"rdds": [(daemon pid, TensorFlow preloaded), ...]}, once done
        self.reports: dict[str, list[tuple[int, bool]]] = {}
        #: why the warm-up job failed (it never raises: a failed warm-up changes no result)
        self.error: str | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def tensorflow_preloaded(self) -> bool | None:
        """True when every worker that reported found TensorFlow imported by its daemon; None
        before the warm-up has finished or when it failed."""
        rows = [row for rows in self.reports.values() for row in rows]
        if not self.done or self.error is not None or not rows:
            return None
        return all(loaded for _, loaded in rows)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the warm-up job has ended (or ``timeout`` seconds); True when it has."""
        return self._done.wait(timeout)

    def cancel(self) -> None:
        """Cancel the warm-up job if it still runs (its daemons, once started, stay)."""
        if not self.done:
            try:
                self._sc.cancelJobGroup(self.job_group)
            except Exception:
                pass

    def _settle(self, timeout: float = SETTLE_SECS) -> None:
        """At the driver's exit: give a warm-up still running (the program ended, or failed,
        within seconds of starting) up to ``timeout`` seconds to end. Spark stopping under its
        tasks logs them as crashed Python workers and missing broadcasts, errors that bury
        the program's own."""
        if not self.done and self._sc._jsc is not None:
            self._done.wait(timeout)

    def _run(self) -> None:
        """The warm-up thread: its jobs, any failure kept as ``error`` (never raised)."""
        try:
            self._jobs()
        except BaseException as exc:
            text = str(exc).strip()
            self.error = type(exc).__name__ + (f": {text.splitlines()[0]}" if text else "")
        finally:
            self._done.set()
            atexit.unregister(self._settle)  # nothing left to wait for at exit

    def _jobs(self) -> None:
        self._sc.setJobGroup(
            self.job_group,
            "sparktf.warm_up: starting the executors' Python worker daemons",
            interruptOnCancel=False,
        )
        for kind in self.kinds:
            extra = _sql_worker_env(self._sql_session().conf) if kind == "dataframes" else {}
            rows = _rdd_job(self._sc, self.tasks, extra)
            if rows is None:  # only with extra env (dataframes): pyspark's internals moved
                rows = self._sql_job()
            self.reports[kind] = rows

    def _sql_session(self):
        if self._session is None:
            from pyspark.sql import SparkSession

            self._session = SparkSession(self._sc)
        return self._session

    def _sql_job(self) -> list[tuple[int, bool]]:
        rows = (
            self._sql_session()
            .range(self.tasks, numPartitions=self.tasks)
            .mapInArrow(_report, "daemon long, tensorflow boolean")
            .collect()
        )
        return [(r["daemon"], r["tensorflow"]) for r in rows]

    def __repr__(self) -> str:
        state = (
            "running"
            if not self.done
            else f"failed: {self.error}"
            if self.error
            else f"done, tensorflow preloaded: {self.tensorflow_preloaded}"
        )
        return f"WarmUp({', '.join(self.kinds)}; {self.tasks} tasks; {state})"


class ConnectWarmUp(WarmUp):
    """The warm-up of a Spark Connect session: a ``mapInArrow`` stage of one task per slot
    the server's conf promises, tagged (Connect's tags are its job groups) so that
    :meth:`cancel` interrupts it. Connect has no RDD stages, so only the DataFrame daemons."""

    def cancel(self) -> None:
        if not self.done:
            try:
                self._session.interruptTag(self.job_group)
            except Exception:
                pass

    def _settle(self, timeout: float = SETTLE_SECS) -> None:
        if not self.done and not getattr(self._session, "is_stopped", False):
            self._done.wait(timeout)

    def _jobs(self) -> None:
        self._session.addTag(self.job_group)  # this thread's operations only
        self.reports["dataframes"] = self._sql_job()


def _connect_warm_up(session, kinds: tuple[str, ...]) -> WarmUp:
    from sparktf.driver import sparkfacts
    from sparktf.driver.sparkside import ConnectContext

    if "rdds" in kinds:
        raise ConfigError(
            "sparktf.warm_up(rdds=True) over Spark Connect: Connect has no RDD stages (the "
            "cluster's stages are DataFrame stages there); warm up with dataframes=True alone"
        )
    if getattr(session, "is_stopped", False):
        raise ConfigError("sparktf.warm_up: the Spark Connect session is stopped")
    sc = ConnectContext(session)
    tasks = sparkfacts.connect_slots(sc.master, sc.conf()) or 1
    handle = ConnectWarmUp(sc, session, f"sparktf-warm-up-{uuid.uuid4().hex[:8]}", kinds, tasks)
    return _started(handle, threading.Thread)


def _started(handle: WarmUp, thread: type) -> WarmUp:
    handle._thread = thread(target=handle._run, name=handle.job_group, daemon=True)
    atexit.register(handle._settle)  # before the start: the job unregisters it when it ends
    handle._thread.start()
    return handle


def warm_up(
    spark: SparkSession | SparkContext, *, dataframes: bool = True, rdds: bool = False
) -> WarmUp:
    """Start the executors' Python worker daemons now, in the background, and return at once.

    ``spark``: the SparkSession or SparkContext. ``dataframes``: the daemon that DataFrame
    stages use (``cluster.train(df)``, ``sparktf.predict``); ``rdds``: the one RDD stages use
    (``cluster.train(rdd)``, InputMode.TENSORFLOW's nodes). One task per task slot, so that
    every executor gets one as long as its slots are free. Call it right after the session
    starts, before loading the data; with ``spark.python.daemon.module=sparktf.daemon`` the
    daemons import TensorFlow meanwhile. Returns a :class:`WarmUp`.

    On a Spark Connect session, one DataFrame stage of one task per slot the server's conf
    promises (Connect has no RDD stages: ``rdds=True`` is refused); the daemon settings are
    the server's."""
    from sparktf.driver import sparkfacts

    for name, value in (("dataframes", dataframes), ("rdds", rdds)):
        if not isinstance(value, bool):
            raise ConfigError(
                f"sparktf.warm_up: {name} must be True or False, not "
                f"{value!r} ({type(value).__name__})"
            )
    kinds = tuple(k for k, on in (("dataframes", dataframes), ("rdds", rdds)) if on)
    if not kinds:
        raise ConfigError(
            "sparktf.warm_up: nothing to warm up; pass dataframes=True and/or rdds=True"
        )
    if sparkfacts.is_connect(spark):
        return _connect_warm_up(spark, kinds)
    sc = getattr(spark, "sparkContext", spark)
    from pyspark import SparkContext

    if not isinstance(sc, SparkContext):
        raise ConfigError(
            f"sparktf.warm_up(spark): spark must be a SparkSession or a "
            f"SparkContext, not {type(spark).__name__}"
        )
    if sc._jsc is None:
        raise ConfigError("sparktf.warm_up: the SparkContext has been stopped")
    from pyspark.util import InheritableThread

    # The session whose SQL settings decide the DataFrame stages' worker environment: the
    # caller's (read here: a thread's active session is the caller thread's).
    session = spark if sc is not spark else sparkfacts.active_session(sc)
    handle = WarmUp(
        sc, session, f"sparktf-warm-up-{uuid.uuid4().hex[:8]}", kinds, max(1, sc.defaultParallelism)
    )
    return _started(handle, InheritableThread)
