"""Which GPUs a node sees, and the checks on gpus_per_node, without Spark."""

import pytest

from sparktf.common import gpus
from sparktf.driver import preflight


@pytest.mark.parametrize(
    "job, assigned, environ, user, expected",
    [
        ("chief", ("0",), {}, {}, {"CUDA_VISIBLE_DEVICES": "0"}),
        ("worker", ("1", "3"), {}, {}, {"CUDA_VISIBLE_DEVICES": "1,3"}),
        ("worker", (), {}, {}, {}),  # no GPU scheduling: TensorFlow's own default
        ("worker", ("1",), {"CUDA_VISIBLE_DEVICES": "5"}, {}, {}),  # the executor's value stays
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
    assert gpus.visible("worker", ("1",), {"CUDA_VISIBLE_DEVICES": "5"}, {}) == ("5",)
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
