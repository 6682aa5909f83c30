"""Driver side of InputMode.SPARK: give each node its partition of an RDD or a DataFrame.

A barrier stage needs exactly one partition per node, and only the chief and workers (ranks
``0..trainers-1``) may get rows. Data that already has that shape is fed as it is. Data of any
other shape (or ``rebalance=True``) is dealt out round-robin (within each input partition,
starting at an offset that depends on the partition: :func:`deal_slot`) over a shuffle whose
partitioner sends rows exactly where chosen. Deterministic: the same input gives every trainer
the same rows every time.

Either way the shares can come out unequal: a partition's own size is all a deal-out knows, so
each partition may give one trainer one row more than another (:func:`dealt_shares`). When
synchronous training needs the shares equal, the surplus rows then move after the first pass,
node to node (:func:`~sparktf.driver.job.feedbound.moves`; see :mod:`sparktf.node.feed`), and
only ``total % trainers`` rows of an epoch, fewer than one per training node, are held back
(:func:`~sparktf.driver.job.feedbound.held_back`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from sparktf.errors import SparkJobError

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

KEY = "__sparktf_node"


def _identity(key: int) -> int:
    return key


def deal_slot(index: int, position: int, trainers: int) -> int:
    """The trainer that the deal-out gives the row at ``position`` of input partition
    ``index``: round-robin from an offset of the partition's own (``dataframe_for_nodes``
    computes the same in Spark SQL)."""
    return (index + position) % trainers


def rdd_for_nodes(rdd: RDD[Any], num_nodes: int, num_trainers: int) -> RDD[Any]:
    """``rdd`` as ``num_nodes`` partitions; partitions ``>= num_trainers`` are empty."""
    trainers = num_trainers

    def deal(index: int, items: Iterable[Any]) -> Iterator[tuple[int, Any]]:
        return ((deal_slot(index, i, trainers), item) for i, item in enumerate(items))

    return rdd.mapPartitionsWithIndex(deal).partitionBy(num_nodes, _identity).values()


def dealt_shares(sizes: list[int], trainers: int) -> list[int]:
    """The rows each of ``trainers`` gets when input partitions of ``sizes`` rows are dealt
    out (:func:`deal_slot`). Each partition gives ``size // trainers`` to every trainer and
    one more to ``size % trainers`` of them, from its offset on: the shares differ by up to
    one row per input partition, since no partition knows the others' sizes."""
    shares = [0] * trainers
    for index, size in enumerate(sizes):
        whole, extra = divmod(size, trainers)
        for t in range(trainers):
            shares[t] += whole + ((t - index) % trainers < extra)
    return shares


_VECTOR_UDTS = ("org.apache.spark.ml.linalg.VectorUDT", "org.apache.spark.mllib.linalg.VectorUDT")


def vectors_as_arrays(
    df: DataFrame,
    cols: Iterable[str] | None = None,
    *,
    dtype: str = "float64",
    suffix: str = "",
) -> tuple[DataFrame, list[str], list[str]]:
    """Spark ML vector columns (``VectorUDT`` of ``pyspark.ml`` or ``pyspark.mllib``, dense
    or sparse: ``VectorAssembler``'s output) as array columns, so that they reach Python as
    2-D arrays instead of one dict per row.

    Converts those among ``cols`` (default: every column) to ``array<double>`` (``dtype``
    ``"float32"``: ``array<float>``), in place, or as new columns ``<col><suffix>``. Returns
    (the DataFrame, ``df`` itself if nothing changed; the names to read ``cols`` from; the
    columns added). A projection: the partitions stay as they are."""
    from pyspark.sql.types import UserDefinedType

    # Told apart by their JVM class, without importing pyspark.ml (0.4 s of the driver's start,
    # pandas included) for data that has no vectors.
    fields = {f.name: f.dataType for f in df.schema.fields}
    cols = list(fields) if cols is None else list(cols)
    vectors = [
        c
        for c in cols
        if isinstance(t := fields.get(c), UserDefinedType) and t.scalaUDT() in _VECTOR_UDTS
    ]
    if not vectors:
        return df, cols, []
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    df = df.withColumns(
        {
            c + suffix: vector_to_array(F.col("`" + c.replace("`", "``") + "`"), dtype=dtype)
            for c in vectors
        }
    )
    return (
        df,
        [c + suffix if c in vectors else c for c in cols],
        [c + suffix for c in vectors] if suffix else [],
    )


