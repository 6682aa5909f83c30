"""The Spark barrier stages that hold the nodes: one task per node, one partition each.

Each builder does its Spark planning once and returns a *stage factory*: given an attempt's
:class:`~sparktf.common.spec.LaunchSpec` (its own secret and driver address), the function that runs
that attempt's barrier stage. The tasks themselves are :func:`sparktf.task.barrier.barrier_task`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from sparktf.common.spec import LaunchSpec
from sparktf.common.topology import NodeRole
from sparktf.driver import layout, partition
from sparktf.driver.sparkside import ConnectContext
from sparktf.errors import ConfigError
from sparktf.task.barrier import barrier_task

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import RDD, SparkContext
    from pyspark.resource import ResourceProfile
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

Stage = Callable[[], Any]

log = logging.getLogger(__name__)


def _with(rdd, profile):
    """The barrier stage's RDD with the job's ResourceProfile (GPUs per node), if any."""
    return rdd.withResources(profile) if profile is not None else rdd


def _empty(sc, num_nodes: int, task, profile=None) -> None:
    """A barrier stage of one empty partition per node (on Spark Connect, a barrier
    ``mapInArrow`` over one partition of ``range`` per node: Connect has no RDDs)."""
    if isinstance(sc, ConnectContext):
        df = sc.session.range(0, num_nodes, 1, num_nodes)
        df.mapInArrow(
            _ignoring_rows(task), "node string", barrier=True, **_profile(profile)
        ).collect()
        return
    _with(
        sc.parallelize(range(num_nodes), num_nodes).barrier().mapPartitions(task), profile
    ).collect()


def _ignoring_rows(task):
    """A ``mapInArrow`` function that runs ``task`` over no rows (its partition's are
    ``range``'s placeholders) and returns what it yields (InputMode.TENSORFLOW: its node, as
    a line of JSON) as rows of a ``node`` column."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for _ in batches:
            pass
        for line in task(iter(())):
            yield pa.RecordBatch.from_pydict({"node": [str(line)]})

    return run


def nodes_only(
    sc: SparkContext, roles: tuple[NodeRole, ...], profile: ResourceProfile | None = None
) -> Callable[[LaunchSpec], Stage]:
    """InputMode.TENSORFLOW: the nodes read their own data."""

    def stage(launch: LaunchSpec) -> Stage:
        return lambda: _empty(sc, len(roles), barrier_task(launch), profile)

    stage.phase = "main_fn"  # type: ignore[attr-defined]  # what Spark's UI shows: phase()
    return stage


def phase(stage_factory: Any) -> str:
    """What a stage factory's barrier stage does, in a word, for Spark's UI: ``main_fn``
    (InputMode.TENSORFLOW), ``training`` or ``inference`` (InputMode.SPARK)."""
    return getattr(stage_factory, "phase", "main_fn")


def arrow_schema(df: DataFrame, output: StructType | None = None) -> bytes:
    """The serialized Arrow schema of ``df`` as Spark's JVM writes its batches to Python (the
    session's time zone for timestamps, large strings and binaries if
    ``spark.sql.execution.arrow.useLargeVarTypes``), or of ``output``, a ``StructType`` a
    ``mapInArrow`` function returns (time zone UTC, as PySpark's worker converts it)."""
    conf = df.sparkSession.conf
    large = str(conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).lower() == "true"
    timezone = "UTC" if output is not None else conf.get("spark.sql.session.timeZone")
    return (
        schema_to_arrow(output if output is not None else df.schema, timezone, large)
        .serialize()
        .to_pybytes()
    )


def schema_to_arrow(schema: StructType, timezone: str | None, large: bool) -> pa.Schema:
    """PySpark's Arrow schema of a ``StructType``, timestamps in ``timezone``. PySpark 4.0 and
    4.1 take no time zone (``timestamp_utc``): their timestamps say UTC, the same instants
    (Arrow keeps every timestamp in UTC; the zone only says how to show it)."""
    import inspect

    from pyspark.sql.pandas import types

    params = inspect.signature(types.to_arrow_schema).parameters
    # keywords by what this PySpark's signature takes, so no one type fits them
    zone: dict[str, Any] = {"timezone": timezone} if "timezone" in params else {}  # 3.5: none
    if "prefers_large_types" in params:  # PySpark 4.0+ (3.5 has no useLargeVarTypes)
        zone["prefers_large_types"] = large
    return types.to_arrow_schema(schema, **zone)


