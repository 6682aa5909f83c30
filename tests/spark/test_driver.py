"""The driver's failure cases that used to hang or lie, each through the public API as users
call it (defaults left unset), on a real local[4] Spark with real node processes.

The no_leaks fixture checks after every test that no process (node, supervisor, user
grandchild, TensorBoard), driver thread, control server or Spark job of the job is left.
"""

import json
import os
import re
import signal
import threading
import time

import numpy as np
import psutil
import pytest
from helpers import feed_jobs, jobs
from helpers.procs import sparktf_processes, wait_until

import sparktf
import sparktf.driver.stages
from sparktf.driver.sparkjobs import jobs_tagged

pytestmark = pytest.mark.usefixtures("no_leaks")
SPARK = sparktf.InputMode.SPARK


# ------------------------------------------------------------------- 1. the headline call
def test_the_headline_call_with_num_ps_and_every_slot(sc_local):
    """sparktf.run(sc, main_fn, num_ps=2): num_executors unset means every slot (4 here)."""
    cluster = sparktf.run(sc_local, jobs.describe, num_ps=2)
    chief = cluster.shutdown(timeout=120)
    assert [r.name for r in cluster.roles] == ["chief:0", "worker:0", "ps:0", "ps:1"]
    assert chief["cluster_spec"].keys() == {"chief", "worker", "ps"}
    assert cluster.results["worker:0"]["num_workers"] == 2


def test_an_evaluator_with_every_slot(sc_local):
    cluster = sparktf.run(sc_local, jobs.evaluator_waits, {}, eval_node=True)
    cluster.shutdown(timeout=120)
    assert [r.name for r in cluster.roles] == ["chief:0", "worker:0", "worker:1", "evaluator:0"]
    assert cluster.results["evaluator:0"] == {"saw_training_done": True}


def test_too_many_parameter_servers_for_the_slots_says_so_with_the_slot_count(sc_local):
    """num_executors left unset is every slot: the way out is more slots, which the message
    says how to get on this master (it used to say "use num_executors >= 5", which then
    failed for want of slots)."""
    with pytest.raises(sparktf.ConfigError) as err:
        sparktf.run(sc_local, jobs.describe, num_ps=4)
    assert (
        "num_ps=4 leaves no node to train among num_executors=4 (left unset, every task "
        "slot of local[4]): give Spark at least 5 task slots (--master local[5])"
    ) in str(err.value)


# --------------------------------------------------- 3. an evaluator after training ended
def test_an_evaluator_still_evaluating_after_training_finishes_and_returns(sc_local):
    cluster = sparktf.run(
        sc_local,
        jobs.evaluate_after_training,
        {"eval_secs": 5},
        num_executors=3,
        eval_node=True,
        heartbeat_timeout=1.5,
    )
    cluster.shutdown(timeout=120)
    assert cluster.results["evaluator:0"] == {"evaluated_after_training": True}
    assert cluster.results["chief:0"] == "chief:0"


# -------------------------------------------------- 4. a restart that cannot be built
def _inject_into_restarts(monkeypatch, fault):
    """Wrap the stage factory: from attempt 1 on, ``fault(launch)`` runs first (a fault in
    building the restart's stage; the real stage follows if it returns)."""
    real = sparktf.driver.stages.nodes_only

    def nodes_only(sc, roles, profile=None):
        factory = real(sc, roles, profile)

        def build(launch):
            if launch.attempt > 0:
                fault(launch)
            return factory(launch)

        return build

    monkeypatch.setattr(sparktf.driver.stages, "nodes_only", nodes_only)


def test_an_error_while_a_restart_builds_its_stage_fails_the_job(sc_local, monkeypatch):
    def broken(launch):
        raise RuntimeError("injected: the restart's stage cannot be built")

    _inject_into_restarts(monkeypatch, broken)
    cluster = sparktf.run(
        sc_local, jobs.raise_on_attempt_zero, {"delay": 1}, num_executors=2, max_restarts=2
    )
    with pytest.raises(sparktf.SparkTFError, match="injected: the restart's stage"):
        cluster.shutdown(timeout=60)  # raises, never waits forever
    assert cluster.status is sparktf.Status.FAILED and cluster.attempt == 0


