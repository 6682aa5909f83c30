"""Keras 3 (TensorFlow 2.21's default Keras: ``import keras``, TF_USE_LEGACY_KERAS unset) under
each way of training on sparktf nodes (local[4], real TF processes): one test a row of the
Keras 3 table in docs/compatibility.md.

- what works: custom training loops under MultiWorkerMirroredStrategy (over generated data
  and over the DataFeed's tf.data dataset of InputMode.SPARK), ParameterServerStrategy with
  a ClusterCoordinator loop, and ``model.fit`` on a single node (with ctx.keras_callback());
- what TensorFlow/Keras cannot do: ``model.fit`` under MultiWorkerMirroredStrategy or
  ParameterServerStrategy. The node's error keeps TensorFlow's words and says to use tf-keras.

Each main_fn clears TF_USE_LEGACY_KERAS (another test's node may have set it in a reused
worker) and checks that it really has Keras 3.
"""

import os
import sys

import cloudpickle
import pytest
from helpers import tf_jobs
from helpers.procs import TF_ENV

import sparktf

pytestmark = [pytest.mark.tf, pytest.mark.slow, pytest.mark.usefixtures("no_leaks")]

# The executors cannot import this module: its main_fn's travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _keras3():
    os.environ.pop("TF_USE_LEGACY_KERAS", None)
    import keras
    import tensorflow as tf

    assert keras.__version__.startswith("3."), keras.__version__
    return tf, keras


def _linear(keras):
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])


def _kernel(model):
    return [float(v) for v in model.get_weights()[0].ravel()]


# --------------------------------------------------------------------------- main_fn's
def mwms_fit(args, ctx):
    tf, keras = _keras3()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = _linear(keras)
        model.compile(keras.optimizers.SGD(0.05), "mse")
    x, y = tf_jobs._data(128)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)


def pss_fit(args, ctx):
    if ctx.job_name == "worker":
        return ctx.serve()
    tf, keras = _keras3()
    strategy = tf.distribute.ParameterServerStrategy(ctx.cluster_resolver())
    with strategy.scope():
        model = _linear(keras)
        model.compile(keras.optimizers.SGD(0.05), "mse")
    x, y = tf_jobs._data(128)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)
    model.fit(data, epochs=1, steps_per_epoch=2, verbose=0)


def mwms_custom_loop(args, ctx):
    """A custom training loop under MultiWorkerMirroredStrategy: Keras 3's model and
    optimizer, TensorFlow's strategy.run; Keras 3's optimizer all-reduces the gradients.
    The batches come from the DataFeed (``args["feed"]``) or from generated data."""
    tf, keras = _keras3()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = _linear(keras)
        optimizer = keras.optimizers.SGD(0.05)
        optimizer.build(model.trainable_variables)  # not inside the replica function
    if args["feed"]:
        feed = ctx.get_data_feed()
        data = feed.to_dataset(args["batch"]).map(lambda b: (b["x"], b["y"]))
    else:
        x, y = tf_jobs._data(args["batch"] * args["steps"], seed=ctx.task_index)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(args["batch"])
    global_batch = args["batch"] * strategy.num_replicas_in_sync

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            error = model(x, training=True) - tf.reshape(y, (-1, 1))
            loss = tf.nn.compute_average_loss(
                tf.square(error[:, 0]), global_batch_size=global_batch
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def step(x, y):
        return strategy.reduce("SUM", strategy.run(replica_step, args=(x, y)), axis=None)

    losses = []
    for _ in range(args["epochs"]):
        losses.append([float(step(x, y)) for x, y in data])
    return {
        "keras": keras.__version__,
        "num_replicas": strategy.num_replicas_in_sync,
        "first": sum(losses[0]) / len(losses[0]),
        "last": sum(losses[-1]) / len(losses[-1]),
        "steps": [len(e) for e in losses],
        "kernel": _kernel(model),
    }


def pss_custom_loop(args, ctx):
    """ParameterServerStrategy as TensorFlow's guide writes its custom loop: the chief
    schedules steps on the workers with a ClusterCoordinator, variables on the ps."""
    if ctx.job_name == "worker":
        return ctx.serve()
    tf, keras = _keras3()
    strategy = tf.distribute.ParameterServerStrategy(ctx.cluster_resolver())
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = _linear(keras)
        optimizer = keras.optimizers.SGD(0.05)
        optimizer.build(model.trainable_variables)

    def dataset_fn():
        x, y = tf_jobs._data()
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).repeat().batch(32)

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def step(iterator):
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        x, y = next(iterator)
        return strategy.run(replica_step, args=(x, y))

    losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(args["steps"])]
    coordinator.join()
    values = [float(v.fetch()) for v in losses]
    return {
        "keras": keras.__version__,
        "first": sum(values[:5]) / 5,
        "last": sum(values[-5:]) / 5,
        "variable_devices": sorted({v.value.device for v in model.trainable_variables}),
        "kernel": _kernel(model),
    }


