"""``sparktf.run`` on a Spark Connect session (the ``remote`` fixture of tests/conftest.py: a
real Spark Connect server on loopback, local[3]): the nodes run as a barrier ``mapInArrow``
submitted through Connect, tagged with the cluster's id (``spark.addTag``) and interrupted by
it (``spark.interruptTag``); they report to the client's control server over TCP."""

import json
import os
import subprocess
import sys
import time

import psutil
import pytest
from helpers import feed_jobs, jobs, ml_jobs, tf_jobs
from helpers.procs import TF_ENV, sparktf_processes, wait_until

import sparktf
from sparktf import InputMode

pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect]")
pytestmark = [pytest.mark.tf, pytest.mark.slow]
SPARK = InputMode.SPARK


def _ours():
    """This session's sparktf processes that say so: the Connect server inherits the test
    session's marker, and so do its executors' workers and nodes. (Processes without the
    marker, such as another session's YARN containers on a shared machine, are not counted.)"""
    mine = os.environ["SPARKTF_TEST_SESSION"]
    found = []
    for proc in sparktf_processes():
        try:
            if proc.environ().get("SPARKTF_TEST_SESSION") == mine:
                found.append(proc)
        except (psutil.Error, OSError):
            pass
    return found


@pytest.fixture
def no_leftovers():
    yield
    assert wait_until(lambda: not _ours(), timeout=15), (
        f"leaked sparktf processes: {[p.info for p in _ours()]}"
    )


def test_main_fn_runs_over_spark_connect_twice_in_one_session(remote, no_leftovers):
    for attempt in range(2):  # a second cluster in the same Connect session works too
        cluster = sparktf.run(remote, jobs.describe, {"run": attempt}, num_executors=2)
        chief = cluster.shutdown(timeout=120)
        assert chief["name"] == "chief:0" and chief["args"] == {"run": attempt}
        assert sorted(cluster.results) == ["chief:0", "worker:0"]
        assert cluster.results["worker:0"]["cluster_spec"] == chief["cluster_spec"]
        assert cluster.status is sparktf.Status.FINISHED


def test_keras_training_over_spark_connect_learns_the_model(remote, no_leftovers):
    cluster = sparktf.run(remote, tf_jobs.mwms_keras, {"epochs": 3}, num_executors=2, env=TF_ENV)
    chief = cluster.shutdown(timeout=300)
    assert chief["num_replicas"] == 2  # really synchronous across both nodes
    assert chief["loss"][-1] < 0.05 * chief["loss"][0]
    assert chief["kernel"] == pytest.approx(tf_jobs.TRUE_W, abs=0.1)


def test_a_failing_node_over_spark_connect_raises_its_error(remote, no_leftovers):
    args = {"node": "worker:0", "message": "bad batch over connect", "others_sleep": 300}
    started = time.monotonic()
    # From run() or shutdown(): the node fails at once, at times before run() has returned.
    with pytest.raises(sparktf.NodeError, match="bad batch over connect") as info:
        sparktf.run(remote, jobs.raise_on, args, num_executors=2).shutdown(timeout=120)
    assert info.value.node == "worker:0"
    assert time.monotonic() - started < 60  # the chief was stopped, not waited for
    # The interrupted Spark job freed both task slots: the next cluster starts at once.
    assert sparktf.run(remote, jobs.describe, num_executors=2).shutdown(timeout=60)


def test_a_cluster_over_spark_connect_restarts_after_a_node_fails(remote, no_leftovers):
    cluster = sparktf.run(
        remote, jobs.raise_on_attempt_zero, {"delay": 0.5}, num_executors=2, max_restarts=1
    )
    assert cluster.shutdown(timeout=120) == {"attempt": 1}
    assert cluster.attempt == 1 and len(cluster.failures) == 1
    assert "attempt 0 fails" in str(cluster.failures[0])


