"""Role assignment, cluster spec and TF_CONFIG: table-driven, no Spark, no TensorFlow."""

import json

import pytest

from sparktf.common import topology
from sparktf.common.spec import LaunchSpec
from sparktf.common.topology import NodeRole
from sparktf.task.barrier import build_node_spec


def names(roles):
    return [r.name for r in roles]


@pytest.mark.parametrize(
    "n, num_ps, master, evaluator, expected",
    [
        (1, 0, "chief", False, ["chief:0"]),
        (1, 0, None, False, ["worker:0"]),
        (2, 0, "chief", False, ["chief:0", "worker:0"]),
        (3, 0, None, False, ["worker:0", "worker:1", "worker:2"]),
        (3, 1, "chief", False, ["chief:0", "worker:0", "ps:0"]),
        (4, 2, "chief", False, ["chief:0", "worker:0", "ps:0", "ps:1"]),
        (4, 1, "master", False, ["master:0", "worker:0", "worker:1", "ps:0"]),
        (4, 1, "chief", True, ["chief:0", "worker:0", "ps:0", "evaluator:0"]),
        (3, 1, None, True, ["worker:0", "ps:0", "evaluator:0"]),
        (2, 0, "chief", True, ["chief:0", "evaluator:0"]),
        (5, 0, None, True, ["worker:0", "worker:1", "worker:2", "worker:3", "evaluator:0"]),
    ],
)
def test_assign_roles(n, num_ps, master, evaluator, expected):
    roles = topology.assign_roles(n, num_ps, master, evaluator)
    assert names(roles) == expected
    assert topology.chief_role(roles) == roles[0]  # rank 0 always returns the job's result


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(num_nodes=2, num_ps=2), "num_ps=2 leaves no node to train"),
        (dict(num_nodes=2, num_ps=3), "use num_executors >= 4"),
        (dict(num_nodes=2, num_ps=1, eval_node=True), "plus the evaluator"),
        (dict(num_nodes=1, eval_node=True), "leaves no node to train"),
        (dict(num_nodes=0), "num_executors must be a positive int"),
        (dict(num_nodes=2.0), "num_executors must be a positive int"),
        (dict(num_nodes=True), "num_executors must be a positive int"),
        (dict(num_nodes=3, num_ps=-1), "num_ps must be an int >= 0"),
        (
            dict(num_nodes=3, master_node="boss"),
            "master_node must be one of 'chief', 'master' or None",
        ),
        (dict(num_nodes=3, eval_node="yes"), "eval_node must be True or False"),
        (
            dict(num_nodes=2, num_ps=2, every_slot=("local[2]", "--master local[3]")),
            "num_ps=2 leaves no node to train among num_executors=2 (left unset, every task slot of "
            "local[2]): give Spark at least 3 task slots (--master local[3]) or ask for fewer",
        ),
    ],
)
def test_invalid_roles_say_what_to_change(kwargs, fragment):
    args = dict(num_ps=0, master_node="chief", eval_node=False)
    args.update(kwargs)
    problems = topology.topology_problems(args.pop("num_nodes"), **args)
    assert any(fragment in p for p in problems), problems
    with pytest.raises(ValueError):
        topology.assign_roles(
            kwargs["num_nodes"], **{k: v for k, v in args.items() if k != "every_slot"}
        )


def test_several_problems_reported_at_once():
    problems = topology.topology_problems(0, -1, "boss", "no")
    assert len(problems) == 4


@pytest.mark.parametrize(
    "host, port, text",
    [
        ("127.0.0.1", 2222, "127.0.0.1:2222"),
        ("node-1.example", 80, "node-1.example:80"),
        ("::1", 2222, "[::1]:2222"),
        ("fe80::1:2", 9, "[fe80::1:2]:9"),
    ],
)
def test_addresses_round_trip(host, port, text):
    assert topology.format_address(host, port) == text
    assert topology.split_address(text) == (host, port)


def test_split_address_rejects_garbage():
    with pytest.raises(ValueError, match="not a host:port"):
        topology.split_address("no-port-here")