def single_node_fit_on_feed(args, ctx):
    """Keras 3 model.fit on one node, no strategy, over the DataFeed's tf.data dataset, with
    ctx.keras_callback() reporting to the driver."""
    tf, keras = _keras3()
    model = _linear(keras)
    model.compile(keras.optimizers.SGD(0.05), "mse")
    feed = ctx.get_data_feed()
    data = feed.to_dataset(args["batch"]).map(lambda b: (b["x"], b["y"]))
    hist = model.fit(data, epochs=args["epochs"], verbose=0, callbacks=[ctx.keras_callback()])
    return {"keras": keras.__version__, "loss": hist.history["loss"], "kernel": _kernel(model)}


# ------------------------------------------------------------------------------- tests
def _frame(sc, rows_per_node=256, nodes=2):
    """y = x . [1, 2, 3, 4] + 0.5 as a DataFrame of ``x array<float>, y float``, in one
    partition per node."""
    from pyspark.sql import SparkSession

    x, y = tf_jobs._data(rows_per_node * nodes)
    rows = [(x[i].tolist(), float(y[i, 0])) for i in range(len(x))]
    return SparkSession(sc).createDataFrame(rows, "x array<float>, y float").repartition(nodes)


@pytest.mark.parametrize(
    "job, num_ps, strategy, theirs",
    [
        (mwms_fit, 0, "MultiWorkerMirroredStrategy", "PerReplica"),
        (pss_fit, 1, "ParameterServerStrategy", "create_per_worker_dataset"),
    ],
    ids=["mwms", "pss"],
)
def test_keras3_model_fit_under_a_multi_worker_strategy_fails_saying_to_use_tf_keras(
    sc_local, job, num_ps, strategy, theirs
):
    cluster = sparktf.run(sc_local, job, None, num_executors=2 + num_ps, num_ps=num_ps, env=TF_ENV)
    with pytest.raises(sparktf.NodeError) as err:
        cluster.shutdown(timeout=180)
    assert theirs in str(err.value)  # TensorFlow's own words, kept
    assert f"Keras 3 cannot train under {strategy}" in str(err.value)
    assert "import tf_keras as keras" in str(err.value)
    assert "TF_USE_LEGACY_KERAS" in str(err.value)


def test_keras3_custom_training_loop_under_mwms_trains_in_sync(sc_local):
    args = {"feed": False, "batch": 32, "steps": 16, "epochs": 3}
    cluster = sparktf.run(sc_local, mwms_custom_loop, args, num_executors=2, env=TF_ENV)
    chief = cluster.shutdown(timeout=300)
    worker = cluster.results["worker:0"]
    assert chief["num_replicas"] == 2 and chief["keras"].startswith("3.")
    assert chief["last"] < 0.1 * chief["first"]
    assert chief["kernel"] == pytest.approx(tf_jobs.TRUE_W, abs=0.3)
    assert worker["kernel"] == pytest.approx(chief["kernel"], abs=1e-5)  # all-reduced


def test_keras3_custom_loop_under_mwms_over_the_spark_feed_trains_in_sync(sc_local):
    cluster = sparktf.run(
        sc_local,
        mwms_custom_loop,
        {"feed": True, "batch": 32, "epochs": 3},
        num_executors=2,
        input_mode=sparktf.InputMode.SPARK,
        env=TF_ENV,
    )
    cluster.train(_frame(sc_local), num_epochs=3)
    chief = cluster.shutdown(timeout=300)
    worker = cluster.results["worker:0"]
    assert chief["num_replicas"] == 2
    assert chief["steps"] == worker["steps"] and chief["steps"][0] > 0  # equalized feed
    assert chief["last"] < 0.1 * chief["first"]
    assert worker["kernel"] == pytest.approx(chief["kernel"], abs=1e-5)


def test_keras3_custom_loop_under_parameter_server_strategy_trains_on_the_ps(sc_local):
    cluster = sparktf.run(
        sc_local, pss_custom_loop, {"steps": 60}, num_executors=3, num_ps=1, env=TF_ENV
    )
    chief = cluster.shutdown(timeout=300)
    assert chief["keras"].startswith("3.")
    assert chief["variable_devices"] == ["/job:ps/replica:0/task:0/device:CPU:0"]
    assert chief["last"] < 0.2 * chief["first"]


def test_keras3_model_fit_on_a_single_node_over_the_spark_feed_trains(sc_local):
    cluster = sparktf.run(
        sc_local,
        single_node_fit_on_feed,
        {"batch": 32, "epochs": 4},
        num_executors=1,
        input_mode=sparktf.InputMode.SPARK,
        env=TF_ENV,
    )
    cluster.train(_frame(sc_local, nodes=1), num_epochs=4)
    chief = cluster.shutdown(timeout=300)
    assert chief["keras"].startswith("3.")
    assert chief["loss"][-1] < 0.1 * chief["loss"][0]
    assert chief["kernel"] == pytest.approx(tf_jobs.TRUE_W, abs=0.3)
    reported = cluster.progress()["chief:0"]  # what ctx.keras_callback() sent
    assert reported["step"] > 0 and reported["metrics"]["epoch_done"] == 4
    assert reported["metrics"]["loss"] == pytest.approx(chief["loss"][-1], rel=1e-3)
