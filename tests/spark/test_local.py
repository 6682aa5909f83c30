"""sparktf.run on a real local[4] SparkContext: roles, TF_CONFIG, results, logs, errors,
fail-fast checks, and that no process of a job outlives it."""

import json
import os
import re
import signal
import threading
import time

import pytest
from helpers import jobs
from helpers.procs import pid_alive, port_is_free, sparktf_processes, wait_until

import sparktf
from sparktf.driver.sparkjobs import jobs_tagged

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_trivial_job_returns_the_chiefs_value_and_every_result(sc_local):
    cluster = sparktf.run(sc_local, jobs.describe, {"lr": 0.1}, num_executors=2)
    # every node has started (describe returns at once: training may already be over)
    assert cluster.status in (
        sparktf.Status.RUNNING,
        sparktf.Status.STOPPING,
        sparktf.Status.FINISHED,
    )
    chief = cluster.shutdown()
    assert chief["name"] == "chief:0" and chief["is_chief"] and chief["args"] == {"lr": 0.1}
    assert set(cluster.results) == {"chief:0", "worker:0"}
    assert cluster.results["worker:0"]["is_chief"] is False
    assert cluster.status is sparktf.Status.FINISHED
    assert cluster.shutdown() == chief  # safe to call twice
    # the driver's cluster_spec is the nodes' own: host:port of every TF server
    assert cluster.cluster_spec == chief["cluster_spec"] == chief["tf_config"]["cluster"]


def test_the_driver_acts_on_each_event_at_once_not_on_its_next_tick(sc_local, monkeypatch):
    """The monitor wakes on the events that decide the job (a node's result, its exit, the
    Spark job's end): with the periodic look at the state stretched to 60 s, a trivial job
    still ends long before the first one would have come."""
    from sparktf.driver import runner

    monkeypatch.setattr(runner, "TICK", 60.0)
    cluster = sparktf.run(sc_local, jobs.describe, {}, num_executors=2)
    assert cluster.shutdown(timeout=30)["name"] == "chief:0"


@pytest.mark.parametrize(
    "kwargs, expected_jobs",
    [
        (dict(num_executors=4, num_ps=1), {"chief": 1, "worker": 2, "ps": 1}),
        (dict(num_executors=3, master_node=None), {"worker": 3}),
        (
            dict(num_executors=4, num_ps=1, master_node="master", eval_node=True),
            {"master": 1, "worker": 1, "ps": 1, "evaluator": 1},
        ),
    ],
)
def test_every_node_gets_a_complete_tf_config(sc_local, kwargs, expected_jobs):
    cluster = sparktf.run(
        sc_local, jobs.evaluator_waits if kwargs.get("eval_node") else jobs.describe, {}, **kwargs
    )
    if kwargs.get("eval_node"):
        cluster.shutdown()
        assert cluster.results["evaluator:0"] == {"saw_training_done": True}
        cluster = sparktf.run(sc_local, jobs.describe, {}, **dict(kwargs, eval_node=False))
        expected_jobs = {k: v for k, v in expected_jobs.items() if k != "evaluator"}
        expected_jobs["worker"] += 1
    cluster.shutdown()
    described = {name: r for name, r in cluster.results.items() if r is not None}
    specs = {json.dumps(r["tf_config"]["cluster"], sort_keys=True) for r in described.values()}
    assert len(specs) == 1  # every node sees the same, complete cluster
    spec = json.loads(specs.pop())
    assert {job: len(tasks) for job, tasks in spec.items()} == expected_jobs
    ports = [int(a.rsplit(":", 1)[1]) for tasks in spec.values() for a in tasks]
    assert len(set(ports)) == len(ports)
    for name, r in described.items():
        job, index = name.split(":")
        assert r["tf_config"]["task"] == {"type": job, "index": int(index)}
        assert spec[job][int(index)] == f"{r['host']}:{r['port']}"
        assert r["num_workers"] == sum(len(spec.get(j, [])) for j in ("chief", "master", "worker"))
    assert "ps:0" not in described or cluster.results["ps:0"] is None


def test_main_fn_with_ctx_only(sc_local):
    with sparktf.run(sc_local, jobs.describe_ctx_only, num_executors=2, master_node=None) as c:
        pass
    assert c.results["worker:1"]["tf_config"]["task"] == {"type": "worker", "index": 1}


def test_default_num_executors_uses_every_slot(sc_local):
    cluster = sparktf.run(sc_local, jobs.describe_ctx_only)
    cluster.shutdown()
    assert len(cluster.results) == 4


@pytest.mark.parametrize("nodes, threads", [(1, 4), (2, 2), (4, 1)])
def test_thread_pools_share_the_executors_cores_among_its_nodes(sc_local, nodes, threads):
    # local[4]: one executor with 4 cores; a node alone takes them all instead of leaving 3 idle
    cluster = sparktf.run(sc_local, jobs.describe, num_executors=nodes)
    cluster.shutdown()
    for result in cluster.results.values():
        assert result["num_cpus"] == threads
        assert result["intra"] == str(threads) and result["inter"] == str(max(2, threads))