# -------------------------------- 5. an abort while a restart is being built: nothing starts
@pytest.mark.parametrize("how", ["timeout", "ctrl-c", "with-block"])
def test_an_abort_during_a_restart_starts_nothing_and_leaves_nothing(sc_local, monkeypatch, how):
    building = threading.Event()

    def slow(launch):
        building.set()
        time.sleep(3)  # the driver gives up while this attempt is being built

    _inject_into_restarts(monkeypatch, slow)
    cluster = sparktf.run(
        sc_local, jobs.raise_on_attempt_zero, {"delay": 1}, num_executors=2, max_restarts=3
    )
    if how == "timeout":
        threading.Thread(target=building.wait).start()
        with pytest.raises(sparktf.ClusterTimeoutError):
            cluster.shutdown(timeout=4)  # expires while attempt 1 is being built
        assert building.is_set()
    elif how == "ctrl-c":
        threading.Thread(
            target=lambda: building.wait(30) and os.kill(os.getpid(), signal.SIGINT)
        ).start()
        with pytest.raises(KeyboardInterrupt):
            cluster.shutdown()
    else:
        with pytest.raises(ZeroDivisionError):
            with cluster:
                assert building.wait(30)
                1 / 0  # noqa: B018 (the error is the point)
    time.sleep(4)  # the restart's build is over by now: it must not have started anything
    assert cluster.attempt == 0
    assert not sparktf_processes()
    assert not sc_local.statusTracker().getActiveJobsIds()


