"""GPUs from Spark's resource scheduling, on a real local-cluster[2,2,1024].

There is no GPU here: a discovery script reports two stand-in GPUs ("3", "1") per worker, so
Spark's real scheduling assigns them to tasks; what is checked is which addresses each node
is given (ctx.gpus, CUDA_VISIBLE_DEVICES), not that CUDA uses them.

The executors' environment names their two GPUs by UUID, as container runtimes do
(``CUDA_VISIBLE_DEVICES=GPU-...3,GPU-...1``), and a stand-in ``nvidia-smi``
(tests/helpers/standin) is first on their PATH: each task's node must still see exactly the GPU
Spark assigned its task, never both."""

import os
import stat

import pytest
from helpers import jobs

import sparktf

UUID = "GPU-5a1d0000-0000-4000-8000-00000000000{}".format  # the stand-in nvidia-smi's

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.slow]


@pytest.fixture(scope="module")
def sc_gpus(spark_pool, tmp_path_factory):
    script = tmp_path_factory.mktemp("gpus") / "standin-gpus.sh"
    script.write_text('#!/bin/sh\necho \'{"name": "gpu", "addresses": ["3", "1"]}\'\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    standin = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers", "standin")
    conf = (
        ("spark.executorEnv.CUDA_VISIBLE_DEVICES", f"{UUID(3)},{UUID(1)}"),
        ("spark.executorEnv.PATH", standin + os.pathsep + os.environ["PATH"]),
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
        assert len(r["gpus"]) == 1 and r["gpus"][0] in ("3", "1")
        assert r["env"] == r["gpus"][0]  # one GPU, never the executor's two
    # the ps's task got a GPU from Spark too (one ResourceProfile per stage): it hides it
    assert cluster.results["ps:0"] is None  # ps nodes return nothing; checked by unit tests


def test_two_tasks_on_an_executor_of_two_gpus_see_one_each(sc_gpus, caplog):
    """Each executor has GPUs 3 and 1 (CUDA_VISIBLE_DEVICES names both) and runs two nodes:
    before, both nodes kept the executor's value and shared both GPUs. Both executors are on
    this host with the same two GPUs: four nodes on two GPUs share them, which is said."""
    caplog.set_level("WARNING", logger="sparktf")
    cluster = sparktf.run(sc_gpus, jobs.describe_gpus, num_executors=4, gpus_per_node=1)
    cluster.shutdown()
    seen = sorted(r["env"] for r in cluster.results.values())
    assert seen == ["1", "1", "3", "3"], seen
    said = [r.getMessage() for r in caplog.records if "no free one left" in r.getMessage()]
    assert len(said) == 2 and all("on 127.0.0.1 share GPU GPU-5a1d" in m for m in said), said
    assert all(r["gpus"] == [r["env"]] for r in cluster.results.values())


def test_two_executors_of_one_host_never_give_two_nodes_one_gpu(sc_gpus):
    """Both executors run on this host and see the same two GPUs (as on YARN without GPU
    isolation, where every container sees every GPU): Spark deals GPUs per executor, so the
    first task of each got GPU "3", and two TensorFlows shared it while "1" stayed idle. The
    driver, told which GPU each node got (nvidia-smi's UUIDs), gives the later one a free GPU."""
    cluster = sparktf.run(sc_gpus, jobs.describe_gpus, num_executors=2, gpus_per_node=1)
    cluster.shutdown()
    seen = sorted(r["env"] for r in cluster.results.values())
    assert seen == ["1", "3"], seen
    assert all(r["gpus"] == [r["env"]] for r in cluster.results.values())
    # (the two nodes may share an executor, which deals them GPUs itself: the YARN tier's
    # tests/yarn/test_yarn_gpus.py has one slot per executor, where the driver must deal)


def test_two_gpus_per_node(sc_gpus):
    cluster = sparktf.run(sc_gpus, jobs.describe_gpus, num_executors=2, gpus_per_node=2)
    cluster.shutdown()
    for r in cluster.results.values():
        assert sorted(r["gpus"]) == ["1", "3"] and r["env"] in ("3,1", "1,3")


def test_without_gpus_per_node_no_gpu_is_assigned(sc_gpus):
    cluster = sparktf.run(sc_gpus, jobs.describe_gpus, num_executors=2)
    cluster.shutdown()
    for r in cluster.results.values():
        # no GPU scheduling: the executor's own value, untouched (ctx.gpus says what it is)
        assert r["env"] == f"{UUID(3)},{UUID(1)}" and r["gpus"] == [UUID(3), UUID(1)]


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