@pytest.mark.parametrize("how", ["interruptAll", "interruptTag"])
def test_a_client_that_interrupts_its_jobs_stops_the_cluster_without_a_restart(
    remote, how, no_leftovers
):
    """A notebook over Spark Connect cancels a cell by interrupting the session's operations
    (``spark.interruptAll()``; or the operations of a tag the cell's jobs carry): the
    TensorFlow cluster started from it stops, every node; no restart starts (max_restarts is
    for failures); shutdown() says the job was cancelled; the next cluster starts."""
    out = {}

    def cell():
        if how == "interruptTag":
            remote.addTag("cell-7")  # (the client thread's tag: the cluster's jobs carry it)
        try:
            cluster = sparktf.run(remote, jobs.sleep_forever, {}, num_executors=2, max_restarts=1)
            out["cluster"] = cluster
            cluster.shutdown(timeout=60)
        except BaseException as exc:
            out["error"] = exc
        finally:
            remote.clearTags()

    thread = __import__("threading").Thread(target=cell)
    thread.start()
    assert wait_until(
        lambda: "error" in out or ("cluster" in out and out["cluster"].status.value == "running"),
        timeout=60,
    ), out
    started = time.monotonic()
    if how == "interruptAll":
        remote.interruptAll()
    else:
        remote.interruptTag("cell-7")
    thread.join(60)
    assert not thread.is_alive()
    assert time.monotonic() - started < 30
    assert isinstance(out.get("error"), sparktf.SparkJobError), out
    assert "cancelled" in str(out["error"]), out["error"]
    assert out["cluster"].failures == [] and out["cluster"].attempt == 0
    assert sparktf.run(remote, jobs.describe, num_executors=2).shutdown(timeout=60)


def test_a_worker_restarts_in_place_over_spark_connect(remote, tmp_path, no_leftovers):
    """A parameter-server job's worker whose main_fn raises is restarted in place (its TF
    process alone, the others running on), as on a classic session: the job completes."""
    cluster = sparktf.run(
        remote,
        jobs.worker_fails_its_first_process,
        {"dir": str(tmp_path)},
        num_executors=3,
        num_ps=1,
    )
    assert cluster.shutdown(timeout=180) is True
    assert cluster.results["worker:0"] == "restarted"
    [failure] = cluster.failures
    assert failure.node == "worker:0" and failure.restarted_in_place
    assert failure.exc_message == "worker:0's first process fails"
    assert cluster.attempt == 0


def test_a_dataframe_is_fed_over_spark_connect_every_row_once(remote, no_leftovers):
    df = remote.range(0, 1000, 1, 3)  # 3 partitions for 2 nodes: dealt out over a shuffle
    cluster = sparktf.run(
        remote, feed_jobs.sum_ids, {"col": "id"}, num_executors=2, input_mode=SPARK
    )
    cluster.train(df, num_epochs=2, equalize=False, timeout=120)
    cluster.shutdown(timeout=60)
    results = cluster.results.values()
    assert sum(r["rows"] for r in results) == 2 * 1000
    assert sum(r["sum"] for r in results) == 2 * sum(range(1000))


def test_keras_fit_on_a_fed_dataframe_over_spark_connect_learns(remote, no_leftovers):
    import numpy as np

    rng = np.random.RandomState(0)
    x = rng.randn(1000, 4)
    y = x @ np.array(tf_jobs.TRUE_W) + tf_jobs.TRUE_B
    rows = [(x[i].tolist(), float(y[i])) for i in range(len(x))]
    df = remote.createDataFrame(rows, "x array<float>, y float")
    cluster = sparktf.run(
        remote,
        feed_jobs.mwms_on_feed,
        {"batch": 32, "epochs": 3},
        num_executors=2,
        input_mode=SPARK,
        env=TF_ENV,
    )
    cluster.train(df, num_epochs=3, timeout=300)
    chief = cluster.shutdown(timeout=300)
    assert chief["loss"][-1] < 0.1 * chief["loss"][0]
    assert cluster.results["worker:0"]["rows_per_epoch"] == chief["rows_per_epoch"]


def test_an_rdd_is_refused_over_spark_connect_saying_to_use_a_dataframe(
    remote, sc_local, no_leftovers
):
    cluster = sparktf.run(remote, feed_jobs.sum_ids, {}, num_executors=2, input_mode=SPARK)
    started = time.monotonic()
    with pytest.raises(sparktf.ConfigError, match="has no RDDs: give train") as info:
        cluster.train(sc_local.parallelize(range(10), 2))
    assert "DataFrame" in str(info.value)
    assert time.monotonic() - started < 5
    cluster.shutdown()


