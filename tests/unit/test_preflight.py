"""Preflight checks and the layering of the package, without a SparkContext."""

import pickle
import subprocess
import sys
import threading

import pytest

from sparktf.common import topology
from sparktf.common.spec import LaunchSpec
from sparktf.driver import preflight, sparkfacts
from sparktf.task.barrier import barrier_task, build_node_spec, node_cpus


def two(args, ctx): ...
def one(ctx): ...
def one_with_default(ctx, extra=None): ...
def two_with_defaults(args, ctx=None, extra=None): ...
def varargs(*a): ...
def three(a, b, c): ...
def none(): ...
def kwonly(args, ctx, *, must): ...
def generator(args, ctx):
    yield 1


async def coroutine(args, ctx): ...
async def async_generator(ctx):
    yield 1


@pytest.mark.parametrize(
    "fn, n",
    [
        (two, 2),
        (one, 1),
        (one_with_default, 2),
        (two_with_defaults, 2),
        (varargs, 2),
        (lambda ctx: None, 1),
        (lambda args, ctx: None, 2),
    ],
)
def test_accepted_main_fn_signatures(fn, n):
    assert preflight.main_fn_params(fn) == (n, None)


@pytest.mark.parametrize(
    "fn, fragment",
    [
        (three, "must take (args, ctx) or (ctx)"),
        (none, "must take (args, ctx) or (ctx)"),
        (kwonly, "required keyword-only"),
        (generator, "is a generator function"),
        (coroutine, "is a coroutine function (async def)"),
        (async_generator, "is an async generator function"),
        ("main", "main_fn must be a function"),
        (None, "main_fn must be a function"),
    ],
)
def test_rejected_main_fn_signatures(fn, fragment):
    n, problem = preflight.main_fn_params(fn)
    assert n is None and fragment in problem


def test_unpicklable_args_are_named():
    payload, problem = preflight.pickle_payload(two, {"lock": threading.Lock()}, 2)
    assert payload is None and "args cannot be pickled" in problem and "lock" in problem


def test_main_fn_capturing_a_lock_is_named():
    lock = threading.Lock()
    payload, problem = preflight.pickle_payload(lambda ctx: lock, None, 1)
    assert payload is None and "main_fn cannot be pickled" in problem


@pytest.mark.parametrize(
    "master, conf, cpus, expected",
    [
        ("local", {}, 8, 1),
        ("local[4]", {}, 8, 4),
        ("local[*]", {}, 8, 8),
        ("local[4, 2]", {}, 8, 4),
        ("local[4]", {"spark.task.cpus": "2"}, 8, 2),
        ("local-cluster[2,1,1024]", {}, 8, 2),
        ("local-cluster[3, 2, 512]", {"spark.task.cpus": "2"}, 8, 3),
        ("spark://127.0.0.1:7077", {}, 8, None),
        ("spark://127.0.0.1:7077", {"spark.cores.max": "4", "spark.task.cpus": "2"}, 8, 2),
        ("yarn", {"spark.executor.instances": "4", "spark.executor.cores": "2"}, 8, 8),
    ],
)
def test_expected_slots(master, conf, cpus, expected):
    assert sparkfacts.expected_slots(master, conf, cpus) == expected


@pytest.mark.parametrize(
    "master, conf, expected",
    [
        ("local", {}, 1),
        ("local[2]", {}, 2),
        ("local[*]", {}, 8),
        ("local-cluster[2,3,1024]", {}, 3),
        ("spark://127.0.0.1:7077", {}, None),
        ("yarn", {"spark.executor.cores": "4"}, 4),
    ],
)
def test_executor_cores(master, conf, expected):
    assert sparkfacts.executor_cores(master, conf, 8) == expected


@pytest.mark.parametrize(
    "task_cpus, executor_cores, addresses, expected",
    [
        (1, 2, ["h:1"], 2),  # local[2], one node: both cores, not one and an idle one
        (1, 2, ["h:1", "h:2"], 1),  # local[2], two nodes: one each
        (1, 3, ["h:1", "h:2", "h:3"], 1),
        (1, 8, ["h:1", "h:2", "g:3"], 4),  # two of the three on this host
        (2, 2, ["h:1"], 2),  # never below spark.task.cpus
        (2, None, ["h:1"], 2),  # executor size unknown: the task's cpus
        (1, 1, ["h:1", "h:2"], 1),  # local-cluster[2,1,..]: two executors on one host
    ],
)
def test_node_threads_take_the_idle_cores_of_their_host(
    task_cpus, executor_cores, addresses, expected
):
    assert node_cpus(task_cpus, executor_cores, addresses, "h") == expected


def test_conf_problems_dynamic_allocation():
    from pyspark import SparkConf

    conf = SparkConf(loadDefaults=False).set("spark.dynamicAllocation.enabled", "true")
    problems = preflight.conf_problems(conf)
    assert len(problems) == 1
    assert "--conf spark.dynamicAllocation.enabled=false" in problems[0]
    assert preflight.conf_problems(SparkConf(loadDefaults=False)) == []


