"""On YARN the executors' containers must leave the TensorFlow nodes memory beside the JVM
heap: checked on the driver before the nodes start (sparktf/driver/yarnmemory.py, called by
the preflight). No Spark cluster needed: the rule reads the Spark conf."""

import logging

import pytest
from pyspark import SparkConf

from sparktf.common.settings import Settings
from sparktf.driver import preflight, yarnmemory
from sparktf.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("384", 384),
        ("384m", 384),
        ("2g", 2048),
        ("1500M", 1500),
        ("1gb", 1024),
        ("512k", 0.5),
        ("1t", 1 << 20),
        ("lots", None),
    ],
)
def test_spark_memory_sizes_read_as_mebibytes(text, mib):
    assert yarnmemory.mebibytes(text) == mib


@pytest.mark.parametrize(
    ("conf", "mib"),
    [
        ({}, 384),  # Spark's defaults: 1g heap, max(384 MiB, 10%)
        ({"spark.executor.memory": "8g"}, 819.2),
        ({"spark.executor.memory": "8g", "spark.executor.memoryOverheadFactor": "0.3"}, 2457.6),
        ({"spark.executor.memoryOverhead": "2g", "spark.executor.memory": "8g"}, 2048),
        ({"spark.yarn.executor.memoryOverhead": "1500"}, 1500),  # the old name
        ({"spark.executor.minMemoryOverhead": "1g"}, 1024),
        ({"spark.executor.memoryOverhead": "1g", "spark.executor.pyspark.memory": "512m"}, 1536),
    ],
)
def test_the_containers_memory_beside_the_heap_follows_spark_s_rule(conf, mib):
    assert yarnmemory.overhead_mib(conf)[0] == pytest.approx(mib)


def yarn(**conf):
    return {"spark.master": "yarn", **{k.replace("_", "."): v for k, v in conf.items()}}


def test_spark_s_default_overhead_on_yarn_is_refused_naming_the_setting_and_the_figures():
    problem = yarnmemory.overhead_problem(yarn(), num_nodes=3)
    assert "holds 384 MiB beside the JVM heap" in problem
    assert "spark.executor.memoryOverhead unset" in problem
    assert "1 TensorFlow node per executor need about 1408 MiB" in problem
    assert "--conf spark.executor.memoryOverhead=1408m" in problem
    assert "spark.sparktf.yarnOverheadCheck=warn" in problem


@pytest.mark.parametrize(
    ("conf", "nodes", "ok"),
    [
        ({"spark.executor.memoryOverhead": "1500m"}, 3, True),  # what the YARN tier uses
        ({"spark.executor.memoryOverhead": "2g"}, 3, True),  # what docs/yarn.md says
        ({"spark.executor.memoryOverhead": "1g"}, 3, False),
        ({"spark.executor.memoryOverhead": "2g", "spark.executor.cores": "2"}, 3, False),
        ({"spark.executor.memoryOverhead": "2432m", "spark.executor.cores": "2"}, 3, True),
        # two cores but one node: only one node can land in an executor
        ({"spark.executor.memoryOverhead": "1500m", "spark.executor.cores": "2"}, 1, True),
        (
            {
                "spark.executor.memoryOverhead": "1500m",
                "spark.executor.cores": "2",
                "spark.task.cpus": "2",
            },
            3,
            True,
        ),
        ({"spark.executor.memory": "16g"}, 3, True),  # 10% of 16 GiB: 1638 MiB
    ],
)
def test_the_overhead_needed_grows_with_the_nodes_an_executor_holds(conf, nodes, ok):
    assert (yarnmemory.overhead_problem(yarn() | conf, nodes) is None) == ok


@pytest.mark.parametrize("master", ["local[4]", "local-cluster[2,1,1024]", "spark://h:7077", None])
def test_other_masters_are_not_checked(master):
    conf = {} if master is None else {"spark.master": master}
    assert yarnmemory.overhead_problem(conf, 3) is None


def preflight_on(conf: SparkConf, **more):
    """What the preflight finds, from a SparkConf as the driver's context carries it."""
    values = dict(conf.getAll())
    return preflight.memory_problems(values, Settings.resolve(values, **more))


def test_the_preflight_refuses_a_yarn_conf_with_spark_s_default_overhead():
    conf = SparkConf(loadDefaults=False).setMaster("yarn").set("spark.executor.instances", "2")
    [problem] = preflight_on(conf, num_executors=2)
    assert "spark.executor.memoryOverhead" in problem and "1408 MiB" in problem
    with pytest.raises(ConfigError, match="memoryOverhead=1408m"):
        raise ConfigError.from_problems(preflight_on(conf))


def test_the_preflight_only_warns_where_the_setting_says_so(caplog):
    conf = SparkConf(loadDefaults=False).setMaster("yarn")
    conf.set("spark.sparktf.yarnOverheadCheck", "warn")
    with caplog.at_level(logging.WARNING, logger="sparktf.driver.preflight"):
        assert preflight_on(conf) == []
    assert "1408 MiB" in caplog.text


def test_the_check_can_be_turned_off_and_a_bad_value_is_named():
    conf = SparkConf(loadDefaults=False).setMaster("yarn")
    assert preflight_on(conf.set("spark.sparktf.yarnOverheadCheck", "off")) == []
    with pytest.raises(ConfigError, match="yarnOverheadCheck must be one of"):
        Settings.resolve({"spark.sparktf.yarnOverheadCheck": "loud"})


def test_enough_overhead_passes_the_preflight():
    conf = SparkConf(loadDefaults=False).setMaster("yarn")
    assert preflight_on(conf.set("spark.executor.memoryOverhead", "2g")) == []