def test_node_logs_reach_the_driver_tagged(sc_local, capfd):
    sparktf.run(sc_local, jobs.chatty, num_executors=2).shutdown()
    out, err = capfd.readouterr()
    for node in ("chief:0", "worker:0"):
        for i in range(3):
            assert f"[{node}] line {i} from {node}\n" in out
        assert f"[{node}] an error line from {node}\n" in err


@pytest.mark.tf
def test_tensorflow_startup_chatter_is_left_off_the_console_unless_asked(sc_local, capfd):
    from sparktf.common.logfilter import is_startup_chatter

    sparktf.run(sc_local, jobs.imports_tensorflow, num_executors=1).shutdown()
    out, err = capfd.readouterr()
    assert "[chief:0] user line from chief:0\n" in out
    node_lines = [
        line.split("] ", 1)[1] for line in (out + err).splitlines() if line.startswith("[chief:0] ")
    ]
    assert not [line for line in node_lines if is_startup_chatter(line)], err
    sc_local._conf.set("spark.sparktf.tfStartupLogs", "true")
    try:
        sparktf.run(sc_local, jobs.imports_tensorflow, num_executors=1).shutdown()
    finally:  # removed, not set to false: later tests see a session without sparktf keys
        sc_local._conf._jconf.remove("spark.sparktf.tfStartupLogs")
    out, err = capfd.readouterr()
    assert "[chief:0] user line from chief:0\n" in out
    # shown: TensorFlow 2.21 on a machine without a GPU says so through absl at import
    assert "[chief:0] WARNING: All log messages before absl::InitializeLog()" in err


def test_published_port_stays_reserved_and_is_freed(sc_local):
    cluster = sparktf.run(sc_local, jobs.port_is_held, num_executors=2)
    cluster.shutdown()
    for result in cluster.results.values():
        assert result["held"] is True, result
        assert wait_until(lambda: port_is_free(result["port"]))  # noqa: B023


def test_worker_serves_until_the_chief_returns(sc_local):
    cluster = sparktf.run(
        sc_local, jobs.serve_then_return, {"chief_secs": 1}, num_executors=3, num_ps=1
    )
    assert cluster.shutdown() == "chief done"
    assert cluster.results == {"chief:0": "chief done", "worker:0": "served", "ps:0": None}


def run_to_end(sc, fn, args, **kwargs):
    """run() then shutdown(): a node that fails early may make run() itself raise."""
    return sparktf.run(sc, fn, args, **kwargs).shutdown(timeout=60)


def test_main_fn_error_names_node_type_message_and_output(sc_local):
    args = {"node": "worker:1", "message": "bad learning rate 42", "delay": 1}
    start = time.monotonic()
    with pytest.raises(sparktf.NodeError) as err:
        run_to_end(sc_local, jobs.raise_on, args, num_executors=3, master_node=None)
    assert time.monotonic() - start < 30
    e = err.value
    assert e.node == "worker:1" and e.host == "127.0.0.1"
    assert e.exc_type == "ValueError" and e.exc_message == "bad learning rate 42"
    text = str(e)
    assert "worker:1 on host 127.0.0.1" in text and "ValueError: bad learning rate 42" in text
    assert "about to fail on worker:1" in text  # the tail of its output


@pytest.mark.parametrize(
    "job, args",
    [
        (jobs.raise_on, {"node": "worker:0", "message": "bad learning rate 42", "delay": 2}),
        (jobs.sigkill_self_on, {"node": "worker:0", "delay": 2}),
    ],
    ids=["raises", "killed"],
)
def test_a_failed_node_is_one_error_without_sparks_stack_traces(sc_local, job, args):
    """A node's failure reaches the user once, as sparktf's NodeError. Its barrier task, and
    those of the nodes sparktf then stopped, end without errors of their own (the driver has
    the nodes' exits), so Spark logs no "Exception in task" with a PythonException and its
    Java frames on top of it (one such trace per task before)."""
    cluster = sparktf.run(sc_local, job, args, num_executors=3)
    with pytest.raises(sparktf.NodeError, match="worker:0"):
        cluster.shutdown(timeout=60)
    tracker = sc_local.statusTracker()
    stages = [
        tracker.getStageInfo(s)
        for j in jobs_tagged(sc_local, cluster.job_id)
        for s in tracker.getJobInfo(j).stageIds
    ]
    assert stages and sum(s.numFailedTasks for s in stages if s) == 0, stages


