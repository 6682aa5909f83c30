"""Both TF programming models really train on sparktf nodes (local[4], real TF processes).

- MultiWorkerMirroredStrategy: synchronous all-reduce, tf-keras model.fit, num_ps=0;
- TF2 ParameterServerStrategy: the chief coordinates, workers serve, variables on the ps;
- classic TF1 asynchronous between-graph training: replica_device_setter,
  MonitoredTrainingSession-style sessions with StopAtStepHook, async updates to the ps.
"""

import time

import numpy as np
import pytest
from helpers import tf_jobs
from helpers.procs import TF_ENV

import sparktf
from sparktf.node.patches import tf1_sessions as tf1

pytestmark = [pytest.mark.tf, pytest.mark.slow, pytest.mark.usefixtures("no_leaks")]


def test_multi_worker_mirrored_strategy_trains(sc_local):
    cluster = sparktf.run(sc_local, tf_jobs.mwms_keras, {"epochs": 3}, num_executors=2, env=TF_ENV)
    chief = cluster.shutdown(timeout=300)
    assert chief["num_replicas"] == 2  # really synchronous across both nodes
    assert chief["loss"][-1] < 0.05 * chief["loss"][0]
    assert chief["kernel"] == pytest.approx(tf_jobs.TRUE_W, abs=0.1)
    # all-reduce keeps the replicas identical
    assert cluster.results["worker:0"]["kernel"] == pytest.approx(chief["kernel"], abs=1e-5)


def test_a_worker_taking_fewer_steps_under_mwms_is_named_while_the_chief_waits(
    sc_local, caplog, monkeypatch
):
    """A user's bug: the worker runs 1 epoch, the chief 3. The chief's next all-reduce waits
    for the worker for ever (the worker's process stays up after its main_fn, as every node's
    does, so TensorFlow sees no peer go). The driver names the idle chief and what to change
    (here after 3 s instead of IDLE_SECS), then fails the job once the chief has idled for
    collective_idle_timeout (here 10 s, set on the session), with no timeout of the user's."""
    from helpers.procs import wait_until
    from pyspark.sql import SparkSession

    from sparktf.driver.job import liveness

    monkeypatch.setattr(liveness, "IDLE_SECS", 3.0)
    session = SparkSession(sc_local)
    session.conf.set("spark.sparktf.collectiveIdleTimeout", "10")
    try:
        with caplog.at_level("WARNING", logger="sparktf"):
            cluster = sparktf.run(
                sc_local,
                tf_jobs.mwms_keras,
                {"epochs": 3, "worker_epochs": 1},
                num_executors=2,
                env=TF_ENV,
            )
            assert wait_until(lambda: "same number of steps" in caplog.text, timeout=180)
            with pytest.raises(sparktf.NodeError, match="collective_idle_timeout") as info:
                cluster.shutdown()
    finally:
        session.conf.unset("spark.sparktf.collectiveIdleTimeout")
    assert info.value.node == "chief:0" and "same number of steps" in str(info.value)
    assert "chief:0 has used under 5% of a core" in caplog.text
    assert "the main_fn of worker:0 returned" in caplog.text
    assert cluster.results.get("worker:0") is not None  # the worker did return


def test_a_sync_replicas_worker_stopping_early_is_named_while_the_chief_waits(
    sc_local, caplog, monkeypatch
):
    """The same bug in classic TF1 code: SyncReplicasOptimizer aggregates one gradient from
    the chief and one from the worker per step; the worker's loop stops after 5 steps, and
    the chief waits for its gradients for ever. Named as under MWMS."""
    from helpers.procs import wait_until

    from sparktf.driver.job import liveness

    monkeypatch.setattr(liveness, "IDLE_SECS", 3.0)
    with caplog.at_level("WARNING", logger="sparktf"):
        cluster = sparktf.run(
            sc_local,
            tf_jobs.sync_replicas_tf1,
            {"steps": 400, "late": 0, "worker_steps": 5},
            num_executors=3,
            num_ps=1,
            env=TF_ENV,
        )
        assert wait_until(lambda: "same number of steps" in caplog.text, timeout=180)
        with pytest.raises(sparktf.ClusterTimeoutError):
            cluster.shutdown(timeout=0.5)
    assert "chief:0 has used under 5% of a core" in caplog.text
    assert "Under SyncReplicasOptimizer" in caplog.text
    assert "the main_fn of worker:0 returned" in caplog.text


