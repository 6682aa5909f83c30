"""main_fn's that really train a small model, one per TF programming model.

They run inside sparktf's node processes; the tests pickle this module by value, so it need
not be importable on the executors. The model: linear regression y = x . [1, 2, 3, 4] + 0.5,
which every topology learns to a small loss in a few dozen steps.
"""

import inspect
import os
import time

from sparktf.node import tf1

TRUE_W = [1.0, 2.0, 3.0, 4.0]
TRUE_B = 0.5


def _data(n=512, seed=0):
    import numpy as np

    rng = np.random.RandomState(seed)
    x = rng.randn(n, 4).astype("float32")
    y = (x @ np.array(TRUE_W, "float32")[:, None] + TRUE_B).astype("float32")
    return x, y


def mwms_keras(args, ctx):
    """Synchronous all-reduce: MultiWorkerMirroredStrategy + tf-keras model.fit (any
    parameter servers stay idle); ``args`` may be None (3 epochs)."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    x, y = _data(seed=ctx.task_index)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat()
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    epochs = (args or {}).get("epochs", 3)
    if ctx.job_name == "worker" and "worker_epochs" in (args or {}):  # uneven steps: a bug
        epochs = args["worker_epochs"]
    hist = model.fit(ds.with_options(options), epochs=epochs, steps_per_epoch=20, verbose=0)
    return {
        "loss": [float(v) for v in hist.history["loss"]],
        "num_replicas": strategy.num_replicas_in_sync,
        "kernel": model.get_weights()[0].ravel().tolist(),
    }


def mwms_keras_callback_values(args, ctx):
    """MWMS fit of a classifier with an accuracy metric and ctx.keras_callback(): the values
    the callback reports for batches (recorded as it sends them), and the epochs' own."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, activation="sigmoid", input_shape=(4,))])
        model.compile(
            optimizer=keras.optimizers.SGD(0.5), loss="binary_crossentropy", metrics=["accuracy"]
        )
    rng = np.random.default_rng(ctx.task_index)
    x = rng.normal(size=(640, 4)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat()
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    sent = []
    report = ctx.report
    ctx.report = lambda **values: (sent.append(values), report(**values))
    hist = model.fit(
        ds.with_options(options),
        epochs=2,
        steps_per_epoch=10,
        verbose=0,
        callbacks=[ctx.keras_callback()],
    )
    batches = [v for v in sent if "epoch_done" not in v]
    return {
        "batch_accuracy": [v["accuracy"] for v in batches],
        "epoch_accuracy": [float(a) for a in hist.history["accuracy"]],
        "replicas": strategy.num_replicas_in_sync,
    }


def ps_strategy_keras(args, ctx):
    """TF2 ParameterServerStrategy: the chief coordinates, workers only serve: with
    ``ctx.serve()``, or with ``args["worker"] == "join"`` as TensorFlow's guide writes it."""
    if ctx.job_name == "worker":
        if args.get("worker") != "join":
            ctx.serve()
            return None
        import tensorflow as tf

        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        server = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=resolver.task_type,
            task_index=resolver.task_id,
            protocol="grpc",
            start=True,
        )
        server.join()
        return "joined"
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.experimental.ParameterServerStrategy(ctx.cluster_resolver())
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", steps_per_execution=5)

    def dataset_fn(input_context):
        x, y = _data(seed=input_context.input_pipeline_id)
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).batch(32).repeat()

    hist = model.fit(
        keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=args["epochs"],
        steps_per_epoch=20,
        verbose=0,
    )
    variables = {v.name: v.device for v in model.trainable_variables}
    return {
        "loss": [float(v) for v in hist.history["loss"]],
        "variable_devices": variables,
        "kernel": model.get_weights()[0].ravel().tolist(),
    }