def test_a_failed_cluster_keeps_raising_and_never_hangs(sc_local):
    cluster = sparktf.run(
        sc_local, jobs.raise_on, {"node": "worker:0", "message": "x", "delay": 3}, num_executors=2
    )
    with pytest.raises(sparktf.NodeError):
        cluster.shutdown(timeout=60)
    assert cluster.status is sparktf.Status.FAILED
    with pytest.raises(sparktf.NodeError):  # and again: same error, no hang
        cluster.shutdown()


def test_a_node_killed_by_a_signal_is_reported(sc_local):
    with pytest.raises(sparktf.NodeError) as err:
        run_to_end(
            sc_local, jobs.sigkill_self_on, {"node": "worker:0", "delay": 1}, num_executors=2
        )
    assert err.value.node == "worker:0"
    assert "killed by signal 9 (SIGKILL)" in str(err.value)
    assert "dying now" in str(err.value)


def test_unpicklable_return_value_is_an_error(sc_local):
    with pytest.raises(sparktf.NodeError, match="return value cannot be pickled"):
        run_to_end(sc_local, jobs.unpicklable_result, None, num_executors=1)


def test_a_result_the_driver_cannot_unpickle_names_its_type_not_a_lost_connection(sc_local):
    """main_fn returns an object whose class only the executors have: the job fails saying
    the driver cannot unpickle that type, and what to return instead (before: the node 'lost
    its connection to the driver', exit 75)."""
    with pytest.raises(sparktf.NodeError) as info:
        run_to_end(sc_local, jobs.result_of_a_class_only_the_node_has, None, num_executors=1)
    text = str(info.value)
    assert "node_only_results.Score" in text and "cannot be unpickled on the driver" in text
    assert "lost its connection" not in text


def test_a_result_over_the_limit_is_refused_on_the_node_naming_its_size(sc_local):
    """A return value larger than a result may be (SPARKTF_MAX_RESULT_MB, 512 by default)
    fails naming its size and what to do instead, not a broken channel."""
    with pytest.raises(sparktf.NodeError, match=r"2\.0 MiB.*more than the 1 MiB"):
        run_to_end(
            sc_local,
            jobs.big_result,
            {"mb": 2},
            num_executors=1,
            env={"SPARKTF_MAX_RESULT_MB": "1"},
        )


def test_shutdown_timeout_stops_everything(sc_local):
    cluster = sparktf.run(sc_local, jobs.sleep_forever, num_executors=2)
    with pytest.raises(sparktf.ClusterTimeoutError, match="still running"):
        cluster.shutdown(timeout=2)


def test_a_timeout_names_the_main_fn_still_running_apart_from_nodes_that_returned(sc_local):
    """A new user's trial: the error said "nodes ['chief:0', 'worker:0'] still running" where
    the worker's main_fn had returned long before (its process waits for the chief's)."""
    cluster = sparktf.run(sc_local, jobs.chief_sleeps_forever, num_executors=2)
    assert wait_until(lambda: cluster.progress()["worker:0"]["state"] == "done", timeout=90)
    with pytest.raises(sparktf.ClusterTimeoutError) as info:
        cluster.shutdown(timeout=2)
    said = str(info.value)
    assert "the main_fn of ['chief:0'] still running" in said, said
    assert "['worker:0'] done or serving, not exited" in said, said


def test_with_block_that_raises_stops_the_cluster(sc_local):
    with pytest.raises(KeyError):
        with sparktf.run(sc_local, jobs.sleep_forever, num_executors=2):
            raise KeyError("user code failed")


def test_sigkill_of_the_spark_python_worker_kills_the_whole_node_tree(sc_local, tmp_path):
    cluster = sparktf.run(
        sc_local, jobs.spawn_tree_and_wait, {"dir": str(tmp_path)}, num_executors=2
    )
    files = [tmp_path / "chief_0.json", tmp_path / "worker_0.json"]
    assert wait_until(lambda: all(f.exists() for f in files), timeout=30)
    pids = {f.stem: json.loads(f.read_text()) for f in files}
    os.kill(pids["worker_0"]["task_worker"], signal.SIGKILL)  # the Spark Python worker
    start = time.monotonic()
    with pytest.raises(sparktf.NodeError) as err:
        cluster.shutdown(timeout=60)
    assert time.monotonic() - start < 15
    assert err.value.node == "worker:0"
    everything = [
        pid for node in pids.values() for key, pid in node.items() if key != "task_worker"
    ]
    assert wait_until(lambda: not any(pid_alive(p) for p in everything), timeout=10), {
        p: pid_alive(p) for p in everything
    }


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (
            dict(num_executors=5),
            "num_executors=5 needs 5 concurrent task slots, but the cluster "
            "(local[4]) has 4 (executor cores / spark.task.cpus=1): use "
            "num_executors <= 4, or give Spark more: --master local[5]",
        ),
        (dict(num_executors=2, num_ps=2), "num_ps=2 leaves no node to train"),
        (dict(num_executors=2, master_node="boss"), "master_node must be one of"),
        (dict(main_fn=lambda a, b, c: None), "must take (args, ctx) or (ctx)"),
        (dict(main_fn="not a function"), "main_fn must be a function"),
        (dict(main_fn=jobs.async_main), "is a coroutine function (async def)"),
        (dict(args=threading.Lock()), "args cannot be pickled"),
        (dict(input_mode="spark"), "input_mode must be sparktf.InputMode.TENSORFLOW or"),
    ],
)
def test_fail_fast_with_a_message_that_says_what_to_change(sc_local, kwargs, fragment):
    call = dict(main_fn=jobs.describe, args=None)
    call.update(kwargs)
    start = time.monotonic()
    with pytest.raises(sparktf.ConfigError) as err:
        sparktf.run(sc_local, call.pop("main_fn"), call.pop("args"), **call)
    assert fragment in str(err.value)
    assert time.monotonic() - start < 5
    assert not sparktf_processes()