def barrier_ready(data: RDD[Any] | DataFrame) -> bool:
    """Whether Spark can run a barrier stage straight over ``data`` (an RDD or DataFrame).

    Spark refuses a barrier stage whose narrow lineage has an RDD with another number of
    partitions than the stage's (``union``, ``coalesce``, partition pruning...): such data is
    dealt out over a shuffle instead. Walks the lineage on the JVM; for a DataFrame, that of
    ``df.rdd``, which pyspark keeps: no Spark job, but only for a DataFrame without adaptive
    execution's shuffles (:mod:`sparktf.driver.layout` asks its plan instead).
    """
    from pyspark import RDD

    rdd = data if isinstance(data, RDD) else data.rdd
    if getattr(rdd, _READY, False):
        return True  # a lineage never changes (a checkpoint only shortens it): asked before
    if rdd.ctx._jvm is None:  # a stopped SparkContext: Spark would refuse any stage
        return False
    ready = uniform_lineage(rdd._jrdd.rdd(), rdd.ctx._jvm)
    if ready:
        setattr(rdd, _READY, True)
    return ready


def uniform_lineage(root: Any, jvm: Any) -> bool:
    """Whether every RDD of the last stage of ``root`` (a JVM RDD), walked back to the
    shuffles that start it, has ``root``'s number of partitions: Spark's condition for a
    barrier stage over it. A few py4j calls per RDD, no Spark job."""
    shuffle = jvm.java.lang.Class.forName("org.apache.spark.ShuffleDependency")
    n, seen, todo = root.getNumPartitions(), set(), [root]
    while todo:
        node = todo.pop()
        if node.id() in seen:
            continue
        seen.add(node.id())
        if node.getNumPartitions() != n:
            return False
        deps = node.dependencies()
        for i in range(deps.size()):
            dep = deps.apply(i)
            if not shuffle.isInstance(dep):  # a shuffle starts another stage
                todo.append(dep.rdd())
    return True


#: Set on an RDD found barrier-ready: the walk costs ~10 py4j calls per RDD of its lineage
#: (tens of milliseconds for a DataFrame's), on every train() over the same data.
_READY = "_sparktf_barrier_ready"


def functions_for(obj: Any) -> Any:
    """The ``functions`` module for a DataFrame or session: Spark Connect's own for one of
    Connect's (``pyspark.sql.functions`` builds Connect columns only in a process that is
    wholly a Connect client), else ``pyspark.sql.functions``."""
    if type(obj).__module__.startswith("pyspark.sql.connect."):
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    from pyspark.sql import functions

    return functions


def partition_keys(spark: SparkSession, num_nodes: int, num_trainers: int) -> list[int]:
    """Long keys whose Spark hash partition (Murmur3, as ``repartition(n, col)`` uses) is 0, 1, ..."""
    F = functions_for(spark)

    rows = (
        spark.range(0, 64 * num_nodes)
        .select("id", F.expr(f"pmod(hash(id), {num_nodes})").alias("p"))
        .collect()
    )
    first: dict[int, int] = {}
    for row in rows:
        first.setdefault(row["p"], row["id"])
    missing = [t for t in range(num_trainers) if t not in first]
    if missing:
        raise SparkJobError(f"no key hashes to partitions {missing} of {num_nodes}")
    return [first[t] for t in range(num_trainers)]