def test_the_shipped_closure_is_plain_data():
    launch = LaunchSpec(
        job_id="j",
        roles=topology.assign_roles(3, 1),
        secret=b"s" * 32,
        driver_address=("127.0.0.1", 1),
        payload=b"p",
    )
    assert pickle.loads(pickle.dumps(launch)) == launch  # standard pickle, no driver objects
    import cloudpickle

    fn = cloudpickle.loads(cloudpickle.dumps(barrier_task(launch)))
    assert callable(fn)


def test_node_spec_from_the_rendezvous_addresses():
    launch = LaunchSpec(
        job_id="j",
        roles=topology.assign_roles(3, 1),
        secret=b"s" * 32,
        driver_address=("127.0.0.1", 1),
        payload=b"p",
    )
    addresses = ["a:1", "b:2", "[::1]:3"]
    spec = build_node_spec(launch, 2, addresses, num_cpus=2, python_path=["/nonexistent"])
    assert spec.name == "ps:0" and spec.host == "::1" and spec.port == 3
    assert spec.tf_config["task"] == {"type": "ps", "index": 0}
    assert spec.cluster_spec == {"chief": ["a:1"], "worker": ["b:2"], "ps": ["[::1]:3"]}
    assert spec.python_path == ()
    assert spec.num_cpus == 2  # executor size unknown: the task's cpus


def _modules(package):
    import pkgutil

    import sparktf

    pkg = __import__(f"sparktf.{package}", fromlist=["_"])
    del sparktf
    return [
        m.name
        for m in pkgutil.walk_packages(pkg.__path__, f"sparktf.{package}.")
        if not m.name.endswith("__main__")
    ]


#: Each side and what it may never import (the package docstrings say the same).
LAYERS = (
    [(m, "tensorflow") for m in ["sparktf"] + _modules("driver") + _modules("task")]
    + [(m, "pyspark") for m in _modules("node") + _modules("common")]
    + [(m, "tensorflow") for m in _modules("common")]
    + [("sparktf.fs", "tensorflow"), ("sparktf.fs", "pyspark")]
    + [("sparktf.daemon", "tensorflow")]
)  # only once it runs as the daemon


@pytest.mark.parametrize("module, forbidden", LAYERS)
def test_layering(module, forbidden):
    code = f"import sys, {module}; print({forbidden!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "master, conf, expected",
    [
        ("local[2]", {}, "--master local[3]"),
        ("local", {}, "--master local[3]"),
        ("local[*]", {"spark.task.cpus": "2"}, "--master local[6] (spark.task.cpus=2)"),
        (
            "local-cluster[2,1,1024]",
            {},
            "more local-cluster[workers,cores,memory] workers or cores",
        ),
        (
            "spark://127.0.0.1:7077",
            {},
            "more executors or cores (--num-executors, --executor-cores",
        ),
    ],
)
def test_more_slots_says_how_on_each_master(master, conf, expected):
    assert preflight.more_slots(master, 3, conf).startswith(expected)


def test_a_python_memory_cap_is_refused_naming_what_to_use_instead():
    """spark.executor.pyspark.memory (common on YARN) caps the nodes' address space too:
    refused before any job, naming the setting and spark.executor.memoryOverhead."""
    from pyspark import SparkConf

    conf = SparkConf(loadDefaults=False).set("spark.executor.pyspark.memory", "1g")
    [problem] = preflight.conf_problems(conf)
    assert "spark.executor.pyspark.memory=1g" in problem
    assert "spark.executor.memoryOverhead" in problem


def test_too_few_slots_on_yarn_names_what_yarn_users_change():
    """On YARN the remedy is executors YARN can grant, not standalone's spark.cores.max."""
    text = preflight.more_slots("yarn", 3, {"spark.executor.instances": "3"})
    assert "spark.executor.instances=3" in text and "spark.executor.memoryOverhead" in text
    assert "spark.cores.max" not in text


@pytest.mark.parametrize(
    "master, conf, expected",
    [
        ("local[2]", {}, 2),
        ("spark://h:7077", {"spark.cores.max": "6"}, 6),
        ("yarn", {"spark.default.parallelism": "8"}, 8),
        ("yarn", {}, None),  # nothing says: run() asks for num_executors
    ],
)
def test_connect_slots_come_from_the_servers_conf(master, conf, expected):
    assert sparkfacts.connect_slots(master, conf) == expected


def test_the_control_server_listens_at_the_control_host_when_set():
    from sparktf.driver.builder import control_address

    classic = {"spark.driver.host": "10.0.0.1"}
    assert control_address(classic) == ("10.0.0.1", "10.0.0.1")
    bound = dict(classic, **{"spark.driver.bindAddress": "0.0.0.0"})
    assert control_address(bound) == ("0.0.0.0", "10.0.0.1")
    assert control_address(dict(bound, **{"spark.sparktf.controlHost": "10.1.1.1"})) == (
        "10.1.1.1",
        "10.1.1.1",
    )
