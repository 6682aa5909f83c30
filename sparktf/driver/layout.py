"""Driver side: how many partitions the data of ``train()`` has, read from what Spark already
knows (the RDD, the DataFrame's physical plan, its cache), and whether it is fed as it is.

Nothing here runs a Spark job. A DataFrame under adaptive query execution (AQE) is never asked
for ``df.rdd``: that runs every shuffle of its plan at once, outside the cluster's Spark job
(and the barrier job then runs them again). Its count is read from the plan AQE starts from,
where AQE cannot change it: ``repartition(n)`` / ``repartition(n, cols)`` (a shuffle of origin
``REPARTITION_BY_NUM``, which AQE neither coalesces nor splits), a cached relation (its
partitions once computed, else its plan's), a leaf (a file scan's splits, ``spark.range``,
local rows, an RDD's), through operators that keep each partition as it is. Anything else
(a join, an aggregation's shuffle that AQE may coalesce, a union, ``coalesce``) is unknown
until it runs, and is dealt out over a shuffle instead (:mod:`sparktf.driver.partition`).

The choice itself (:func:`decide`) is pure: plain data in, plain data out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparktf.driver import partition
from sparktf.errors import ConfigError

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Known:
    """What Spark says of the data's partitions without running a job.

    ``count``: how many (None: only running the data would tell); ``source``: where the count
    comes from, or why it is unknown, in a user's words; ``ready``: whether Spark accepts a
    barrier stage straight over the data (no ``union`` or ``coalesce`` in its last stage)."""

    count: int | None
    source: str
    ready: bool = True


@dataclass(frozen=True)
class Decision:
    """Whether ``train()`` deals the data out over a shuffle (``rebalance``), and why (``why``,
    the line the driver logs)."""

    rebalance: bool
    why: str


def decide(known: Known, nodes: int, trainers: int, rebalance: bool | None) -> Decision:
    """Feed the data as it is or deal it out: as it is when it has one partition per node, all
    of them training, and Spark can run a barrier stage over it (``rebalance`` None), or when
    asked to (``rebalance=False``, refused with what to change if it cannot be)."""
    shaped = known.count == nodes == trainers
    as_is = (
        f"feeding {nodes} partitions as they are ({known.source}, "
        f"{known.count} partitions = {nodes} training nodes)"
    )
    if rebalance is False and not shaped:
        raise ConfigError(f"rebalance=False cannot be honoured: {_misfit(known, nodes, trainers)}")
    # (rebalance=False over a lineage Spark cannot barrier is tried: Spark's error says so,
    # with the hint to leave rebalance unset, sparkjobs.spark_error_text)
    if rebalance is False or (rebalance is None and shaped and known.ready):
        return Decision(False, as_is)
    why = "rebalance=True" if rebalance else _misfit(known, nodes, trainers)
    return Decision(True, f"shuffling into {nodes} partitions: {why}")


def _misfit(known: Known, nodes: int, trainers: int) -> str:
    """Why data of this layout cannot be fed as it is to these nodes, and what would do."""
    if known.count is None and known.source.startswith("a Spark Connect"):
        return (
            f"the number of partitions is unknown to the client ({known.source}); end the "
            f"plan in repartition({trainers}) to have it fed as it is (a cache or a "
            "coalesce is the server's to know), or leave rebalance unset"
        )
    if known.count is None:
        return (
            f"the number of partitions is unknown until Spark runs the data ({known.source}); "
            f"repartition(n) or cache it in {trainers} partitions to have it fed as it is, "
            "or leave rebalance unset"
        )
    if trainers != nodes:
        return (
            f"{nodes} nodes of which {trainers} train (a ps or an evaluator takes no rows): "
            "only data dealt out gives each its share; leave rebalance unset"
        )
    if known.count != nodes:
        return (
            f"{known.source}: {known.count} partition(s) for {nodes} training nodes; "
            f"repartition({nodes}) to have it fed as it is, or leave rebalance unset"
        )
    return (
        f"{known.source}: Spark cannot run a barrier stage straight over it (a union or "
        "coalesce in its last stage); leave rebalance unset"
    )


def known(data: RDD[Any] | DataFrame) -> Known:
    """The partitions of ``data`` (an RDD or a DataFrame), as far as Spark knows them now."""
    from pyspark import RDD

    if isinstance(data, RDD):
        kind = "cached RDD" if data.is_cached else "RDD"
        return Known(data.getNumPartitions(), kind, partition.barrier_ready(data))
    return dataframe_known(data)


def dataframe_known(df: DataFrame) -> Known:
    """A DataFrame's partitions from its physical plan (see the module's docstring); unknown
    for a Spark Connect DataFrame, whose plan stays on the server (it is dealt out)."""
    if type(df).__module__.startswith("pyspark.sql.connect."):
        return connect_known(df)
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() != "AdaptiveSparkPlanExec":
        # No shuffle for AQE to plan: building df.rdd runs no job, and its count is exact.
        walked = _Walk(df.sparkSession.sparkContext._jvm).walk(plan)
        source = walked.source if walked.count is not None else "DataFrame"
        return Known(df.rdd.getNumPartitions(), source, partition.barrier_ready(df))
    return _Walk(df.sparkSession.sparkContext._jvm).walk(plan.initialPlan())


#: Connect's client-side relations that keep their child's partitions as they are.
_CONNECT_KEEPS = frozenset(
    {"Project", "WithColumns", "Filter", "Drop", "WithColumnsRenamed", "ToDF", "SubqueryAlias"}
)


def connect_known(df: Any) -> Known:
    """A Spark Connect DataFrame's partitions, read from the plan the client builds (its
    executed plan stays on the server): the last ``repartition(n)``, ``repartition(n, cols)``
    or ``range(..., numPartitions=n)`` under column-wise steps (select, withColumn, filter,
    drop, renames), whose counts adaptive execution leaves alone; unknown otherwise."""
    plan = getattr(df, "_plan", None)
    steps = []
    while plan is not None and type(plan).__name__ in _CONNECT_KEEPS:
        steps.append(type(plan).__name__)
        plan = getattr(plan, "_child", None)
    kind = type(plan).__name__
    count = None
    if kind == "Repartition" and getattr(plan, "_shuffle", False):
        count, source = getattr(plan, "_num_partitions", None), "repartition({n})"
    elif kind == "RepartitionByExpression":
        count, source = getattr(plan, "num_partitions", None), "repartition({n}, columns)"
    elif kind == "Range":
        count, source = getattr(plan, "_num_partitions", None), "range(..., numPartitions={n})"
    if not isinstance(count, int) or count < 1:
        return Known(
            None,
            "a Spark Connect DataFrame whose plan, as the client sees it, does not end in "
            "repartition(n)",
            False,
        )
    return Known(count, "a Spark Connect DataFrame's " + source.format(n=count))


#: Shuffles whose partition count adaptive execution leaves alone (repartition(n[, cols])).
_FIXED_SHUFFLE = "REPARTITION_BY_NUM"

#: One-child operators that do not keep each partition as it is.
_REGROUPING = frozenset(
    {
        "CoalesceExec",
        "CollectLimitExec",
        "CollectTailExec",
        "GlobalLimitExec",
        "TakeOrderedAndProjectExec",
        "AQEShuffleReadExec",
    }
)

#: Leaves whose RDD is built without a job: the method of each that gives it.
_LEAVES = {
    "FileSourceScanExec": "inputRDD",
    "BatchScanExec": "inputRDD",
    "RDDScanExec": "rdd",
    "ExternalRDDScanExec": "rdd",
    "RangeExec": "execute",
    "LocalTableScanExec": "execute",
}

_LEAF_WORDS = {
    "FileSourceScanExec": "a file scan's splits",
    "BatchScanExec": "a file scan's splits",
    "RDDScanExec": "a DataFrame of an RDD",
    "ExternalRDDScanExec": "a DataFrame of an RDD",
    "RangeExec": "spark.range",
    "LocalTableScanExec": "local rows",
}


class _Walk:
    """Down a physical plan from its root, through operators that keep each partition as it
    is, to what fixes the count: a fixed shuffle, a cached relation or a leaf."""

    def __init__(self, jvm: Any) -> None:
        self.jvm = jvm

    def walk(self, node: Any) -> Known:
        while True:
            name = node.getClass().getSimpleName()
            if name == "AdaptiveSparkPlanExec":
                # initialPlan, not inputPlan: the exchanges (an aggregation's, a join's) are
                # added between the two, and a plan without them looks partition-preserving
                node = node.initialPlan()
            elif name == "ShuffleExchangeExec":
                return self._shuffle(node)
            elif name == "InMemoryTableScanExec":
                return self._cached(node.relation())
            elif name in _LEAVES:
                return self._leaf(node, name)
            elif node.children().size() != 1 or name in _REGROUPING or "Exchange" in name:
                return Known(None, f"its plan has {name} on the way to its partitions")
            else:
                node = node.children().apply(0)

    def _shuffle(self, node: Any) -> Known:
        n = node.outputPartitioning().numPartitions()
        origin = node.shuffleOrigin().toString()
        if origin == _FIXED_SHUFFLE:
            return Known(n, f"repartition({n})")
        return Known(None, f"a shuffle adaptive execution may resize ({origin})")

    def _cached(self, relation: Any) -> Known:
        builder = relation.cacheBuilder()
        if builder.isCachedColumnBuffersLoaded():
            rdd = builder.cachedColumnBuffers()
            return Known(rdd.getNumPartitions(), "cached DataFrame", self._uniform(rdd))
        inner = self.walk(relation.cachedPlan())
        where = f"cached DataFrame, not computed yet: {inner.source}"
        return Known(inner.count, where, inner.ready)

    def _leaf(self, node: Any, name: str) -> Known:
        rdd = getattr(node, _LEAVES[name])()
        return Known(rdd.getNumPartitions(), _LEAF_WORDS[name], self._uniform(rdd))

    def _uniform(self, rdd: Any) -> bool:
        return partition.uniform_lineage(rdd, self.jvm)
