"""``gpus_per_node`` over Spark Connect: the cluster's barrier stage asks its GPUs through a
ResourceProfile that sparktf creates on the Connect server, so the server's default profile
need not ask any. A real Connect server on local-cluster[2,2,1024], whose workers report two
stand-in GPUs ("3", "1") each through a discovery script (there is no GPU here): Spark's real
scheduling assigns one to each training node's task, which is what is checked."""

import stat

import pytest
from helpers import jobs
from helpers.connect_server import connect_server

import sparktf

pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect]")
pytestmark = [pytest.mark.tf, pytest.mark.slow]


@pytest.fixture(scope="module")
def gpu_remote(tmp_path_factory):
    folder = tmp_path_factory.mktemp("connect_gpus")
    script = folder / "standin-gpus.sh"
    script.write_text('#!/bin/sh\necho \'{"name": "gpu", "addresses": ["3", "1"]}\'\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    conf = {
        "spark.worker.resource.gpu.amount": "2",
        "spark.worker.resource.gpu.discoveryScript": str(script),
        "spark.executor.resource.gpu.amount": "2",
        "spark.executor.resource.gpu.discoveryScript": str(script),
    }
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with connect_server(folder / "server.log", "local-cluster[2,2,1024]", conf) as url:
        spark = ConnectSession.builder.remote(url).create()
        yield spark
        spark.stop()


def test_each_training_node_gets_one_gpu_through_a_profile_made_on_the_server(gpu_remote):
    assert gpu_remote.conf.get("spark.task.resource.gpu.amount", None) is None
    cluster = sparktf.run(
        gpu_remote, jobs.describe_gpus, num_executors=3, num_ps=1, gpus_per_node=1
    )
    cluster.shutdown(timeout=180)
    trainers = [cluster.results[n] for n in ("chief:0", "worker:0")]
    for r in trainers:
        assert len(r["gpus"]) == 1 and r["gpus"][0] in ("3", "1")
        assert r["env"] == r["gpus"][0]


def test_more_gpus_per_node_than_an_executor_has_is_refused_before_anything_starts(gpu_remote):
    with pytest.raises(sparktf.ConfigError, match="spark.executor.resource.gpu.amount=2"):
        sparktf.run(gpu_remote, jobs.describe_gpus, num_executors=2, gpus_per_node=3)