def async_between_graph(args, ctx):
    """Classic TF1 asynchronous between-graph replication through tf.compat.v1."""
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    server = ctx.start_server()
    cluster = tf.train.ClusterSpec(ctx.cluster_spec)
    worker_device = f"/job:{ctx.job_name}/task:{ctx.task_index}"
    with v1.device(v1.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        global_step = v1.train.get_or_create_global_step()
        x = v1.placeholder(tf.float32, [None, 4])
        y = v1.placeholder(tf.float32, [None, 1])
        w = v1.get_variable("w", [4, 1], initializer=v1.zeros_initializer())
        b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        train_op = v1.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
        with tf.control_dependencies([train_op]):
            step_after = global_step.read_value()  # the step this update produced
    xs, ys = _data(seed=ctx.task_index + 1)
    config = v1.ConfigProto(device_filters=["/job:ps", worker_device])
    hooks = [v1.train.StopAtStepHook(last_step=args["steps"])]
    my_steps = 0
    if ctx.is_chief:
        creator = v1.train.ChiefSessionCreator(master=server.target, config=config)
    else:
        creator = tf1.worker_session_creator(master=server.target, config=config)
    with v1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        while not sess.should_stop():
            i = (my_steps * 32) % 480
            step, value = sess.run([step_after, loss], {x: xs[i : i + 32], y: ys[i : i + 32]})
            my_steps += 1
    return {
        "global_step": int(step),
        "my_steps": my_steps,
        "loss": float(value),
        "w_device": w.device,
    }


def _default(func, name):
    """The default a call of ``func`` gets for ``name`` (Supervisor's ``__init__`` is wrapped by
    a deprecation notice whose ``inspect.signature`` is fixed when TensorFlow loads)."""
    func = inspect.unwrap(func)
    code, defaults = func.__code__, func.__defaults__ or ()
    names = code.co_varnames[: code.co_argcount]
    return dict(zip(names[len(names) - len(defaults) :], defaults))[name]


def seed_style_tf1_late_worker(args, ctx):
    """The classic TF1 between-graph program as the seed documents write it: the node builds
    its own tf.compat.v1.train.Server, no device filters, MonitoredTrainingSession with
    StopAtStepHook. worker:0 starts its session args["late"] seconds after the others."""
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec(ctx.cluster_spec)
    server = v1.train.Server(cluster, job_name=ctx.job_name, task_index=ctx.task_index)
    with v1.device(
        v1.train.replica_device_setter(
            worker_device=f"/job:{ctx.job_name}/task:{ctx.task_index}", cluster=cluster
        )
    ):
        global_step = v1.train.get_or_create_global_step()
        w = v1.get_variable("w", [1], initializer=v1.zeros_initializer())
        train_op = v1.assign_add(global_step, 1)
        with tf.control_dependencies([train_op]):
            step_op = v1.assign_add(w, [0.5])
    if ctx.job_name == "worker":
        time.sleep(args["late"])
    steps = 0
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=ctx.is_chief,
        hooks=[v1.train.StopAtStepHook(last_step=args["steps"])],
    ) as sess:
        while not sess.should_stop():
            sess.run(step_op)
            steps += 1
    waits = [
        _default(cls.__init__, "recovery_wait_secs")
        for cls in (v1.train.SessionManager, v1.train.Supervisor)
    ]
    return {"my_steps": steps, "recovery_wait_secs": waits[0], "supervisor_wait_secs": waits[1]}


def _tf1_linear():
    """A TF1 graph of y = x . w over two features: placeholders, ``w``, the global step and
    the squared loss (in the caller's device scope)."""
    import tensorflow as tf

    v1 = tf.compat.v1
    x = v1.placeholder(tf.float32, [None, 2])
    y = v1.placeholder(tf.float32, [None])
    w = v1.get_variable("w", [2], initializer=v1.zeros_initializer())
    global_step = v1.train.get_or_create_global_step()
    return x, y, w, global_step, tf.reduce_mean(tf.square(tf.reduce_sum(x * w, 1) - y))


