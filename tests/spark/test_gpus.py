"""GPUs from Spark's resource scheduling, on a real local-cluster[2,2,1024].

There is no GPU here: a discovery script reports two stand-in GPUs ("0", "1") per worker, so
Spark's real scheduling assigns them to tasks; what is checked is which addresses each node
is given (ctx.gpus, CUDA_VISIBLE_DEVICES), not that CUDA uses them."""

import os
import stat

import pytest
from helpers import jobs

import sparktf

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.slow]


@pytest.fixture(scope="module")
def sc_gpus(spark_pool, tmp_path_factory):
    script = tmp_path_factory.mktemp("gpus") / "standin-gpus.sh"
    script.write_text('#!/bin/sh\necho \'{"name": "gpu", "addresses": ["0", "1"]}\'\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    conf = (
        ("spark.worker.resource.gpu.amount", "2"),
        ("spark.worker.resource.gpu.discoveryScript", str(script)),
        ("spark.executor.resource.gpu.amount", "2"),
        ("spark.executor.resource.gpu.discoveryScript", str(script)),
    )
    yield spark_pool.get("local-cluster[2,2,1024]", conf)
    spark_pool.stop()


def test_each_training_node_gets_the_gpus_spark_assigned_and_a_ps_none(sc_gpus):
    cluster = sparktf.run(sc_gpus, jobs.describe_gpus, num_executors=3, num_ps=1, gpus_per_node=1)
    cluster.shutdown()
    trainers = [cluster.results[n] for n in ("chief:0", "worker:0")]
    for r in trainers:
        assert len(r["gpus"]) == 1 and r["gpus"][0] in ("0", "1")
        assert r["env"] == r["gpus"][0]
    # the ps's task got a GPU from Spark too (one ResourceProfile per stage): it hides it
    assert cluster.results["ps:0"] is None  # ps nodes return nothing; checked by unit tests


def test_two_gpus_per_node(sc_gpus):
    cluster = sparktf.run(sc_gpus, jobs.describe_gpus, num_executors=2, gpus_per_node=2)
    cluster.shutdown()
    for r in cluster.results.values():
        assert sorted(r["gpus"]) == ["0", "1"] and r["env"] in ("0,1", "1,0")


def test_without_gpus_per_node_no_gpu_is_assigned(sc_gpus):
    cluster = sparktf.run(sc_gpus, jobs.describe_gpus, num_executors=2)
    cluster.shutdown()
    for r in cluster.results.values():
        assert r["gpus"] == [] and r["env"] == os.environ.get("CUDA_VISIBLE_DEVICES")


def test_an_evaluator_takes_no_gpu(sc_gpus):
    cluster = sparktf.run(
        sc_gpus, jobs.describe_gpus, num_executors=2, eval_node=True, gpus_per_node=1
    )
    cluster.shutdown()
    assert cluster.results["evaluator:0"] == {"gpus": [], "env": "", "job": "evaluator"}
    assert len(cluster.results["chief:0"]["gpus"]) == 1


def test_more_gpus_than_the_executors_have_is_a_clear_error(sc_gpus):
    with pytest.raises(sparktf.ConfigError, match="ask for at most 2"):
        sparktf.run(sc_gpus, jobs.describe_gpus, num_executors=2, gpus_per_node=3)


def test_gpus_in_local_mode_is_a_clear_error(sc_local):
    with pytest.raises(sparktf.ConfigError, match="local mode"):
        sparktf.run(sc_local, jobs.describe_gpus, num_executors=1, gpus_per_node=1)