# ------------------------------------------- 6. Ctrl-C in run(), train(), inference()
def _interrupt_after(secs):
    timer = threading.Timer(secs, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def _nothing_left(sc):
    assert wait_until(lambda: not sparktf_processes(), timeout=2), sparktf_processes()
    assert not sc.statusTracker().getActiveJobsIds()


def test_ctrl_c_while_run_waits_for_a_busy_cluster_stops_the_barrier_job(sc_local):
    def busy():
        sc_local.setJobGroup("busy", "two tasks hold two of the four slots")
        try:
            sc_local.parallelize(range(2), 2).foreach(lambda _: time.sleep(15))
        except Exception:
            pass

    holder = threading.Thread(target=busy)
    holder.start()
    assert wait_until(lambda: sc_local.statusTracker().getActiveJobsIds(), timeout=10)
    _interrupt_after(2)
    with pytest.raises(KeyboardInterrupt):
        sparktf.run(sc_local, jobs.describe, {}, num_executors=4)  # waits for 4 free slots
    sc_local.cancelJobGroup("busy")
    holder.join(30)
    _nothing_left(sc_local)


@pytest.mark.parametrize("call", ["train", "inference"])
def test_ctrl_c_while_the_data_is_fed_stops_every_node_and_job_before_it_propagates(sc_local, call):
    cluster = sparktf.run(
        sc_local, feed_jobs.read_one_then_sleep, {"sleep": 60}, num_executors=2, input_mode=SPARK
    )
    _interrupt_after(3)
    with pytest.raises(KeyboardInterrupt):
        getattr(cluster, call)(sc_local.parallelize(range(100), 2))
    _nothing_left(sc_local)
    with pytest.raises(sparktf.ClusterStateError, match="interrupted"):
        cluster.shutdown()


@pytest.mark.parametrize("cancel, restarts", [("group", 0), ("all", 0), ("group", 2)])
def test_cancelling_the_users_spark_jobs_stops_the_cluster_started_from_them(
    sc_local, cancel, restarts
):
    """A notebook cancels a cell by cancelling the job group its jobs run in (Zeppelin,
    Jupyter's Spark kernels), or every job: the TensorFlow cluster started from that cell is
    among them, so every node stops, no restart starts (max_restarts is for failures), and
    shutdown() says the job was cancelled."""

    def cell(out):
        sc_local.setJobGroup("cell-7", "a notebook cell")
        try:
            cluster = sparktf.run(
                sc_local, jobs.sleep_forever, {}, num_executors=2, max_restarts=restarts
            )
            out["cluster"] = cluster
            cluster.shutdown(timeout=60)
        except BaseException as exc:
            out["error"] = exc

    out = {}
    thread = threading.Thread(target=cell, args=(out,))
    thread.start()
    assert wait_until(
        lambda: "cluster" in out and out["cluster"].status.value == "running", timeout=30
    )
    if cancel == "group":
        sc_local.cancelJobGroup("cell-7")
    else:
        sc_local.cancelAllJobs()
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(out.get("error"), sparktf.SparkJobError), out
    assert str(out["error"]).startswith(
        "the Spark job holding the TensorFlow nodes was cancelled"
    ), out["error"]
    assert "org.apache" not in str(out["error"])
    assert out["cluster"].failures == [] and out["cluster"].attempt == 0
    _nothing_left(sc_local)


def test_a_cluster_that_finds_every_slot_busy_says_so_when_its_reservation_times_out(sc_local):
    """A second cluster started while another job holds every task slot: Spark cannot launch
    its barrier stage, so no node starts; the timeout says that, and what holds the slots,
    instead of sending the user to the executor logs."""
    holder = sparktf.run(sc_local, jobs.sleep_forever, {}, num_executors=4)
    (holder_job,) = jobs_tagged(sc_local, holder.job_id)
    try:
        with pytest.raises(sparktf.ClusterTimeoutError) as err:
            sparktf.run(
                sc_local, jobs.describe, {}, num_executors=2, reservation_timeout=3
            ).shutdown(timeout=60)
        text = str(err.value)
        assert "did not start within reservation_timeout=3s" in text
        assert (
            "No Spark task of the cluster ever started: Spark never launched its barrier "
            "stage, which needs 2 free task slots at once (the executors have 4), while 1 "
            f"other job(s) held slots: job {holder_job}" in text
        ), text
    finally:
        with pytest.raises(sparktf.ClusterTimeoutError):
            holder.shutdown(timeout=0.5)
    _nothing_left(sc_local)


# ------------------------------------------------------------- 7. argument types at once
@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"reservation_timeout": "60"}, "reservation_timeout must be a positive number"),
        ({"num_executors": "4"}, "num_executors must be an int >= 1 or None, got '4'"),
        ({"env": [("A", "1")]}, "env must map str to str"),
        ({"num_ps": "2"}, "num_ps must be an int >= 0"),
        ({"max_restarts": "1"}, "max_restarts must be an int >= 0"),
    ],
)
def test_a_wrong_argument_type_is_a_config_error_and_nothing_starts(sc_local, kwargs, fragment):
    with pytest.raises(sparktf.ConfigError, match=fragment):
        sparktf.run(sc_local, jobs.describe, {}, **kwargs)
    assert not sparktf_processes() and not sc_local.statusTracker().getActiveJobsIds()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_executors": np.int64(2)},
        {"num_ps": np.int32(1)},
        {"reservation_timeout": np.float32(60)},
        {"max_restarts": np.uint8(0)},
    ],
)
def test_numpy_numbers_are_numbers(sc_local, kwargs):
    """A count or a timeout computed with numpy is accepted as the plain number it is."""
    cluster = sparktf.run(sc_local, jobs.describe, {}, **{"num_executors": 3, **kwargs})
    cluster.shutdown(timeout=120)
    assert len(cluster.roles) == int(kwargs.get("num_executors", 3))