def test_inference_over_spark_connect_answers_every_row_in_order(remote, no_leftovers):
    cluster = sparktf.run(
        remote, feed_jobs.infer_double_keeping_id, {}, num_executors=2, input_mode=SPARK
    )
    out = cluster.inference(remote.range(0, 500, 1, 3), "id long, doubled long", timeout=120)
    assert [(r.id, r.doubled) for r in out.collect()] == [(i, 2 * i) for i in range(500)]
    assert cluster.shutdown(timeout=60) == "inferred"


def test_a_control_host_the_client_cannot_listen_at_fails_the_run_at_once(remote, no_leftovers):
    remote.conf.set("spark.sparktf.controlHost", "192.0.2.1")  # TEST-NET-1: not this machine's
    try:
        started = time.monotonic()
        with pytest.raises(sparktf.ConfigError, match="spark.sparktf.controlHost") as info:
            sparktf.run(remote, jobs.describe, num_executors=2)
        assert "192.0.2.1" in str(info.value)
        assert time.monotonic() - started < 10
    finally:
        remote.conf.unset("spark.sparktf.controlHost")


@pytest.fixture
def firewalled_address():
    """127.0.0.2 (a loopback address no other test uses), firewalled: an nftables table of
    this test's own drops every new TCP connection to it (a client behind a firewall or a
    NAT, as its executors see it); removed at the end. Needs root and nft."""
    import shutil

    if os.geteuid() != 0 or shutil.which("nft") is None:
        pytest.skip("needs root and nft (Debian's nftables; .ci/run installs it)")
    table = f"sparktf_connect_fw_{os.getpid()}"
    rules = (
        f"table ip {table} {{\n chain input {{\n  type filter hook input priority 0;\n"
        "  ip daddr 127.0.0.2 tcp flags & (syn | ack) == syn drop\n }\n}\n"
    )
    subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True)
    try:
        yield "127.0.0.2"
    finally:
        subprocess.run(["nft", "delete", "table", "ip", table], check=True)


def test_a_client_its_executors_cannot_reach_fails_within_a_minute_naming_the_setting(
    remote, firewalled_address, no_leftovers
):
    """The control server lives where the Connect client is; its executors must reach it.
    A client they cannot reach (its address firewalled: every new connection dropped, as
    behind a NAT) fails the run within a minute (the tasks' connect timeout, 30 s) with an
    error that names the address and the setting for the one to advertise, never a
    reservation timeout."""
    remote.conf.set("spark.sparktf.controlHost", firewalled_address)
    try:
        started = time.monotonic()
        with pytest.raises(sparktf.SparkTFError) as info:
            sparktf.run(remote, jobs.describe, num_executors=2).shutdown(timeout=120)
        took = time.monotonic() - started
    finally:
        remote.conf.unset("spark.sparktf.controlHost")
    text = str(info.value)
    print(f"\n[connect] unreachable client: failed after {took:.1f}s: {text[:300]}")
    assert not isinstance(info.value, sparktf.ClusterTimeoutError), text
    assert "cannot reach the driver's control server" in text, text
    assert firewalled_address in text and "spark.sparktf.controlHost" in text, text
    assert took < 60, took
    assert sparktf.run(remote, jobs.describe, num_executors=2).shutdown(timeout=60)


def test_more_nodes_than_the_connect_servers_slots_are_refused_at_once(remote, no_leftovers):
    started = time.monotonic()
    with pytest.raises(sparktf.ConfigError, match="offers 3 task slots"):
        sparktf.run(remote, jobs.describe, num_executors=4)
    assert time.monotonic() - started < 10


CLIENT_ONLY = r"""
import json, sys
from pyspark.sql import SparkSession
import sparktf

def main_fn(args, ctx):
    feed = ctx.get_data_feed()
    total = 0
    while not feed.should_stop():
        total += int(feed.next_batch(64)["id"].sum())
    return {"name": ctx.name, "sum": total}

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
cluster = sparktf.run(
    spark, main_fn, num_executors=2, input_mode=sparktf.InputMode.SPARK, progress=False
)
cluster.train(spark.range(0, 300, 1, 2), timeout=120)
cluster.shutdown(timeout=60)
print(json.dumps({"type": type(spark).__module__, "sums": sorted(
    r["sum"] for r in cluster.results.values())}))
spark.stop()
"""