def _is_rdd(data) -> bool:
    from pyspark import RDD

    return isinstance(data, RDD)


class Training:
    """InputMode.SPARK, ``cluster.train(data)``: each chief/worker gets its share.

    Built once per ``train()`` call, it does the Spark planning; called with an attempt's
    launch spec, it returns that attempt's stage. ``exchange``: rows are moved between nodes
    after the first pass if equalizing needs it (``FeedConfig.exchange``).
    Runs no Spark job: whatever the data needs computed (the user's maps and shuffles, the
    deal-out) runs in the stage, in the cluster's own Spark job."""

    phase = "training"  # what Spark's UI says the barrier stage does

    def __init__(
        self,
        sc,
        roles: tuple[NodeRole, ...],
        data,
        rebalance: bool | None,
        equalize: bool,
        profile=None,
    ) -> None:
        n = len(roles)
        trainers = sum(r.trains for r in roles)
        if not _is_rdd(data):
            data = partition.vectors_as_arrays(data)[0]
        decision = layout.decide(layout.known(data), n, trainers, rebalance)
        log.info("sparktf: %s", decision.why)
        # Equalizing moves the surplus rows node to node after the first pass, whether the
        # data is fed as it is or dealt out (a deal-out knows each partition's size alone:
        # partition.dealt_shares); rebalance=False holds the surplus back instead.
        self.exchange = rebalance is not False and equalize and trainers > 1
        rebalance = decision.rebalance
        self.sc, self.n, self.trainers, self.profile = sc, n, trainers, profile
        self.data, self.rebalance = data, rebalance
        self.rdd: RDD[Any] | None = None
        self.raw: RDD[bytes] | None = None  # the same, Spark's own pickled batches unopened
        self.schema: bytes | None = None
        if _is_rdd(data):
            self.rdd = partition.rdd_for_nodes(data, n, trainers) if rebalance else data
            self.raw = partition.raw_pickled_batches(self.rdd)
        else:
            self.schema = arrow_schema(data)

    def __call__(self, launch: LaunchSpec) -> Stage:
        rdd = self.rdd
        if rdd is not None:
            return lambda: self._feed_rdd(rdd, launch)
        return lambda: self._feed_dataframe(launch)

    def _feed_rdd(self, rdd: RDD[Any], launch: LaunchSpec) -> None:
        if self.raw is not None:
            rdd, task = self.raw, barrier_task(launch, "pickled-batches")
        else:
            task = barrier_task(launch, "pickle")
        _with(rdd.barrier().mapPartitions(task), self.profile).collect()

    def _feed_dataframe(self, launch: LaunchSpec) -> None:
        task = barrier_task(launch, "arrow", self.schema)
        profile = self.profile
        if not self.rebalance:
            self.data.mapInArrow(task, "node string", barrier=True, **_profile(profile)).collect()
            return
        df = partition.dataframe_for_nodes(self.data, self.n, self.trainers)
        if not df.mapInArrow(
            _saying_it_ran(task), "node string", barrier=True, **_profile(profile)
        ).collect():
            # Adaptive execution plans the deal-out of an empty DataFrame as no partitions
            # at all: no barrier task ran (the data's stages did, once). Start the nodes over
            # empty partitions; they get the schema and the end. (Asking df.isEmpty() first
            # would compute the user's stages twice.)
            _empty(self.sc, self.n, lambda _: task(iter(())), profile)


