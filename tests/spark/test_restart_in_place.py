"""Workers restarted in place (``worker_restarts``, ``spark.sparktf.workerRestarts``): with
parameter servers a worker's TF process that dies is started again by its supervisor, in the
same barrier task, on the same port and with the same TF_CONFIG, while the chief and the ps go
on. Real TF processes on local[4]; the fault is a real SIGKILL (or SIGSTOP: a frozen worker,
killed by its supervisor once it is silent for heartbeat_timeout) sent by the chief to the
worker's process at a step drawn at random (the seed is printed), and the no_leaks fixture
checks that nothing is left behind.

What TensorFlow 2.21 does, measured before this was built (plain processes, hand-written
TF_CONFIG): ParameterServerStrategy's ClusterCoordinator logs the worker's failure, goes on with
the other workers, and once a process answers at the same address again logs "Worker
/job:worker/replica:0/task:0 has been recovered" and schedules closures on it again; a TF1
MonitoredSession worker joins a running cluster again from the variables on the ps.
"""

import os
import random
import signal
import sys
import time

import cloudpickle
import pytest
from helpers.procs import TF_ENV

import sparktf

# The executors cannot import this module: its main_fn's travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaks")]

TRUE_W = [1.0, 2.0, 3.0, 4.0]


def _data(seed):
    import numpy as np

    rng = np.random.RandomState(seed)
    x = rng.randn(512, 4).astype("float32")
    y = (x @ np.array(TRUE_W, "float32")[:, None] + 0.5).astype("float32")
    return x, y


def _note_pid(args, ctx):
    """Each process of a node appends its pid to ``<dir>/<node>.pids`` (one per restart)."""
    with open(os.path.join(args["dir"], f"{ctx.job_name}{ctx.task_index}.pids"), "a") as f:
        f.write(f"{os.getpid()}\n")


def _kill_worker_once(args):
    """SIGKILL (or ``args["signal"]``, say SIGSTOP) worker 0's first TF process (once, once it
    runs): the fault, sent from the chief."""
    marker = os.path.join(args["dir"], "killed")
    pids = os.path.join(args["dir"], "worker0.pids")
    if os.path.exists(marker) or not os.path.exists(pids):
        return  # killed already, or the worker has not started yet: later
    with open(pids) as f:
        pid = int(f.readline())
    open(marker, "w").close()
    os.kill(pid, getattr(signal, args.get("signal", "SIGKILL")))