@pytest.mark.parametrize("code", [None, 0])
def test_sys_exit_0_from_main_fn_is_a_normal_end(sc_local, code):
    """sys.exit(0) or sys.exit() (what absl.app.run ends with) ends main_fn as a return of
    None does, on the chief and on a worker alike."""
    cluster = sparktf.run(
        sc_local, jobs.exits, {"chief:0": code, "worker:0": code}, num_executors=3
    )
    assert cluster.shutdown(timeout=120) is None
    assert cluster.results == {"chief:0": None, "worker:0": None, "worker:1": "worker:1"}


@pytest.mark.parametrize("code, said", [(3, "sys.exit(3)"), ("bad input", "sys.exit('bad input')")])
def test_sys_exit_with_an_error_from_main_fn_fails_the_job_saying_so(sc_local, code, said):
    with pytest.raises(sparktf.NodeError, match=re.escape(f"main_fn called {said}")) as info:
        # run() raises it itself if the worker fails before every node has started
        sparktf.run(sc_local, jobs.exits, {"worker:0": code}, num_executors=2).shutdown(timeout=120)
    assert info.value.node == "worker:0"


@pytest.mark.tf
def test_ctx_methods_given_the_wrong_types_say_what_they_take(sc_local):
    said = sparktf.run(sc_local, jobs.ctx_misuse, {}, num_executors=2).shutdown(timeout=120)
    assert said == {
        "wait_for_training_done": "timeout must be a number of seconds or None, got '1'",
        "report": "ctx.report: step must be an int, got 'x'",
        "keras_callback": "every_n_steps must be an int >= 1, got 0",
    }


@pytest.mark.parametrize("schema", ["prediction dobule", "double", 42, "a int,,"])
def test_a_bad_output_schema_is_a_config_error_before_any_node_starts(sc_local, schema):
    cluster = sparktf.run(sc_local, feed_jobs.infer_double, {}, num_executors=2, input_mode=SPARK)
    with pytest.raises(sparktf.ConfigError, match="output_schema"):
        cluster.inference(sc_local.parallelize(range(10), 2), output_schema=schema)
    assert cluster.status is sparktf.Status.CREATED and not sparktf_processes()
    cluster.shutdown()


def test_a_spark_session_is_accepted_and_anything_else_refused(sc_local):
    from pyspark.sql import SparkSession

    cluster = sparktf.run(SparkSession(sc_local), jobs.describe, {}, num_executors=2)
    assert cluster.shutdown()["name"] == "chief:0"
    with pytest.raises(sparktf.ConfigError, match="sc must be a pyspark SparkContext"):
        sparktf.run("local[2]", jobs.describe)


# ------------------------------------------------------- 9. inference never returns short
def test_rdd_inference_that_answers_part_of_its_rows_raises(sc_local):
    cluster = sparktf.run(
        sc_local, feed_jobs.answer_half_then_return, {}, num_executors=2, input_mode=SPARK
    )
    with pytest.raises(sparktf.NodeError, match="inference needs one output per row|outputs for"):
        cluster.inference(sc_local.parallelize(range(100), 3))


def test_an_output_the_task_cannot_read_fails_at_once_with_the_reason(sc_local):
    cluster = sparktf.run(
        sc_local, feed_jobs.answer_with_an_unreadable_type, {}, num_executors=2, input_mode=SPARK
    )
    start = time.monotonic()
    with pytest.raises(sparktf.NodeError) as err:
        cluster.inference(sc_local.parallelize(range(200), 2), feed_timeout=600)
    assert "cannot be read in the Spark task" in str(err.value)
    assert "private_outputs" in str(err.value)  # the reason: the module it could not import
    assert time.monotonic() - start < 120  # not feed_timeout (600 s)


@pytest.mark.parametrize("rows", [1, 0], ids=["fewer-rows-than-nodes", "empty"])
def test_dataframe_inference_with_fewer_rows_than_nodes(sc_local, rows):
    from pyspark.sql import SparkSession

    spark = SparkSession(sc_local)
    df = spark.range(0, rows).selectExpr("cast(id + 1 as double) as x")
    cluster = sparktf.run(
        sc_local, feed_jobs.infer_scaled, {"col": "x"}, num_executors=3, input_mode=SPARK
    )
    out = cluster.inference(df, output_schema="y double")
    assert [r.y for r in out.collect()] == [2.0 * (i + 1) for i in range(rows)]
    assert cluster.status is sparktf.Status.FINISHED