def test_cluster_spec_orders_jobs_and_tasks():
    roles = topology.assign_roles(5, 2, "chief", True)
    addresses = [f"h{i}:{1000 + i}" for i in range(5)]
    spec = topology.cluster_spec(roles, addresses)
    assert spec == {
        "chief": ["h0:1000"],
        "worker": ["h1:1001"],
        "ps": ["h2:1002", "h3:1003"],
        "evaluator": ["h4:1004"],
    }
    assert list(spec) == ["chief", "worker", "ps", "evaluator"]


def test_cluster_spec_full_topology():
    roles = (
        NodeRole("chief", 0),
        NodeRole("worker", 0),
        NodeRole("worker", 1),
        NodeRole("ps", 0),
        NodeRole("evaluator", 0),
    )
    spec = topology.cluster_spec(roles, ["a:1", "b:2", "c:3", "d:4", "e:5"])
    assert spec == {"chief": ["a:1"], "worker": ["b:2", "c:3"], "ps": ["d:4"], "evaluator": ["e:5"]}
    assert list(spec) == ["chief", "worker", "ps", "evaluator"]
    assert topology.num_training_nodes(spec) == 3


def test_cluster_spec_rejects_duplicates_gaps_and_mismatch():
    with pytest.raises(ValueError, match="two nodes have role worker:0"):
        topology.cluster_spec([NodeRole("worker", 0)] * 2, ["a:1", "b:2"])
    with pytest.raises(ValueError, match="gaps"):
        topology.cluster_spec([NodeRole("worker", 0), NodeRole("worker", 2)], ["a:1", "b:2"])
    with pytest.raises(ValueError, match="2 roles but 1 addresses"):
        topology.cluster_spec([NodeRole("worker", 0), NodeRole("worker", 1)], ["a:1"])


@pytest.mark.parametrize(
    "n, num_ps, master, evaluator",
    [
        (1, 0, None, False),
        (2, 0, "chief", False),
        (3, 1, "chief", False),
        (4, 1, "master", True),
        (6, 2, None, True),
    ],
)
def test_every_node_gets_a_complete_tf_config(n, num_ps, master, evaluator):
    roles = topology.assign_roles(n, num_ps, master, evaluator)
    addresses = [
        topology.format_address("::1" if i % 2 else "127.0.0.1", 2000 + i) for i in range(n)
    ]
    spec = topology.cluster_spec(roles, addresses)
    launch = LaunchSpec("job", roles, ("127.0.0.1", 1), secret=b"s", payload=b"")
    for rank, role in enumerate(roles):
        # the barrier task's builder of each node's spec, whose tf_config is its TF_CONFIG
        node = build_node_spec(launch, rank, addresses, num_cpus=1)
        config = json.loads(json.dumps(node.tf_config))
        assert config["task"] == {"type": role.job, "index": role.index}
        assert config["cluster"] == spec  # every job, for every node
        assert config["cluster"][role.job][role.index] == addresses[rank]


def test_tf_config_refuses_a_role_outside_the_cluster():
    with pytest.raises(ValueError, match="worker:3 is not in the cluster spec"):
        topology.tf_config({"worker": ["a:1"]}, NodeRole("worker", 3))


@pytest.mark.parametrize(
    "spec, chief",
    [
        ({"chief": ["a:1"], "worker": ["b:2"]}, "chief:0"),
        ({"master": ["a:1"], "worker": ["b:2"], "ps": ["c:3"]}, "master:0"),
        ({"worker": ["a:1", "b:2"], "ps": ["c:3"]}, "worker:0"),
    ],
)
def test_chief_role(spec, chief):
    assert topology.chief_role(spec).name == chief


def test_node_role_validation():
    with pytest.raises(ValueError, match="unknown TensorFlow job"):
        NodeRole("boss", 0)
    with pytest.raises(ValueError, match="index must be >= 0"):
        NodeRole("worker", -1)
    assert NodeRole("worker", 0).trains and not NodeRole("ps", 0).trains
    assert not NodeRole("evaluator", 0).trains