def ps_strategy_job(args, ctx):
    """TF2 ParameterServerStrategy: workers serve; the chief trains with model.fit and kills
    worker 0 at the end of epoch ``args["kill_at"]`` (None: undisturbed)."""
    if ctx.job_name == "worker":
        _note_pid(args, ctx)
        ctx.serve()
        return None
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.experimental.ParameterServerStrategy(ctx.cluster_resolver())
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", steps_per_execution=5)

    def dataset_fn(input_context):
        x, y = _data(input_context.input_pipeline_id)
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).batch(32).repeat()

    class Fault(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == args["kill_at"]:
                _kill_worker_once(args)

    hist = model.fit(
        keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=args["epochs"],
        steps_per_epoch=20,
        verbose=0,
        callbacks=[Fault()],
    )
    return {
        "loss": float(hist.history["loss"][-1]),
        "kernel": model.get_weights()[0].ravel().tolist(),
    }


def tf1_async_job(args, ctx):
    """TF1 asynchronous between-graph training; the chief kills worker 0 once the global
    step passes ``args["kill_at"]`` (None: undisturbed)."""
    import tensorflow as tf

    from sparktf.node import tf1

    if ctx.job_name == "worker":
        _note_pid(args, ctx)
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    server = ctx.start_server()
    cluster = tf.train.ClusterSpec(ctx.cluster_spec)
    device = f"/job:{ctx.job_name}/task:{ctx.task_index}"
    with v1.device(v1.train.replica_device_setter(worker_device=device, cluster=cluster)):
        global_step = v1.train.get_or_create_global_step()
        x = v1.placeholder(tf.float32, [None, 4])
        y = v1.placeholder(tf.float32, [None, 1])
        w = v1.get_variable("w", [4, 1], initializer=v1.zeros_initializer())
        b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        train_op = v1.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
        with tf.control_dependencies([train_op]):
            step_after = global_step.read_value()
    xs, ys = _data(ctx.task_index + 1)
    config = v1.ConfigProto(device_filters=["/job:ps", device])
    hooks = [v1.train.StopAtStepHook(last_step=args["steps"])]
    if ctx.is_chief:
        creator = v1.train.ChiefSessionCreator(master=server.target, config=config)
    else:
        creator = tf1.worker_session_creator(master=server.target, config=config)
    mine, step, value = 0, 0, None
    with v1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        while not sess.should_stop():
            i = (mine * 32) % 480
            step, value = sess.run([step_after, loss], {x: xs[i : i + 32], y: ys[i : i + 32]})
            mine += 1
            if ctx.is_chief and args["kill_at"] is not None and step >= args["kill_at"]:
                _kill_worker_once(args)
            if ctx.is_chief:
                time.sleep(0.005)  # let the worker do its share on 2 cores
    return {"global_step": int(step), "my_steps": mine, "loss": value and float(value)}


def always_raises(args, ctx):
    """worker:0's main_fn fails every time; the others wait."""
    if ctx.name == "worker:0":
        raise ValueError(f"worker:0 fails every time (pid {os.getpid()})")
    time.sleep(120)
    return "should have been stopped"


def _pids(tmp_path, name):
    path = tmp_path / f"{name}.pids"
    return path.read_text().split() if path.exists() else []


def test_a_ps_strategy_worker_killed_at_a_random_step_is_restarted_and_training_completes(
    sc_local, tmp_path, capsys
):
    seed = random.randrange(1 << 30)
    kill_at = random.Random(seed).randrange(2, 8)
    print(f"seed {seed}: worker:0 killed at the end of epoch {kill_at}")
    runs = {}
    for name, at in (("undisturbed", None), ("killed", kill_at)):
        work = tmp_path / name
        work.mkdir()
        args = {"dir": str(work), "epochs": 40, "kill_at": at}
        cluster = sparktf.run(
            sc_local, ps_strategy_job, args, num_executors=4, num_ps=1, env=TF_ENV
        )
        runs[name] = (cluster, cluster.shutdown(timeout=300), work)
    cluster, chief, work = runs["killed"]
    baseline = runs["undisturbed"][1]
    assert (work / "killed").exists()
    # worker:0 ran twice, in the same barrier task: a second process, worker:1 once
    assert len(_pids(work, "worker0")) == 2 and len(_pids(work, "worker1")) == 1
    [failure] = cluster.failures
    assert isinstance(failure, sparktf.NodeError) and failure.node == "worker:0"
    assert failure.restarted_in_place and "SIGKILL" in str(failure)
    assert cluster.attempt == 0  # no whole-cluster restart
    progress = cluster.progress()
    assert progress["worker:0"]["restarts"] == 1 and progress["worker:1"]["restarts"] == 0
    assert "restarting it in place (restart 1 of 3" in capsys.readouterr().err
    # the model: as good as the undisturbed run's
    assert baseline["loss"] < 1e-3 and chief["loss"] < 1e-3
    assert chief["kernel"] == pytest.approx(baseline["kernel"], abs=0.01)
    assert chief["kernel"] == pytest.approx(TRUE_W, abs=0.01)


def test_a_ps_strategy_worker_frozen_at_a_random_step_is_killed_and_restarted_in_place(
    sc_local, tmp_path, capsys
):
    """SIGSTOP, not SIGKILL: the worker's process neither exits nor beats. Once it has been
    silent for heartbeat_timeout its supervisor kills it, and it restarts in place."""
    seed = random.randrange(1 << 30)
    stop_at = random.Random(seed).randrange(2, 8)
    print(f"seed {seed}: worker:0 stopped at the end of epoch {stop_at}")
    args = {"dir": str(tmp_path), "epochs": 40, "kill_at": stop_at, "signal": "SIGSTOP"}
    cluster = sparktf.run(
        sc_local,
        ps_strategy_job,
        args,
        num_executors=4,
        num_ps=1,
        heartbeat_timeout=5,
        env=TF_ENV,
    )
    chief = cluster.shutdown(timeout=300)
    assert (tmp_path / "killed").exists()
    assert len(_pids(tmp_path, "worker0")) == 2 and len(_pids(tmp_path, "worker1")) == 1
    [failure] = cluster.failures
    assert isinstance(failure, sparktf.NodeError) and failure.node == "worker:0"
    assert failure.restarted_in_place and "sent no heartbeat for" in str(failure)
    assert "was stopped or frozen, and its supervisor killed it" in str(failure)
    assert cluster.attempt == 0  # no whole-cluster restart
    progress = cluster.progress()
    assert progress["worker:0"]["restarts"] == 1 and progress["worker:1"]["restarts"] == 0
    err = capsys.readouterr().err
    assert "killing its TF process to restart it in place" in err
    assert "was killed by signal 9 (SIGKILL) after it sent no heartbeat for" in err
    assert "restarting it in place (restart 1 of 3" in err
    # the model: as good as an undisturbed run's (the SIGKILL test compares the two)
    assert chief["loss"] < 1e-3
    assert chief["kernel"] == pytest.approx(TRUE_W, abs=0.01)


def test_a_tf1_async_worker_killed_at_a_random_step_rejoins_and_training_completes(
    sc_local, tmp_path, capsys
):
    seed = random.randrange(1 << 30)
    kill_at = random.Random(seed).randrange(20, 300)
    print(f"seed {seed}: worker:0 killed at global step {kill_at}")
    args = {"dir": str(tmp_path), "steps": 3000, "kill_at": kill_at}
    cluster = sparktf.run(sc_local, tf1_async_job, args, num_executors=3, num_ps=1, env=TF_ENV)
    cluster.shutdown(timeout=300)
    chief, worker = cluster.results["chief:0"], cluster.results["worker:0"]
    assert len(_pids(tmp_path, "worker0")) == 2  # its first process was killed, then restarted
    assert [f.node for f in cluster.failures] == ["worker:0"]
    assert cluster.failures[0].restarted_in_place and cluster.attempt == 0
    assert cluster.progress()["worker:0"]["restarts"] == 1
    assert "[worker:0] sparktf: worker:0's TF process was killed by signal 9" in (
        capsys.readouterr().err
    )
    # the restarted worker joined the running cluster: it trained steps of its own into the
    # one global step on the ps, which reached the end
    assert worker["my_steps"] > 0
    assert max(chief["global_step"], worker["global_step"]) >= 3000
    assert chief["loss"] < 1e-3


def test_a_worker_that_fails_every_time_exhausts_its_restarts_and_fails_the_job(sc_local):
    cluster = sparktf.run(
        sc_local, always_raises, None, num_executors=3, num_ps=1, worker_restarts=2, env=TF_ENV
    )
    with pytest.raises(sparktf.NodeError, match="fails every time") as err:
        cluster.shutdown(timeout=120)
    assert err.value.node == "worker:0"
    assert "restarted in place 2 times" in str(err.value)
    assert "not restarted in place: it was restarted in place 2 times already" in str(err.value)
    # the two failures the restarts absorbed, each its own process
    assert [f.node for f in cluster.failures] == ["worker:0", "worker:0"]
    pids = {f.exc_message for f in cluster.failures} | {err.value.exc_message}
    assert len(pids) == 3
    assert cluster.progress()["worker:0"]["restarts"] == 2


class _SlowToLeave(ValueError):
    """main_fn's error, whose process then takes ``secs`` to exit (as a large process does):
    its ``__del__`` runs once the node has reported it, before the process leaves."""

    def __init__(self, message, secs):
        super().__init__(message)
        self.secs = secs

    def __del__(self):
        time.sleep(self.secs)


def raises_then_exits_slowly(args, ctx):
    """worker:0's first process raises and takes ``args["exit_secs"]`` to exit; its second
    returns. The chief and worker:1 wait for that second process; the ps serves."""
    if ctx.job_name == "ps":
        ctx.serve()
        return None
    marker = os.path.join(args["dir"], "second")
    if ctx.name == "worker:0":
        _note_pid(args, ctx)
        if len(_pids_in(args["dir"], "worker0")) == 1:
            raise _SlowToLeave("worker:0's first process fails", args["exit_secs"])
        open(marker, "w").close()
        return "restarted"
    deadline = time.monotonic() + 240
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return os.path.exists(marker)


def _pids_in(directory, name):
    path = os.path.join(directory, f"{name}.pids")
    return open(path).read().split() if os.path.exists(path) else []


def test_a_worker_whose_failed_process_exits_slowly_is_still_restarted_in_place(sc_local, tmp_path):
    """The error reaches the driver at once, the supervisor's restart request only once the
    process has exited (6 s later, past the driver's 3 s error settle): the pending restart
    holds the error, and the job goes on instead of failing (or restarting) whole."""
    args = {"dir": str(tmp_path), "exit_secs": 6.0}
    cluster = sparktf.run(
        sc_local, raises_then_exits_slowly, args, num_executors=4, num_ps=1, env=TF_ENV
    )
    cluster.shutdown(timeout=300)
    assert cluster.results["worker:0"] == "restarted"
    assert cluster.results["chief:0"] is True and cluster.results["worker:1"] is True
    [failure] = cluster.failures
    assert failure.node == "worker:0" and failure.restarted_in_place
    assert failure.exc_message == "worker:0's first process fails"
    assert cluster.attempt == 0 and len(_pids(tmp_path, "worker0")) == 2


def test_a_lock_step_worker_with_parameter_servers_is_not_restarted_in_place(sc_local):
    """SyncReplicasOptimizer with a ps: restarts in place are on by default (a ps), but a
    restarted worker would leave the chief waiting for its part of a step for ever. The
    trainers report the optimizer in their heartbeats, and the driver refuses the restart:
    the job fails at once with the worker's error (or restarts whole, with max_restarts)."""
    from helpers import tf_jobs

    cluster = sparktf.run(
        sc_local,
        tf_jobs.sync_replicas_tf1,
        {"steps": 100000, "late": 0, "raise_after": 4.0},
        num_executors=3,
        num_ps=1,
        env=TF_ENV,
    )
    with pytest.raises(sparktf.NodeError, match="worker:0 fails at step") as err:
        cluster.shutdown(timeout=240)
    assert err.value.node == "worker:0"
    assert "trains in lock-step under SyncReplicasOptimizer" in str(err.value)
    assert cluster.failures == [] and cluster.progress()["worker:0"]["restarts"] == 0