@pytest.mark.parametrize("adaptive", ["true", "false"])
def test_dataframe_inference_keeps_the_input_order_over_uneven_partitions(sc_local, adaptive):
    """Dealt out over a shuffle, with Spark's adaptive execution (the default: the output's
    cache is filled by count()) and without it (filled by one stage the JVM counts)."""
    from pyspark.sql import SparkSession

    spark = SparkSession(sc_local)
    before = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    try:
        df = spark.createDataFrame([(float(i),) for i in range(101)], "x double").repartition(5)
        expected = [r.x * 2 for r in df.collect()]
        cluster = sparktf.run(
            sc_local, feed_jobs.infer_scaled, {"col": "x"}, num_executors=3, input_mode=SPARK
        )
        out = cluster.inference(df, output_schema="y double")
        assert [r.y for r in out.collect()] == expected
        assert cluster.shutdown(timeout=60) == "chief:0"
        assert out.count() == 101  # persisted before the nodes went: not recomputed
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", before)


# ----------------------------------------------------------------- 10. bounded memory
@pytest.mark.parametrize("kind", ["rdd", "dataframe"])
def test_later_epochs_stream_from_the_spool_in_bounded_memory(sc_local, kind):
    """Each node's share (~48 MB) is many times the read-ahead (4 frames of ~1 MB): the TF
    process's RSS in epoch 2 must stay near where epoch 1 left it."""
    from pyspark.sql import SparkSession

    n, width = 12000, 1000  # 2 nodes x 6000 rows x 8 KB
    if kind == "rdd":
        import numpy as np

        data = sc_local.parallelize(range(n), 4).map(lambda i: np.full(width, i, dtype=np.float64))
    else:
        data = (
            SparkSession(sc_local)
            .range(n)
            .selectExpr(f"array_repeat(cast(id as double), {width}) as x")
        )
    cluster = sparktf.run(
        sc_local, feed_jobs.rss_over_epochs, {"batch": 64}, num_executors=2, input_mode=SPARK
    )
    cluster.train(data, num_epochs=2)
    cluster.shutdown(timeout=120)
    for name, r in cluster.results.items():
        assert r["rows"][0] == r["rows"][1] > 5000, r
        growth = r["peak_second"] - r["after_first"]
        assert growth < 24 << 20, (
            f"{name}: RSS grew {growth >> 20} MB in epoch 2 over a "
            f"{r['rows'][1] * width * 8 >> 20} MB share"
        )


# --------------------------------------- 11. a killed TF process whose child holds the pipes
def test_a_killed_node_whose_child_holds_its_pipes_is_reported_at_once(sc_local, tmp_path):
    with pytest.raises(sparktf.NodeError) as err:  # from run() or shutdown(): it dies early
        cluster = sparktf.run(
            sc_local,
            jobs.die_with_a_child_holding_the_pipes,
            {"dir": str(tmp_path)},
            num_executors=2,
        )
        cluster.shutdown(timeout=60)
    raised_at = time.time()
    info = json.loads((tmp_path / "child.json").read_text())
    assert err.value.node == "worker:0" and "SIGKILL" in str(err.value)
    assert "killing myself" in str(err.value)  # its last output came along
    took = raised_at - info["killed_at"]
    print(f"\nDETECTION node killed, child holding its pipes: {took:.2f}s")
    assert took < 5  # was about 10 s plus the grace
    assert wait_until(lambda: not psutil.pid_exists(info["child"]), timeout=5)