def test_the_readme_call_mwms_with_num_ps_2_and_defaults_trains(sc_local):
    """The README's first snippet as written: a MultiWorkerMirroredStrategy main_fn under
    ``sparktf.run(sc, main_fn, num_ps=2)``, every other argument left unset (local[4]: 2 ps,
    a chief, a worker). TensorFlow makes ps:0 the coordination leader of any cluster that
    has parameter servers, and a parameter server runs no coordination service, so the
    strategy used to wait for it for ever (the driver saw both trainers go silent)."""
    cluster = sparktf.run(sc_local, tf_jobs.mwms_keras, num_ps=2)
    chief = cluster.shutdown(timeout=300)
    assert chief["num_replicas"] == 2  # chief and worker, in sync; the ps idle
    assert chief["loss"][-1] < 0.05 * chief["loss"][0]
    assert cluster.results["worker:0"]["kernel"] == pytest.approx(chief["kernel"], abs=1e-5)
    assert cluster.results["ps:0"] is None and cluster.results["ps:1"] is None


@pytest.mark.parametrize(
    "job, num_ps, strategy, theirs",
    [
        (tf_jobs.keras3_under_mwms, 0, "MultiWorkerMirroredStrategy", "PerReplica"),
        (tf_jobs.keras3_under_pss, 1, "ParameterServerStrategy", "create_per_worker_dataset"),
    ],
)
def test_keras_3_under_a_strategy_fails_with_the_way_to_tf_keras(
    sc_local, job, num_ps, strategy, theirs
):
    """Keras 3's model.fit under MultiWorkerMirroredStrategy or ParameterServerStrategy fails
    in TensorFlow 2.21 with errors ("Attempt to convert a value (PerReplica:{...})", "pass this
    dataset to ClusterCoordinator.create_per_worker_dataset") that name neither Keras 3 nor the
    way out. The node's error keeps TensorFlow's and says what to use instead."""
    cluster = sparktf.run(sc_local, job, None, num_executors=2 + num_ps, num_ps=num_ps, env=TF_ENV)
    with pytest.raises(sparktf.NodeError) as err:
        cluster.shutdown(timeout=120)
    assert theirs in str(err.value)
    assert f"Keras 3 cannot train under {strategy}" in str(err.value)
    assert "import tf_keras as keras" in str(err.value)


def test_parameter_server_strategy_trains_with_variables_on_the_ps(sc_local):
    cluster = sparktf.run(
        sc_local, tf_jobs.ps_strategy_keras, {"epochs": 2}, num_executors=4, num_ps=1, env=TF_ENV
    )
    chief = cluster.shutdown(timeout=300)
    assert set(chief["variable_devices"].values()) == {"/job:ps/replica:0/task:0/device:CPU:0"}
    assert chief["loss"][-1] < 0.2 * chief["loss"][0]
    assert chief["kernel"] == pytest.approx(tf_jobs.TRUE_W, abs=0.3)
    # the workers served and were stopped with the ps once the chief returned
    assert cluster.results["worker:0"] is None and cluster.results["worker:1"] is None
    assert cluster.results["ps:0"] is None


def test_parameter_server_strategy_workers_written_as_plain_tf_server_join(sc_local):
    """TensorFlow's own way to write a ParameterServerStrategy worker,
    ``tf.distribute.Server(...).join()``, which never returns: the job used to hang after the
    chief finished (the driver waited for the workers' main_fn). join() serves until training
    is over, then returns, and main_fn goes on to its end."""
    cluster = sparktf.run(
        sc_local, tf_jobs.ps_strategy_keras, {"epochs": 1, "worker": "join"}, num_ps=1, env=TF_ENV
    )
    chief = cluster.shutdown(timeout=180)
    assert set(chief["variable_devices"].values()) == {"/job:ps/replica:0/task:0/device:CPU:0"}
    assert cluster.results["worker:0"] == cluster.results["worker:1"] == "joined"
    assert cluster.results["ps:0"] is None