def test_a_process_that_is_only_a_connect_client_trains(connect_url, tmp_path, no_leftovers):
    """The user's case: a process whose only session is a Connect client (pyspark's common
    builder with .remote(), no JVM of its own), feeding a DataFrame to the nodes."""
    script = tmp_path / "client_only.py"
    script.write_text(CLIENT_ONLY)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, str(script), connect_url],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["type"].startswith("pyspark.sql.connect.")
    assert sum(out["sums"]) == sum(range(300))


def test_a_shutdown_timeout_over_spark_connect_stops_every_node(remote, no_leftovers):
    cluster = sparktf.run(remote, jobs.sleep_forever, num_executors=2)
    started = time.monotonic()
    with pytest.raises(sparktf.ClusterTimeoutError):
        cluster.shutdown(timeout=3)
    assert time.monotonic() - started < 30
    # The interrupted Spark operation freed both slots: the next cluster starts at once.
    assert sparktf.run(remote, jobs.describe, num_executors=2).shutdown(timeout=60)


def test_tfestimator_fits_over_spark_connect_and_its_model_scores(remote, tmp_path, no_leftovers):
    """A Spark ML estimator over Connect: TFEstimator.fit trains on the cluster (fed the
    DataFrame), exports its SavedModel; the TFModel scores the same rows on the executors;
    a Pipeline's fit and transform as any Spark ML stage."""
    from pyspark.ml import Pipeline

    from sparktf.ml import TFEstimator

    rows = [([float(i % 4), float(i % 3), 1.0], 2.0 * (i % 4) - (i % 3)) for i in range(24)]
    df = remote.createDataFrame(rows, "features array<float>, label double").repartition(2)
    estimator = TFEstimator(
        ml_jobs.tiny_linear,
        {"seed": 3},
        inputCols=["features"],
        labelCol="label",
        clusterSize=2,
        epochs=1,
        batchSize=2,
        exportDir=str(tmp_path / "export"),
    )
    model = Pipeline(stages=[estimator]).fit(df)
    scored = model.transform(df).select("label", "prediction").collect()
    assert len(scored) == 24
    assert all(isinstance(r.prediction, float) for r in scored), scored[:3]
    export = model.stages[0].getOrDefault("exportDir")
    assert os.path.isfile(os.path.join(export, "saved_model.pb"))


def test_a_script_runs_as_it_is_over_spark_connect(remote, tmp_path, no_leftovers):
    """``sparktf.run(spark, "train.py", args)`` on a Connect session: the script (shipped
    from the client with its py_files) runs on every node with TF_CONFIG and its argv."""
    (tmp_path / "helper_mod.py").write_text("VALUE = 'shipped'\n")
    (tmp_path / "train.py").write_text(
        "import json, os, sys\n"
        "import helper_mod\n"
        "task = json.loads(os.environ['TF_CONFIG'])['task']\n"
        "out = os.path.join(sys.argv[1], f\"{task['type']}-{task['index']}.json\")\n"
        "json.dump({'argv': sys.argv[1:], 'helper': helper_mod.VALUE}, open(out, 'w'))\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    cluster = sparktf.run(
        remote,
        str(tmp_path / "train.py"),
        [str(out), "--epochs", "2"],
        num_executors=2,
        py_files=[str(tmp_path / "helper_mod.py")],
    )
    assert cluster.shutdown(timeout=120) is None
    reports = {p: json.loads((out / p).read_text()) for p in sorted(os.listdir(out))}
    assert sorted(reports) == ["chief-0.json", "worker-0.json"]
    for r in reports.values():
        assert r == {"argv": [str(out), "--epochs", "2"], "helper": "shipped"}