def dataframe_for_nodes(df: DataFrame, num_nodes: int, num_trainers: int) -> DataFrame:
    """``df`` as ``num_nodes`` partitions; partitions ``>= num_trainers`` are empty."""
    F = functions_for(df)

    keys = partition_keys(df.sparkSession, num_nodes, num_trainers)
    table = F.array(*[F.lit(k).cast("long") for k in keys])
    # Each partition deals its rows round the trainers from an offset of its own (its index),
    # as rdd_for_nodes does: the row's position in its partition is monotonically_increasing_id
    # less the partition's part of it (index << 33; not the id itself: 2**33 mod 3 is 2, which
    # cancelled the offset for 3 trainers and sent every partition's surplus to the first).
    pid = F.spark_partition_id().cast("long")
    position = F.monotonically_increasing_id() - F.shiftleft(pid, 33)
    slot = F.pmod(pid + position, F.lit(num_trainers))  # deal_slot(pid, position, trainers)
    return (
        df.withColumn(KEY, F.element_at(table, (slot + 1).cast("int")))
        .repartition(num_nodes, KEY)
        .drop(KEY)
    )


def partition_sizes(rdd: RDD[Any]) -> list[int]:
    """How many elements each partition of ``rdd`` holds (one Spark job)."""
    return rdd.mapPartitions(lambda items: [sum(1 for _ in items)]).collect()