def test_a_plain_sidecar_evaluator_ends_after_the_last_checkpoint(sc_local, tmp_path):
    """TensorFlow's evaluator beside training, as its guide writes it: tf-keras'
    SidecarEvaluator with max_evaluations=None waits for checkpoints for ever, so the job
    never ended after the chief had finished. On an evaluator node tf.train's
    checkpoints_iterator ends once training is over, after the chief's last checkpoint."""
    cluster = sparktf.run(
        sc_local,
        tf_jobs.sidecar_evaluator,
        {"dir": str(tmp_path), "epochs": 3},
        num_executors=3,
        eval_node=True,
        env=TF_ENV,
    )
    chief = cluster.shutdown(timeout=180)
    evaluator = cluster.results["evaluator:0"]
    assert evaluator["evaluations"] >= 1
    assert evaluator["last_loss"] == pytest.approx(chief["final_loss"], rel=1e-4)  # epoch 3's


@pytest.mark.parametrize(
    "job, args",
    [
        ("seed_style_tf1_late_worker", {"steps": 30, "late": 0}),
        ("ps_strategy_keras", {"epochs": 1}),
    ],
)
def test_an_evaluator_without_a_server_holds_up_no_training(sc_local, job, args):
    """The evaluator is in every node's TF_CONFIG but runs no TF server of its own. The seeds'
    TF1 code (sessions without device filters) and a ParameterServerStrategy coordinator
    reach every task of their cluster, so both waited for the evaluator for ever; training
    nodes now leave it out of those connections, and TF_CONFIG stays complete."""
    cluster = sparktf.run(
        sc_local,
        tf_jobs.beside_an_idle_evaluator,
        dict(args, job=getattr(tf_jobs, job)),
        num_ps=1,
        eval_node=True,
        env=TF_ENV,
    )
    cluster.shutdown(timeout=180)
    assert cluster.results["evaluator:0"] == ["chief", "evaluator", "ps", "worker"]
    assert cluster.results["chief:0"] and cluster.results["ps:0"] is None


def test_async_between_graph_training_through_tf_compat_v1(sc_local):
    cluster = sparktf.run(
        sc_local, tf_jobs.async_between_graph, {"steps": 200}, num_executors=3, num_ps=1, env=TF_ENV
    )
    cluster.shutdown(timeout=300)
    chief, worker = cluster.results["chief:0"], cluster.results["worker:0"]
    assert chief["w_device"] == worker["w_device"] == "/job:ps/task:0"
    assert max(chief["global_step"], worker["global_step"]) >= 200
    # both replicas pushed updates into the one global step on the ps
    assert chief["my_steps"] > 0 and worker["my_steps"] > 0
    assert chief["my_steps"] + worker["my_steps"] >= 200
    assert min(chief["loss"], worker["loss"]) < 1e-3


def test_classic_tf1_code_with_a_worker_15_s_late_never_hangs(sc_local):
    """The seeds' plain TF1 program (its own tf.compat.v1.train.Server, no device filters):
    the chief reaches the last step alone and returns; worker:0 starts its
    MonitoredTrainingSession 15 s later, which needs every task's server, the chief's too.
    sparktf keeps the chief's process (and its server) up until every training node's
    main_fn has returned, so the worker sees the last step and ends."""
    cluster = sparktf.run(
        sc_local,
        tf_jobs.seed_style_tf1_late_worker,
        {"late": 15, "steps": 50},
        num_executors=3,
        num_ps=1,
        env=TF_ENV,
    )
    cluster.shutdown(timeout=180)
    assert cluster.results["chief:0"]["my_steps"] == 50
    # it came after the last step: its session opened (on every task's server) and stopped
    assert cluster.results["worker:0"]["my_steps"] <= 1


@pytest.mark.parametrize("late", [0, 10])
def test_tf1_sync_replicas_training_ends_without_waiting_out_tensorflows_grace(sc_local, late):
    """SyncReplicasOptimizer's chief runs a queue runner that waits on the parameter server
    for the next step's gradients; once the replicas stop, nothing comes, and closing a
    MonitoredTrainingSession waits stop_grace_period_secs (120 s by default) for that thread
    before its session cancels it. The job idled two minutes at its end, with plain
    TensorFlow too. In sparktf's node processes that default is a few seconds: the job ends
    promptly, with a worker ready at once or late."""
    start = time.monotonic()
    cluster = sparktf.run(
        sc_local,
        tf_jobs.sync_replicas_tf1,
        {"steps": 40, "late": late},
        num_executors=3,
        num_ps=1,
        env=TF_ENV,
    )
    cluster.shutdown(timeout=90)
    chief, worker = cluster.results["chief:0"], cluster.results["worker:0"]
    assert chief["stop_grace"] == worker["stop_grace"] == tf1.STOP_GRACE_SECS
    assert max(chief["step"], worker["step"]) >= 39
    # from w = [0, 0] towards [2, -1]: the aggregated steps learned (the same on any start)
    assert abs(chief["w"][0] - 2) < 0.3 and abs(chief["w"][1] + 1) < 0.3, chief["w"]
    assert time.monotonic() - start < 90


