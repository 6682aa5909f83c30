"""GPUs from YARN's GPU scheduling on the real test YARN: its NodeManager's GPU plugin
(``yarn.io/gpu``) runs a stand-in ``nvidia-smi`` listing two GPUs (there is no GPU here; the
stand-in is tests/helpers/standin/nvidia-smi, its XML inventory the plugin's real parser reads),
and the scheduler counts them (DominantResourceCalculator). bin/yarn-test-cluster.sh sets this
up (``$SPARKTF_YARN_GPUS``, default 2).

As on a cluster with YARN's DefaultContainerExecutor, YARN counts GPUs but does not isolate
them: each executor's discovery script (bin/gpu-discovery.sh, unchanged) sees both GPUs, and
Spark gave each executor's one task GPU 0. What is checked is which GPU each node is given,
not that CUDA uses it."""

import json
import os

import pytest
from yarn_harness import ROOT

pytestmark = [pytest.mark.yarn, pytest.mark.slow, pytest.mark.timeout(600)]

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_job.py")


def gpu_conf(yarn):
    return {
        "spark.executor.resource.gpu.amount": "1",
        "spark.executor.resource.gpu.discoveryScript": os.path.join(
            ROOT, "bin", "gpu-discovery.sh"
        ),
        "spark.task.resource.gpu.amount": "1",
        # the stand-in nvidia-smi for the discovery script and the tasks
        "spark.executorEnv.PATH": os.path.join(yarn.state, "gpu", "bin") + ":" + os.environ["PATH"],
    }


def test_yarn_counts_the_nodemanagers_gpus(yarn):
    node = yarn.rest("/nodes")["nodes"]["node"][0]
    kinds = {
        r["name"]: r["value"]
        for r in node["totalResource"]["resourceInformations"]["resourceInformation"]
    }
    assert kinds.get("yarn.io/gpu") == 2, kinds


def test_two_containers_of_one_gpu_each_give_their_nodes_different_gpus(yarn, tmp_path):
    """Both executors' discovery lists GPUs 0 and 1, and Spark picks a task's GPU within its
    own executor, so both tasks may get the same one (seen here in about half the runs before
    the driver dealt GPUs). The driver, told at the rendezvous which GPU each node got
    (nvidia-smi's UUIDs), gives a later node of the host a free one and says so; the rule's
    every case is in tests/unit/test_gpu_env.py, its warning in tests/spark/test_gpus.py."""
    out = yarn.submit(JOB, conf=gpu_conf(yarn), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("NODES=")]
    assert line, out.stdout[-3000:] + out.stderr[-3000:]
    nodes = json.loads(line[0].split("=", 1)[1])
    assert sorted(n["env"] for n in nodes.values()) == ["0", "1"], nodes
    assert all(n["gpus"] == [n["env"]] for n in nodes.values()), nodes
    # each node in its own YARN container, each container holding one yarn.io/gpu
    assert len({n["container"] for n in nodes.values()}) == 2, nodes
    if "instead" in out.stderr:  # Spark gave both GPU 0 this time: the driver dealt
        assert "gets GPU-5a1d0000-0000-4000-8000-000000000001 instead" in out.stderr
