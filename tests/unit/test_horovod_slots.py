"""run(framework="horovod"): each node's Horovod rank, local and cross rank and environment,
as horovodrun assigns them, from the cluster sparktf reserved; the settings it refuses.
Pure: no Spark, no TensorFlow, no Horovod."""

import pytest

from sparktf.common import horovod
from sparktf.common.settings import Settings
from sparktf.driver.preflight import framework_problems
from sparktf.errors import ConfigError


def _table(hosts):
    return [
        (s.rank, s.local_rank, s.local_size, s.cross_rank, s.cross_size, s.size)
        for s in horovod.slots(hosts)
    ]


@pytest.mark.parametrize(
    "hosts, expected",
    [
        (["a"], [(0, 0, 1, 0, 1, 1)]),
        (["a", "a"], [(0, 0, 2, 0, 1, 2), (1, 1, 2, 0, 1, 2)]),
        (["a", "b"], [(0, 0, 1, 0, 2, 2), (1, 0, 1, 1, 2, 2)]),
        # ranks as Spark placed the tasks: a host's nodes need not be next to each other
        (
            ["a", "b", "a", "b"],
            [(0, 0, 2, 0, 2, 4), (1, 0, 2, 1, 2, 4), (2, 1, 2, 0, 2, 4), (3, 1, 2, 1, 2, 4)],
        ),
        # uneven hosts: local rank 1 exists on host a only
        (["a", "a", "b"], [(0, 0, 2, 0, 2, 3), (1, 1, 2, 0, 1, 3), (2, 0, 1, 1, 2, 3)]),
    ],
)
def test_local_and_cross_ranks_follow_the_hosts(hosts, expected):
    assert _table(hosts) == expected


def test_the_chief_is_rank_0_and_serves_the_rendezvous_on_its_port():
    spec = {"chief": ["10.0.0.1:4000"], "worker": ["10.0.0.2:4001", "[::1]:4002"]}
    assert [s.hostname for s in horovod.cluster_slots(spec)] == ["10.0.0.1", "10.0.0.2", "::1"]
    assert horovod.rendezvous_address(spec) == ("10.0.0.1", 4000)
    workers_only = {"worker": ["h:1", "h:2"]}
    assert horovod.rendezvous_address(workers_only) == ("h", 1)
    assert [s.local_rank for s in horovod.cluster_slots(workers_only)] == [0, 1]


def test_the_environment_is_what_horovodrun_gives_a_gloo_process():
    slot = horovod.slots(["a", "b", "a"])[2]
    env = horovod.environment(slot, ("a", 4000), "eth1", 120.0)
    assert env == {
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "a",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": "4000",
        "HOROVOD_GLOO_IFACE": "eth1",
        "HOROVOD_HOSTNAME": "a",
        "HOROVOD_RANK": "2",
        "HOROVOD_SIZE": "3",
        "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2",
        "HOROVOD_CROSS_RANK": "0",
        "HOROVOD_CROSS_SIZE": "1",
        "HOROVOD_GLOO_TIMEOUT_SECONDS": "120",  # not horovodrun's 30: nodes start in 120 s
    }
    assert "HOROVOD_GLOO_IFACE" not in horovod.environment(slot, ("a", 4000), None, 0.5)
    assert horovod.environment(slot, ("a", 4000), None, 0.5)["HOROVOD_GLOO_TIMEOUT_SECONDS"] == "1"


def test_framework_is_tensorflow_or_horovod():
    assert Settings.resolve({}).framework == "tensorflow"
    assert Settings.resolve({}, framework="horovod").framework == "horovod"
    with pytest.raises(ConfigError, match="framework must be 'tensorflow' or 'horovod'"):
        Settings.resolve({}, framework="mpi")


def test_horovod_refuses_parameter_servers_an_evaluator_and_restarts_in_place():
    assert framework_problems(Settings.resolve({}, framework="horovod")) == []
    assert framework_problems(Settings.resolve({}, num_ps=1)) == []  # plain TF: fine
    problems = framework_problems(
        Settings.resolve({}, framework="horovod", num_ps=1, eval_node=True, worker_restarts=2)
    )
    assert len(problems) == 3
    assert "use num_ps=0, got 1" in problems[0]
    assert "use eval_node=False" in problems[1]
    assert "use worker_restarts=0, got 2" in problems[2] and "max_restarts" in problems[2]
