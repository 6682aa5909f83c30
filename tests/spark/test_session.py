"""sparktf.from_numpy and sparktf.quiet_spark_logs on a real local Spark.

(The examples' console test in tests/e2e/test_examples.py checks quiet_spark_logs where it
matters: before a fresh spark-submit's SparkContext starts.)"""

import numpy as np
import pytest

import sparktf


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


def test_arrays_become_a_dataframe_in_even_parts_row_for_row(spark):
    images = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    labels = np.arange(10, dtype=np.int64)
    df = sparktf.from_numpy(spark, {"image": images, "label": labels}, num_partitions=3)
    assert df.schema.simpleString() == "struct<image:array<float>,label:bigint>"
    assert df.rdd.getNumPartitions() == 3
    assert sorted(df.rdd.glom().map(len).collect()) == [3, 3, 4]
    rows = df.orderBy("label").collect()
    assert [r.label for r in rows] == list(range(10))
    assert np.array_equal(np.array([r.image for r in rows], dtype=np.float32), images)


def test_arrays_of_different_lengths_are_a_clear_error(spark):
    with pytest.raises(sparktf.ConfigError, match="of one length"):
        sparktf.from_numpy(spark, {"a": np.zeros(3), "b": np.zeros(4)})


def test_quiet_spark_logs_leaves_a_running_spark_alone(spark):
    assert sparktf.quiet_spark_logs() is False