def _saying_it_ran(task):
    """A training ``mapInArrow`` barrier function that yields one row once ``task`` is done,
    so that the driver tells a stage that ran no task (no partitions) from one that did."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        yield from task(batches)
        yield pa.RecordBatch.from_pydict({"node": ["ran"]})

    return run


class Inference:
    """InputMode.SPARK, ``cluster.inference(data)``: every node scores a contiguous range of
    the rows, and ``output`` is the result in input order, an ordinary RDD or DataFrame.

    The barrier stage ends at a shuffle (:func:`~sparktf.driver.partition.outputs_by_input_partition`,
    :func:`~sparktf.driver.partition.dataframe_outputs_in_order`): the output is read from
    its files, so ``take``, ``show``, ``limit``, ``union``, a join or a lost block never start
    the barrier stage again; it is persisted (memory and disk) too. An RDD's output has the
    input's partitions, row for row (it zips with the input). Everything, the counting and
    dealing out of the input included, runs in the stage, in the cluster's Spark job. Built
    for one attempt (inference is not restarted)."""

    phase = "inference"  # what Spark's UI says the barrier stage does

    def __init__(self, sc, roles: tuple[NodeRole, ...], data, schema, profile=None) -> None:
        if not _is_rdd(data):
            data = partition.vectors_as_arrays(data)[0]
        self.sc, self.n, self.data, self.schema = sc, len(roles), data, schema
        self.profile = profile
        #: A DataFrame's output as an Arrow schema, for the nodes (None for an RDD)
        self.output_schema = None if _is_rdd(data) else arrow_schema(data, schema)
        #: The result; set by the stage before its barrier job starts.
        self.output: RDD[Any] | DataFrame | None = None

    def __call__(self, launch: LaunchSpec) -> Stage:
        if _is_rdd(self.data):
            return lambda: self._score_rdd(launch)
        return lambda: self._score_dataframe(launch)

    def _score_rdd(self, launch: LaunchSpec) -> None:
        from pyspark import StorageLevel

        data, n = self.data, self.n
        counts = None
        ordered = data
        if not (data.getNumPartitions() == n and partition.barrier_ready(data)):
            counts = partition.partition_sizes(data)
            ordered = partition.rdd_in_order(data, n, counts)
        raw = partition.raw_pickled_batches(ordered)
        scored = _with(
            (raw or ordered)
            .barrier()
            .mapPartitions(
                barrier_task(launch, "pickled-batches" if raw is not None else "pickle")
            ),
            self.profile,
        )
        out = partition.outputs_by_input_partition(scored, n, counts)
        out.persist(StorageLevel.MEMORY_AND_DISK)
        self.output = out
        out.count()

    def _score_dataframe(self, launch: LaunchSpec) -> None:
        from pyspark import StorageLevel

        data, n = self.data, self.n
        df = data
        shape = layout.dataframe_known(data)
        if not (shape.count == n and shape.ready):
            # Dealt out into one range per node; an empty DataFrame has none to deal
            # (one partition per node, empty or not, is fed as it is: no job to ask).
            df = partition.dataframe_in_order(data, n)
            if df is None:
                task = barrier_task(launch, "arrow", arrow_schema(data))
                self.output = data.sparkSession.createDataFrame([], self.schema)
                _empty(self.sc, n, lambda _: task(iter(())), self.profile)
                return
        task = barrier_task(launch, "arrow", arrow_schema(df))
        scored = df.mapInArrow(task, self.schema, barrier=True, **_profile(self.profile))
        out = partition.dataframe_outputs_in_order(scored, n)
        out.persist(StorageLevel.MEMORY_AND_DISK)
        self.output = out
        out.count()


def _profile(profile: Any) -> dict[str, Any]:
    """mapInArrow's ``profile`` argument where there is one to give: PySpark 3.5's
    mapInArrow has no such parameter (a GPU resource profile needs PySpark 4.0)."""
    if profile is None:
        return {}
    import inspect

    from pyspark.sql import DataFrame

    if "profile" not in inspect.signature(DataFrame.mapInArrow).parameters:
        raise ConfigError(
            "a Spark resource profile for a DataFrame's barrier stage (GPUs per node) needs "
            "PySpark 4.0 or later; feed an RDD (df.rdd) or upgrade PySpark"
        )
    return {"profile": profile}
