"""Which GPUs a node sees, and the checks on gpus_per_node, without Spark."""

import os

import pytest

import sparktf
from sparktf.common import gpus
from sparktf.driver import preflight


@pytest.mark.parametrize(
    "job, assigned, environ, user, expected",
    [
        ("chief", ("0",), {}, {}, {"CUDA_VISIBLE_DEVICES": "0"}),
        ("worker", ("1", "3"), {}, {}, {"CUDA_VISIBLE_DEVICES": "1,3"}),
        ("worker", (), {}, {}, {}),  # no GPU scheduling: TensorFlow's own default
        ("worker", (), {"CUDA_VISIBLE_DEVICES": "5"}, {}, {}),  # no scheduling: the executor's
        ("ps", ("0",), {}, {}, {"CUDA_VISIBLE_DEVICES": ""}),  # a ps takes no GPU
        ("evaluator", (), {"CUDA_VISIBLE_DEVICES": "0"}, {}, {"CUDA_VISIBLE_DEVICES": ""}),
        ("ps", ("0",), {}, {"CUDA_VISIBLE_DEVICES": "0"}, {}),  # run(env=...) wins
        ("chief", ("0",), {}, {"CUDA_VISIBLE_DEVICES": ""}, {}),
    ],
)
def test_node_environment(job, assigned, environ, user, expected):
    assert gpus.node_environment(job, assigned, environ, user) == expected


def test_visible_is_what_the_process_will_see():
    assert gpus.visible("chief", ("0", "1"), {}, {}) == ("0", "1")
    assert gpus.visible("ps", ("0",), {}, {}) == ()
    assert gpus.visible("worker", (), {"CUDA_VISIBLE_DEVICES": "5"}, {}) == ("5",)
    # ordinal 1 of what the executor may use (no nvidia-smi to say otherwise)
    assert gpus.assignment("worker", ("1",), {"CUDA_VISIBLE_DEVICES": "4,5"}, {}) == ("5",)
    assert gpus.visible("worker", ("1",), {}, {"CUDA_VISIBLE_DEVICES": "2, 3"}) == ("2", "3")


@pytest.mark.parametrize(
    "master, conf, n, fragment",
    [
        ("local[2]", {"spark.executor.resource.gpu.amount": "1"}, 1, "local mode"),
        ("local", {}, 1, "local mode"),
        ("spark://h:7077", {}, 1, "set spark.executor.resource.gpu.amount"),
        ("yarn", {"spark.executor.resource.gpu.amount": "1"}, 2, "ask for at most 1"),
    ],
)
def test_gpu_problems_say_what_to_change(master, conf, n, fragment):
    problems = preflight.gpu_problems(master, conf, n)
    assert len(problems) == 1 and fragment in problems[0]


def test_no_gpu_problems_when_none_asked_or_all_configured():
    assert preflight.gpu_problems("local[2]", {}, None) == []
    assert (
        preflight.gpu_problems(
            "local-cluster[2,1,1024]", {"spark.executor.resource.gpu.amount": "2"}, 2
        )
        == []
    )


# What nvidia-smi lists (index -> UUID), as gpus.inventory() reads it (a stand-in: no GPU here).
INVENTORY = {str(i): f"GPU-5a1d0000-0000-4000-8000-00000000000{i}" for i in range(4)}
U = INVENTORY.get


@pytest.mark.parametrize(
    "assigned, executor, inventory, expected",
    [
        # an executor given GPUs 0 and 1 runs two tasks of one GPU each: each sees its own
        (("1",), "0,1", None, "1"),
        (("0",), "0,1", None, "0"),
        (("3", "2"), "2,3", INVENTORY, "3,2"),
        # Spark's addresses as ordinals of what the executor may use (a discovery script that
        # numbers the visible GPUs 0..n-1): the executor's own entries
        (("0",), "2,3", None, "2"),
        (("1",), "2,3", None, "3"),
        # the executor's GPUs named by UUID (container runtimes): addresses are nvidia-smi's
        # indices (bin/gpu-discovery.sh), mapped back through the UUIDs
        (("1",), f"{U('3')},{U('1')}", INVENTORY, "1"),
        (("3",), f"{U('3')},{U('1')}", INVENTORY, "3"),
        (("1",), f"{U('3')[:20]},{U('1')}", INVENTORY, "1"),
        # MIG devices: Spark's address is the MIG identifier itself
        (("MIG-b",), "MIG-a,MIG-b", None, "MIG-b"),
    ],
)
def test_a_node_sees_exactly_the_gpus_spark_assigned_within_the_executors(
    assigned, executor, inventory, expected
):
    environ = {gpus.VAR: executor}
    spec_gpus = gpus.assignment("worker", assigned, environ, {}, inventory)
    assert spec_gpus == tuple(expected.split(","))
    env = gpus.node_environment("worker", spec_gpus, environ, {})  # the supervisor's
    assert env == {gpus.VAR: expected}
    # the node process computes it again from its supervisor's environment: the same answer
    assert gpus.node_environment("worker", spec_gpus, env, {}) == env
    assert gpus.visible("worker", spec_gpus, env, {}) == spec_gpus