def test_a_connect_dataframe_in_one_partition_per_node_is_fed_as_it_is(
    remote, no_leftovers, caplog
):
    """The client's plan ends in repartition(2) under a column-wise step: 2 partitions, one
    per training node, fed as they are (no shuffle of sparktf's), with rebalance unset and with
    rebalance=False, which before was refused for every Connect DataFrame."""
    from pyspark.sql.connect import functions as F

    caplog.set_level("INFO", logger="sparktf")
    df = remote.range(0, 1000, 1, 5).repartition(2).withColumn("x", F.col("id") * 2)
    for rebalance in (None, False):
        cluster = sparktf.run(
            remote, feed_jobs.sum_ids, {"col": "id"}, num_executors=2, input_mode=SPARK
        )
        cluster.train(df, rebalance=rebalance)
        cluster.shutdown(timeout=120)
        fed = [cluster.results[n] for n in ("chief:0", "worker:0")]
        assert sum(r["rows"] for r in fed) == 1000 and sum(r["sum"] for r in fed) == 499500
    said = "feeding 2 partitions as they are (a Spark Connect DataFrame's repartition(2)"
    assert caplog.text.count(said) == 2, caplog.text[-2000:]


def test_rebalance_false_over_a_connect_plan_of_unknown_partitions_says_what_to_do(
    remote, no_leftovers
):
    cluster = sparktf.run(
        remote, feed_jobs.sum_ids, {"col": "id"}, num_executors=2, input_mode=SPARK
    )
    with pytest.raises(sparktf.ConfigError, match=r"does not end in repartition\(n\)"):
        cluster.train(remote.range(0, 100).filter("id > 3"), rebalance=False)
    cluster.shutdown()


def test_warm_up_over_spark_connect_starts_a_daemon_on_every_slot(remote, no_leftovers):
    """One DataFrame stage of a task per slot the server promises (local[3]: 3), in the
    background, tagged so that it can be interrupted; the server's daemon is pyspark's own, so
    nothing was preloaded. RDD stages do not exist over Connect: rdds=True says so."""
    handle = sparktf.warm_up(remote)
    assert handle.wait(120), handle
    assert handle.error is None, handle
    assert len(handle.reports["dataframes"]) == 3
    assert handle.tensorflow_preloaded is False
    with pytest.raises(sparktf.ConfigError, match="Connect has no RDD stages"):
        sparktf.warm_up(remote, rdds=True)


def test_the_connect_servers_hadoop_file_system_reaches_the_nodes(remote, no_leftovers):
    """The client has no Hadoop configuration: the server's spark.hadoop.fs.defaultFS is what
    the nodes' sparktf.fs takes as the default file system (ctx.absolute_path, hdfs:///)."""
    remote.conf.set("spark.hadoop.fs.defaultFS", "hdfs://namenode.example:8020")
    try:
        cluster = sparktf.run(remote, jobs.describe_env, num_executors=1)
        env = cluster.shutdown(timeout=120)["env"]
    finally:
        remote.conf.unset("spark.hadoop.fs.defaultFS")
    assert env["SPARKTF_DEFAULT_FS"] == "hdfs://namenode.example:8020"


def test_the_guides_dataframe_training_runs_as_written(remote, no_leftovers, tmp_path):
    """docs/guides/spark-connect.md's "Training on a DataFrame" block, run as it stands (its
    export directory moved under tmp_path): the chief's weight approaches 3."""
    import re

    guide = open(os.path.join(os.path.dirname(__file__), "../../docs/guides/spark-connect.md"))
    block = guide.read().split("## Training on a DataFrame", 1)[1]
    code = re.search(r"```python\n(.*?)```", block, re.S).group(1)
    assert '"/tmp/model"' in code
    code = code.replace('"/tmp/model"', repr(str(tmp_path / "model")))
    # (this test process has a classic session too: pyspark.sql.functions would be classic's;
    # a client process, marked as Connect's by pyspark, gets Connect's from the same import)
    classic = "from pyspark.sql import functions as F"
    assert classic in code
    code = code.replace(classic, "from pyspark.sql.connect import functions as F")
    scope = {"spark": remote, "sparktf": sparktf, "print": lambda *a: scope.update(shown=a)}
    exec(compile(code, "spark-connect.md", "exec"), scope)
    (weights,) = scope["shown"]
    assert 2.5 < weights[0] < 3.5, weights
    assert (tmp_path / "model" / "saved_model.pb").exists()
