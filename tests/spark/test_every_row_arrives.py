"""Every row arrives: equalization holds back only the rows that cannot be split evenly, in
every epoch, whatever the data's partitions (real Spark, local[4], tiny data).

``total % trainers`` rows an epoch at most: 1,000 rows over 2 training nodes hold back none,
however Spark partitioned them and whether or not later epochs are shuffled."""

import cloudpickle
import pytest
from helpers import feed_jobs

import sparktf

cloudpickle.register_pickle_by_value(feed_jobs)
pytestmark = pytest.mark.usefixtures("no_leaks")


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


def _train(spark, data, nodes, **kwargs):
    cluster = sparktf.run(
        spark.sparkContext,
        feed_jobs.values_per_epoch,
        {"col": "s"},
        num_executors=nodes,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(data, **kwargs)
    cluster.shutdown(timeout=120)
    return cluster


def _check_every_row_arrived(cluster, expected, epochs, nodes):
    """Every epoch: each row to exactly one node once, but ``len(expected) % nodes`` held
    back; every node the same number of rows."""
    results = list(cluster.results.values())
    held = 0
    for epoch in range(epochs):
        per_node = [r["epochs"][epoch] for r in results]
        delivered = [v for values in per_node for v in values]
        assert len(delivered) == len(set(delivered))  # at most once
        assert set(delivered) <= set(expected)
        assert len({len(values) for values in per_node}) == 1  # equal steps
        assert len(expected) - len(delivered) == len(expected) % nodes
        held += len(expected) - len(delivered)
    assert cluster.rows_held_back == held == sum(r["held_back"] for r in results)


def _partitioned(sc, rows, sizes):
    """An RDD of ``rows`` in partitions of exactly ``sizes`` rows, in order."""
    cuts = [sum(sizes[: i + 1]) for i in range(len(sizes))]

    def part(i):
        return next(p for p, cut in enumerate(cuts) if i < cut)

    rdd = sc.parallelize(list(enumerate(rows)), 2).partitionBy(len(sizes), part).values()
    assert rdd.glom().map(len).collect() == list(sizes)
    return rdd


STRINGS = [f"row-{i}" for i in range(1000)]


def _strings_df(spark, sizes):
    rdd = _partitioned(spark.sparkContext, STRINGS, sizes).map(lambda s: (s,))
    return spark.createDataFrame(rdd, "s string")


def test_a_dataframe_of_1000_strings_in_3_partitions_reaches_2_nodes_whole(spark):
    # dealt round the 2 nodes from each partition's own offset, 333 + 334 + 333 rows gave
    # one node 501 and the other 499: 2 held back
    cluster = _train(spark, _strings_df(spark, (333, 334, 333)), 2)
    _check_every_row_arrived(cluster, STRINGS, 1, 2)
    assert cluster.rows_held_back == 0


def test_3_shuffled_epochs_of_1000_rows_hold_back_none(spark):
    cluster = _train(spark, _strings_df(spark, (333, 334, 333)), 2, num_epochs=3, shuffle=True)
    _check_every_row_arrived(cluster, STRINGS, 3, 2)
    assert cluster.rows_held_back == 0


@pytest.mark.parametrize("nodes", [2, 3])
def test_an_rdd_with_empty_and_skewed_partitions_holds_back_only_the_remainder(spark, nodes):
    rows = [str(i) for i in range(1000)]
    rdd = _partitioned(spark.sparkContext, rows, (0, 5, 0, 995))
    cluster = _train(spark, rdd, nodes, num_epochs=2)
    _check_every_row_arrived(cluster, rows, 2, nodes)