@pytest.mark.parametrize(
    "assigned, executor, inventory",
    [
        (("3",), "0,1", INVENTORY),  # physical GPU 3: not this executor's, not an ordinal
        (("2",), "0,1", None),
        (("0",), "", None),  # the executor may use no GPU at all
        (("2",), f"{U('3')},{U('1')}", INVENTORY),
        (("MIG-c",), "MIG-a,MIG-b", None),
    ],
)
def test_a_gpu_the_executor_may_not_use_is_a_clear_error(assigned, executor, inventory):
    with pytest.raises(sparktf.ConfigError, match="CUDA_VISIBLE_DEVICES") as info:
        gpus.assignment("worker", assigned, {gpus.VAR: executor}, {}, inventory)
    assert assigned[0] in str(info.value) and "discovery" in str(info.value)


def test_inventory_reads_nvidia_smi(monkeypatch):
    standin = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers", "standin")
    monkeypatch.setenv("PATH", standin + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("STANDIN_GPUS", "3")
    assert gpus.inventory() == {str(i): INVENTORY[str(i)] for i in range(3)}
    monkeypatch.setenv("PATH", "/nonexistent")
    assert gpus.inventory() is None


def test_uuids_in_the_executors_environment_are_resolved_through_nvidia_smi(monkeypatch):
    """What the barrier task calls: it asks nvidia-smi only when the executor names GPUs by
    UUID (the stand-in on PATH; a GPU-less test machine)."""
    standin = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers", "standin")
    monkeypatch.setenv("PATH", standin + os.pathsep + os.environ["PATH"])
    environ = {gpus.VAR: f"{U('2')},{U('0')}"}
    assert gpus.task_assignment("worker", ("0",), environ, {}) == ("0",)
    assert gpus.task_assignment("chief", ("2",), environ, {}) == ("2",)
    with pytest.raises(sparktf.ConfigError, match="'1'"):
        gpus.task_assignment("chief", ("1",), environ, {})
    assert gpus.task_assignment("ps", ("1",), environ, {}) == ("1",)  # a ps sees none anyway


# -------------------------------------------------------------- GPUs shared on one host
INV = {"0": "GPU-aaa", "1": "GPU-bbb", "2": "GPU-ccc"}  # nvidia-smi's index -> UUID


def test_a_claim_names_each_gpu_by_uuid_and_the_executors_pool():
    assert gpus.claim("worker", ("1",), {}, {}, INV) == (
        [("1", "GPU-bbb")],
        [("0", "GPU-aaa"), ("1", "GPU-bbb"), ("2", "GPU-ccc")],
    )
    # an executor limited by CUDA_VISIBLE_DEVICES (UUID prefixes, as container runtimes name)
    env = {"CUDA_VISIBLE_DEVICES": "GPU-ccc,GPU-aa"}
    assert gpus.claim("chief", ("GPU-aa",), env, {}, INV) == (
        [("GPU-aa", "GPU-aaa")],
        [("2", "GPU-ccc"), ("0", "GPU-aaa")],  # by index, as translate() names them
    )


@pytest.mark.parametrize(
    "job, assigned, user, inventory",
    [
        ("ps", ("0",), {}, INV),  # a ps takes no GPU
        ("worker", (), {}, INV),  # no GPU scheduling
        ("worker", ("0",), {"CUDA_VISIBLE_DEVICES": "0"}, INV),  # run(env=...) names them
        ("worker", ("0",), {}, None),  # no nvidia-smi: nothing says which GPU is which
    ],
)
def test_nothing_to_claim(job, assigned, user, inventory):
    assert gpus.claim(job, assigned, {}, user, inventory) is None


def test_two_executors_seeing_every_gpu_of_a_host_get_different_ones():
    # YARN without GPU isolation: each executor's discovery lists both GPUs, each gives its
    # task GPU 0; before, both nodes of the host trained on GPU 0
    a = gpus.claim("chief", ("0",), {}, {}, INV)
    b = gpus.claim("worker", ("0",), {}, {}, INV)
    dealt = gpus.deal(["h1", "h1"], [a, b])
    assert dealt.gpus == {1: ["1"]}
    assert "rank 1 gets GPU-bbb instead" in dealt.warnings[0]


def test_the_same_index_on_two_hosts_or_behind_isolation_is_no_clash():
    a = gpus.claim("chief", ("0",), {}, {}, INV)
    assert gpus.deal(["h1", "h2"], [a, a]) == gpus.Dealt({}, [])
    # container runtimes: each container's nvidia-smi lists only its own GPU, as index 0
    b = gpus.claim("worker", ("0",), {}, {}, {"0": "GPU-bbb"})
    assert gpus.deal(["h1", "h1"], [a, b]) == gpus.Dealt({}, [])


def test_no_free_gpu_left_keeps_what_spark_gave_and_says_so():
    two = {"0": "GPU-aaa", "1": "GPU-bbb"}
    claims = [gpus.claim("worker", (i,), {}, {}, two) for i in ("0", "1", "0")]
    dealt = gpus.deal(["h"] * 3, claims)
    assert dealt.gpus == {}
    assert "rank 0 and rank 2 on h share GPU GPU-aaa" in dealt.warnings[0]


def test_dealing_with_many_gpus_per_node_and_nodes_without_a_claim():
    a = gpus.claim("worker", ("0", "1"), {}, {}, INV)
    b = gpus.claim("worker", ("1", "2"), {}, {}, {**INV, "3": "GPU-ddd"})
    dealt = gpus.deal(["h", "h", "h"], [a, None, b])
    assert dealt.gpus == {2: ["2", "3"]}