def sync_replicas_tf1(args, ctx):
    """Classic synchronous between-graph training as TF1 wrote it: its own
    tf.compat.v1.train.Server from TF_CONFIG, ``SyncReplicasOptimizer`` aggregating one
    gradient from each of the chief and worker per step, its session hook, StopAtStepHook and
    MonitoredTrainingSession's default ``stop_grace_period_secs``. worker:0 starts
    ``args["late"]`` seconds after the chief; with ``args["raise_after"]`` it raises that
    many seconds into training. Learns y = 2 x0 - x1."""
    import json

    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    tf_config = json.loads(os.environ["TF_CONFIG"])
    cluster = v1.train.ClusterSpec(tf_config["cluster"])
    job, index = tf_config["task"]["type"], tf_config["task"]["index"]
    server = v1.train.Server(cluster, job_name=job, task_index=index)
    replicas = len(cluster.as_dict().get("chief", [])) + len(cluster.as_dict().get("worker", []))
    if job == "worker":
        time.sleep(args["late"])
    with v1.device(
        v1.train.replica_device_setter(worker_device=f"/job:{job}/task:{index}", cluster=cluster)
    ):
        x, y, w, global_step, loss = _tf1_linear()
        opt = v1.train.SyncReplicasOptimizer(
            v1.train.GradientDescentOptimizer(0.3),
            replicas_to_aggregate=replicas,
            total_num_replicas=replicas,
        )
        train_op = opt.minimize(loss, global_step=global_step)
    is_chief = job == "chief"
    hooks = [opt.make_session_run_hook(is_chief), v1.train.StopAtStepHook(last_step=args["steps"])]
    rng = np.random.RandomState(index)
    step, weights, local, started = 0, None, 0, time.monotonic()
    with v1.train.MonitoredTrainingSession(
        master=server.target, is_chief=is_chief, hooks=hooks
    ) as sess:
        while not sess.should_stop():
            local += 1
            if job == "worker" and local > args.get("worker_steps", local):
                break  # a user's bug: this worker stops early, the chief waits for it
            if job == "worker" and time.monotonic() - started > args.get("raise_after", 1e9):
                raise ValueError(f"worker:0 fails at step {step}")
            xs = rng.rand(32, 2).astype("float32")
            _, step, weights = sess.run(
                [train_op, global_step, w], {x: xs, y: 2 * xs[:, 0] - xs[:, 1]}
            )
    return {
        "step": int(step),
        "w": [float(v) for v in weights],
        "stop_grace": _default(v1.train.MonitoredTrainingSession, "stop_grace_period_secs"),
    }


def sidecar_evaluator(args, ctx):
    """An evaluator written as TensorFlow's ParameterServerStrategy guide writes it: tf-keras'
    ``SidecarEvaluator`` with ``max_evaluations=None`` ("runs indefinitely"), following the
    checkpoints the chief's ``ModelCheckpoint`` writes to ``args["dir"]``. The chief trains
    ``args["epochs"]`` epochs, one checkpoint each, and returns its final model's loss;
    workers return at once. The evaluator returns how many checkpoints it evaluated and the
    last one's loss."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    def model():
        m = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
        return m

    x, y = _data()
    if ctx.job_name == "evaluator":
        evaluated = []

        class Seen(keras.callbacks.Callback):
            def on_test_end(self, logs=None):
                evaluated.append(float(logs["loss"]))

        m = model()
        keras.utils.SidecarEvaluator(
            m,
            tf.data.Dataset.from_tensor_slices((x, y)).batch(64),
            args["dir"],
            max_evaluations=None,
            callbacks=[Seen()],
        ).start()
        return {"evaluations": len(evaluated), "last_loss": evaluated[-1] if evaluated else None}
    if not ctx.is_chief:
        return None
    m = model()
    save = keras.callbacks.ModelCheckpoint(
        os.path.join(args["dir"], "ckpt-{epoch}"), save_weights_only=True
    )
    m.fit(x, y, batch_size=32, epochs=args["epochs"], callbacks=[save], verbose=0)
    return {"final_loss": float(m.evaluate(x, y, batch_size=64, verbose=0))}


def beside_an_idle_evaluator(args, ctx):
    """``args["job"]`` (a main_fn, given ``args``) on the training nodes; the
    evaluator runs no TensorFlow at all and returns the jobs of its TF_CONFIG's cluster."""
    import json

    if ctx.job_name == "evaluator":
        return sorted(json.loads(os.environ["TF_CONFIG"])["cluster"])
    return args["job"](args, ctx)