# ------------------------------------------------------------ 13. the last result is kept
def test_a_large_return_value_is_never_lost_to_the_process_exit(sc_local):
    for _ in range(3):
        cluster = sparktf.run(sc_local, jobs.big_result, {"mb": 48}, num_executors=2)
        chief = cluster.shutdown(timeout=120)
        assert chief is not None and len(chief) == 48 << 20
        assert cluster.results["worker:0"] == "worker:0"


def test_spark_sparktf_settings_set_on_the_session_at_runtime_count(sc_local):
    """``spark.conf.set("spark.sparktf.…", …)`` on the running session is read like the
    Spark conf (a bad value named, a good one used), not silently ignored."""
    from pyspark.sql import SparkSession

    spark = SparkSession(sc_local)
    try:
        spark.conf.set("spark.sparktf.tailLines", "x")
        with pytest.raises(sparktf.ConfigError, match="spark.sparktf.tailLines must"):
            sparktf.run(spark, jobs.describe, num_executors=2)
        spark.conf.set("spark.sparktf.tailLines", "7")
        spark.conf.set("spark.sparktf.maxRestarts", "2")
        cluster = sparktf.run(sc_local, jobs.describe, num_executors=2)  # the active session
        cluster.shutdown()
        assert (cluster.settings.tail_lines, cluster.settings.max_restarts) == (7, 2)
        assert sparktf.run(
            sc_local, jobs.describe, num_executors=2, max_restarts=0
        ).shutdown()  # an argument still comes first
    finally:
        spark.conf.unset("spark.sparktf.tailLines")
        spark.conf.unset("spark.sparktf.maxRestarts")


def test_a_session_without_sparktf_settings_is_read_in_one_call(sc_local):
    """run() reads the session's spark.sparktf.* values: where none is set, one py4j call
    (the keys set), not a lookup per setting; where one is, it is found."""
    from pyspark.sql import SparkSession

    from sparktf.common.settings import session_conf

    class Counted:  # the session's own JVM conf, its calls counted
        def __init__(self, jconf):
            self.jconf, self.calls = jconf, []

        def __getattr__(self, name):
            self.calls.append(name)
            return getattr(self.jconf, name)

    conf = SparkSession(sc_local).conf
    counted = Counted(conf._jconf)
    conf._jconf = counted
    try:
        assert session_conf(conf) == {}
        assert counted.calls == ["getAllAsJava"]
        conf.set("spark.sparktf.stopGrace", "2")
        assert session_conf(conf) == {"spark.sparktf.stopGrace": "2"}
    finally:
        conf._jconf = counted.jconf
        conf.unset("spark.sparktf.stopGrace")


def test_the_spark_conf_is_read_exactly_in_one_string(sc_local):
    """run() reads the SparkContext's conf from Spark's one-string listing: a value that looks
    secret (redacted there) and one with a line break (ambiguous there) still arrive exactly
    as ``sc.getConf()`` has them, and a spark.sparktf setting of the context counts."""
    from sparktf.driver import sparkfacts

    jconf = sc_local._conf._jconf
    added = {"spark.sparktf.test.password": "hunter2", "spark.sparktf.tailLines": "9"}
    try:
        for key, value in added.items():
            jconf.set(key, value)
        assert "(redacted)" in sc_local._conf.toDebugString()
        conf = sparkfacts.spark_conf(sc_local)
        assert conf == dict(sc_local.getConf().getAll())
        assert conf["spark.sparktf.test.password"] == "hunter2"
        jconf.set("spark.sparktf.test.lines", "a\nspark.sparktf.tailLines=3")
        added["spark.sparktf.test.lines"] = ""
        conf = sparkfacts.spark_conf(sc_local)
        assert conf == dict(sc_local.getConf().getAll())
        assert conf["spark.sparktf.tailLines"] == "9"
        cluster = sparktf.run(sc_local, jobs.describe, num_executors=2)
        cluster.shutdown()
        assert cluster.settings.tail_lines == 9
    finally:
        for key in added:
            jconf.remove(key)