def test_classic_tf1_code_under_the_mission_call_does_not_idle_for_the_chief(sc_local):
    """The seeds' TF1 program under ``sparktf.run(sc, main_fn, num_ps=2)`` with its worker
    ready as soon as the chief: TensorFlow's MonitoredTrainingSession makes a non-chief check
    for the chief's initialized variables every 30 s, so the worker (and the job) idled for
    half a minute. In sparktf's node processes a SessionManager made without
    recovery_wait_secs checks every second; the job ends with both nodes' steps done."""
    cluster = sparktf.run(
        sc_local, tf_jobs.seed_style_tf1_late_worker, {"late": 0, "steps": 60}, num_ps=2, env=TF_ENV
    )
    cluster.shutdown(timeout=300)
    chief, worker = cluster.results["chief:0"], cluster.results["worker:0"]
    assert chief["recovery_wait_secs"] == worker["recovery_wait_secs"] == 1.0
    assert worker["supervisor_wait_secs"] == 1.0  # tf.compat.v1.train.Supervisor's too
    assert chief["my_steps"] + worker["my_steps"] >= 60


def test_a_tensorflowonspark_program_runs_with_one_import_changed(sc_local, tmp_path, monkeypatch):
    """A TensorFlowOnSpark program, driver and TF1 main_fn, as its examples write them, with
    ``from sparktf import TFCluster``: ``TFCluster.run(sc, fn, args, 3, 1, False,
    InputMode.SPARK)`` (positional, its master_node=None default), ``cluster.train(rdd, 2)``,
    ``cluster.shutdown()``; in main_fn its ctx names and calls, a ps, fed tuples, a relative
    checkpoint dir, which resolves under the driver's working directory, not the executor's."""
    from sparktf import TFCluster

    monkeypatch.chdir(tmp_path)
    rng = np.random.RandomState(0)
    rows = [((float(a), float(b)), float(2 * a - b)) for a, b in rng.rand(4000, 2)]
    args = {"mode": "train", "steps": 150, "batch_size": 20, "model": "tfos"}
    cluster = TFCluster.run(
        sc_local, tf_jobs.tfos_style_tf1, args, 3, 1, False, TFCluster.InputMode.SPARK
    )
    cluster.train(sc_local.parallelize(rows, 2), 2)
    chief = cluster.shutdown()
    worker1 = cluster.results["worker:1"]
    assert (chief["worker_num"], chief["executor_id"], worker1["worker_num"]) == (0, 0, 1)
    assert chief["defaultFS"].startswith("file:")
    assert chief["working_dir"] == str(tmp_path)
    assert chief["logdir"] == f"file://{tmp_path}/tfos"
    saved = [
        int(p.name.split("-")[1].split(".")[0])
        for p in (tmp_path / "tfos").glob("model.ckpt-*.index")
    ]
    assert (tmp_path / "tfos" / "checkpoint").exists() and max(saved) >= 150, saved
    assert chief["step"] > 0 and worker1["step"] > 0  # both trained, asynchronously
    assert chief["w"] == pytest.approx([2.0, -1.0], abs=0.35)


def test_the_keras_callback_reports_batch_metrics_as_means_under_mwms(sc_local):
    """tf-keras sums a batch's logs over every worker under MultiWorkerMirroredStrategy: the
    driver's progress showed accuracy=1.98 on two nodes (a new user saw it). The callback
    reports their mean: every batch accuracy in [0, 1], near the epoch's."""
    cluster = sparktf.run(
        sc_local, tf_jobs.mwms_keras_callback_values, None, num_executors=2, env=TF_ENV
    )
    cluster.shutdown(timeout=300)
    for node in ("chief:0", "worker:0"):
        out = cluster.results[node]
        assert out["replicas"] == 2 and len(out["batch_accuracy"]) == 20
        assert all(0.0 <= a <= 1.0 for a in out["batch_accuracy"]), out
        assert abs(out["batch_accuracy"][-1] - out["epoch_accuracy"][-1]) < 0.15, out