def tfos_style_tf1(args, ctx):
    """A main_fn as TensorFlowOnSpark's examples write theirs: ``ctx.worker_num``,
    ``ctx.start_cluster_server(1, rdma)``, ``TFNode.DataFeed(ctx.mgr, False)`` (its Keras
    example's call, False while training), a ps branch that joins, ``replica_device_setter``
    over the returned ClusterSpec, a ``MonitoredTrainingSession`` whose checkpoint_dir is
    ``TFNode.hdfs_path(ctx, relative)``, fed by ``next_batch`` of (features, label) tuples,
    and ``terminate()`` at the last step. It learns y = 2 x0 - x1."""
    import numpy as np
    import tensorflow as tf

    from sparktf import TFNode

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    worker_num, job_name, task_index = ctx.worker_num, ctx.job_name, ctx.task_index
    ctx.release_port()
    cluster, server = ctx.start_cluster_server(1, False)
    tf_feed = TFNode.DataFeed(ctx.mgr, False)
    if job_name == "ps":
        server.join()  # TFoS's ps branch: sparktf runs no main_fn on a ps, so never reached
        return None
    with v1.device(
        v1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{task_index}", cluster=cluster
        )
    ):
        x, y, w, global_step, loss = _tf1_linear()
        train_op = v1.train.GradientDescentOptimizer(0.2).minimize(loss, global_step=global_step)
    logdir = TFNode.hdfs_path(ctx, args["model"])
    step, weights = 0, None
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=(task_index == 0),
        checkpoint_dir=logdir,
        hooks=[v1.train.StopAtStepHook(last_step=args["steps"])],
    ) as sess:
        while not sess.should_stop() and not tf_feed.should_stop():
            batch = tf_feed.next_batch(args["batch_size"])
            if len(batch) > 0:  # empty at an epoch's end
                xs = np.array([row[0] for row in batch], "float32")
                ys = np.array([row[1] for row in batch], "float32")
                _, step, weights = sess.run([train_op, global_step, w], {x: xs, y: ys})
                if step >= args["steps"]:
                    tf_feed.terminate()
    return {
        "worker_num": worker_num,
        "executor_id": ctx.executor_id,
        "job": job_name,
        "defaultFS": ctx.defaultFS,
        "working_dir": ctx.working_dir,
        "logdir": logdir,
        "step": int(step),
        "w": [float(v) for v in weights],
    }


def keras3_under_mwms(args, ctx):
    """model.fit of a Keras 3 model (``import keras``) under MultiWorkerMirroredStrategy,
    which TensorFlow 2.21's Keras 3 cannot do (tf_keras can: see mwms_keras)."""
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
    x, y = _data(128)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)


def keras3_under_pss(args, ctx):
    """Keras 3's model.fit under ParameterServerStrategy (the chief coordinates, the workers
    serve), which TensorFlow 2.21's Keras 3 cannot do either (tf_keras can: ps_strategy_keras)."""
    if ctx.job_name == "worker":
        return ctx.serve()
    import keras
    import tensorflow as tf

    strategy = tf.distribute.ParameterServerStrategy(ctx.cluster_resolver())
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
    x, y = _data(128)
    model.fit(
        tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32),
        epochs=1,
        steps_per_epoch=2,
        verbose=0,
    )