def node_starts(total: int, num_nodes: int) -> list[int]:
    """The index of the first of ``total`` rows each of ``num_nodes`` contiguous ranges
    starts at, and ``total`` last: node ``k`` scores rows ``starts[k]:starts[k + 1]``."""
    return [-(-k * total // num_nodes) for k in range(num_nodes)] + [total]


def _offsets(counts: list[int]) -> list[int]:
    """Where each partition of these sizes starts in the whole, and the total last."""
    out, running = [], 0
    for c in counts:
        out.append(running)
        running += c
    return out + [running]


def rdd_in_order(rdd: RDD[Any], num_nodes: int, counts: list[int]) -> RDD[Any]:
    """``rdd`` (whose partitions hold ``counts`` elements) as ``num_nodes`` contiguous
    ranges, in order (for inference: node ``k`` gets rows ``node_starts(...)[k]`` on)."""
    offsets = _offsets(counts)
    total = offsets[-1]

    def indexed(index: int, items: Iterable[Any]) -> Iterator[tuple[int, Any]]:
        return ((offsets[index] + i, item) for i, item in enumerate(items))

    def slot(position: int) -> int:
        return min(position * num_nodes // max(total, 1), num_nodes - 1)

    return (
        rdd.mapPartitionsWithIndex(indexed)
        .repartitionAndSortWithinPartitions(num_nodes, slot)
        .values()
    )


#: Outputs travel from a node's barrier task to their input partition in chunks of this many.
OUTPUT_CHUNK = 1024


def outputs_by_input_partition(
    scored: RDD[Any], num_nodes: int, counts: list[int] | None
) -> RDD[Any]:
    """The outputs of an inference's barrier stage (``scored``: node ``k``'s outputs, in the
    order of its rows) as an ordinary RDD: one partition per input partition, each holding the
    outputs of that partition's rows in order, so that it zips with the input.

    The barrier stage ends at this shuffle: whatever a user runs on the result (``take``,
    ``union``, ``zip``, a recomputed block) reads the shuffle's files and never starts the
    barrier stage again. ``counts`` is None when each node scored one input partition whole
    (fed as it is); else the input's partition sizes, dealt out by :func:`rdd_in_order`."""
    parts = num_nodes if counts is None else max(len(counts), 1)
    # where each node's rows start, and each input partition's offset (None: fed as it is)
    plan = None if counts is None else (node_starts(sum(counts), num_nodes), _offsets(counts))

    def keyed(node: int, outputs: Iterable[Any]) -> Iterator[tuple[tuple[int, int], list[Any]]]:
        if plan is None:
            for seq, chunk in enumerate(_chunked(outputs, OUTPUT_CHUNK)):
                yield (node, seq), chunk
            return
        starts, offsets = plan
        position, part, chunk, first = starts[node], 0, [], starts[node]
        while part + 2 < len(offsets) and position >= offsets[part + 1]:
            part += 1
        for item in outputs:
            crossing = part + 2 < len(offsets) and position >= offsets[part + 1]
            if chunk and (crossing or len(chunk) >= OUTPUT_CHUNK):
                yield (part, first), chunk
                chunk, first = [], position
            while part + 2 < len(offsets) and position >= offsets[part + 1]:
                part += 1
            chunk.append(item)
            position += 1
        if chunk:
            yield (part, first), chunk

    def place(key: tuple[int, int]) -> int:
        return key[0]

    return (
        scored.mapPartitionsWithIndex(keyed)
        .repartitionAndSortWithinPartitions(parts, place)
        .flatMap(_second)
    )


def _second(pair):
    return pair[1]


def _chunked(items, size: int):
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def dataframe_outputs_in_order(scored: DataFrame, num_nodes: int) -> DataFrame:
    """The output DataFrame of an inference's barrier ``mapInArrow`` (``scored``, node ``k``'s
    outputs in partition ``k``) as an ordinary DataFrame: the barrier stage ends at a shuffle
    that keeps each node's outputs in their partition and order, so ``show``, ``limit``, a
    join or a recomputed block never start the barrier stage again."""
    F = functions_for(scored)

    order = "__sparktf_order"
    keys = partition_keys(scored.sparkSession, num_nodes, num_nodes)
    table = F.array(*[F.lit(k).cast("long") for k in keys])
    return (
        scored.withColumns(
            {
                order: F.monotonically_increasing_id(),
                KEY: F.element_at(table, F.spark_partition_id() + 1),
            }
        )
        .repartition(num_nodes, KEY)
        .sortWithinPartitions(order)
        .drop(KEY, order)
    )


def dataframe_in_order(df: DataFrame, num_nodes: int) -> DataFrame | None:
    """``df`` as exactly ``num_nodes`` contiguous ranges, in order (for inference outputs);
    None if it has no rows.

    Exactly: a range partitioning would give fewer partitions than nodes for a small
    DataFrame, and a barrier stage needs one per node. Each row's position is its input
    partition's offset (one counting pass) plus its place in that partition, both read from
    ``monotonically_increasing_id``; positions are cut into ``num_nodes`` equal ranges and sent
    to their node by keys whose hash partition is that node's.
    """
    F = functions_for(df)

    mid = "__sparktf_mid"
    with_id = df.withColumn(mid, F.monotonically_increasing_id())
    part = F.shiftright(F.col(mid), 33)
    counts: dict[int, int] = dict(with_id.groupBy(part.alias("p")).count().collect())
    total = sum(counts.values())
    if not total:
        return None
    offsets, running = [], 0
    for p in range(max(counts, default=-1) + 1):
        offsets.append(running)
        running += counts.get(p, 0)
    keys = partition_keys(df.sparkSession, num_nodes, num_nodes)
    offset = F.element_at(
        F.array(*[F.lit(o).cast("long") for o in offsets or [0]]), (part + 1).cast("int")
    )
    position = offset + F.col(mid).bitwiseAND(F.lit((1 << 33) - 1))
    slot = F.least(F.floor(position * num_nodes / F.lit(max(total, 1))), F.lit(num_nodes - 1)).cast(
        "int"
    )
    table = F.array(*[F.lit(k).cast("long") for k in keys])
    return (
        with_id.withColumn(KEY, F.element_at(table, slot + 1))
        .repartition(num_nodes, KEY)
        .sortWithinPartitions(mid)
        .drop(KEY, mid)
    )


def raw_pickled_batches(rdd: RDD[Any]) -> RDD[bytes] | None:
    """The same RDD whose partitions yield Spark's own pickled batches (bytes), unopened.

    When PySpark stores ``rdd`` as pickled lists of elements (a ``BatchedSerializer`` over a
    pickle serializer, which is what ``map``, ``parallelize`` and cached RDDs use), a barrier task
    can forward those frames to the TF process as they are, instead of unpickling and pickling
    every element again. Returns None for other serializers (text files, ...).
    """
    from pyspark.rdd import RDD
    from pyspark.serializers import (
        BatchedSerializer,
        CloudPickleSerializer,
        CPickleSerializer,
        NoOpSerializer,
    )

    ser = rdd._jrdd_deserializer
    if isinstance(ser, BatchedSerializer) and isinstance(
        ser.serializer, (CPickleSerializer, CloudPickleSerializer)
    ):
        return RDD(rdd._jrdd, rdd.ctx, NoOpSerializer())
    return None