def test_all_problems_reported_at_once(sc_local):
    with pytest.raises(sparktf.ConfigError) as err:
        sparktf.run(sc_local, "nope", threading.Lock(), num_executors=9, num_ps=9)
    assert len(err.value.problems) >= 3
    assert "3 problems" in str(err.value) or "4 problems" in str(err.value)


def test_tensorboard_serves_on_the_chief_and_stops_with_the_job(sc_local, tmp_path):
    import urllib.request

    done = tmp_path / "done"
    cluster = sparktf.run(
        sc_local,
        jobs.wait_for_file,
        {"file": str(done)},
        num_executors=2,
        tensorboard=True,
        log_dir=str(tmp_path / "logs"),
    )
    url = cluster.tensorboard_url(timeout=90)
    assert url and url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=10) as page:  # a real TensorBoard answers
        assert page.status == 200 and b"TensorBoard" in page.read()
    port = int(url.rsplit(":", 1)[1].strip("/"))
    done.touch()
    result = cluster.shutdown()
    assert result["log_dir"] == str(tmp_path / "logs")
    assert cluster.results["worker:0"]["log_dir"] == str(tmp_path / "logs")
    assert cluster.tensorboard_url() is None
    assert wait_until(lambda: port_is_free(port), timeout=15)


def test_tensorboard_url_reaches_the_driver_even_when_main_fn_ends_first(sc_local, tmp_path, capfd):
    """A chief whose main_fn returns before TensorBoard answers still tells the driver the
    URL (or why not) before its result: the job did not end with --tensorboard silently off."""
    cluster = sparktf.run(
        sc_local,
        jobs.describe,
        {},
        num_executors=2,
        tensorboard=True,
        log_dir=str(tmp_path / "logs"),
    )
    cluster.shutdown()
    assert re.search(r"TensorBoard at http://127\.0\.0\.1:\d+/", capfd.readouterr().out)


def test_tensorboard_is_off_by_default(sc_local):
    cluster = sparktf.run(sc_local, jobs.describe, {}, num_executors=2)
    cluster.shutdown()
    assert cluster.tensorboard_url() is None


def test_tensorboard_arguments_are_checked(sc_local):
    with pytest.raises(sparktf.ConfigError) as err:
        sparktf.run(sc_local, jobs.describe, {}, num_executors=2, tensorboard="yes", log_dir="")
    assert "tensorboard must be True or False" in str(err.value)
    assert "log_dir must be a non-empty path" in str(err.value)


@pytest.mark.parametrize("env, forked", [({}, True), ({"SPARKTF_SUPERVISOR_EXEC": "1"}, False)])
def test_the_supervisor_is_forked_from_the_task_and_holds_only_the_drivers_channel(
    sc_local, env, forked
):
    """Forked (the default: no interpreter start-up per node), the supervisor must not keep
    the Spark worker's connection to the JVM, and it and the TF process are known by name;
    the TF process starts with numpy imported once by its Spark worker (about 55 ms a node
    otherwise); SPARKTF_SUPERVISOR_EXEC=1 starts it as its own interpreter instead."""
    cluster = sparktf.run(sc_local, jobs.describe_processes, None, num_executors=2, env=env)
    cluster.shutdown()
    for node, r in cluster.results.items():
        assert r["name"] == "sparktf-node", (node, r)
        assert r["supervisor"] == "sparktf-sup", (node, r)
        assert ("sparktf.task.supervisor" in " ".join(r["supervisor_cmdline"])) is not forked
        # both hold the driver's control channel and nothing else; the task holds more (JVM)
        assert len(r["node_peers"]) == 1 and r["supervisor_peers"] == r["node_peers"], r
        assert set(r["worker_peers"]) - set(r["supervisor_peers"]), r
        assert r["numpy_at_start"] is forked, r
