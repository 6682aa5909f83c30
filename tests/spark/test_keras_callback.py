"""``ctx.keras_callback()`` with whichever Keras the user's model uses, as the docs write it
(local[N], real TF processes).

- tf-keras (``import tf_keras as keras``, as the quickstart and the MultiWorkerMirroredStrategy
  guide write it) without ``TF_USE_LEGACY_KERAS``: every node failed with "'SparkTFProgress'
  object has no attribute '_implements_train_batch_hooks'" (the callback was a Keras 3 one);
- ParameterServerStrategy: tf-keras refuses batch-level callbacks there ("Batch-level
  Callbacks are not supported with ParameterServerStrategy"); the callback reports per epoch.

Keras 3's ``fit`` with the callback is tests/spark/test_keras3.py's
``test_keras3_model_fit_on_a_single_node_over_the_spark_feed_trains``.
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


def tf_keras_fit(args, ctx):
    """The quickstart's way: ``import tf_keras as keras``, TF_USE_LEGACY_KERAS unset (another
    test's node may have set it in a reused worker), the callback as progress.md shows it."""
    os.environ.pop("TF_USE_LEGACY_KERAS", None)
    import tensorflow as tf
    import tf_keras as keras

    model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    x, y = tf_jobs._data(256)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    callback = ctx.keras_callback(keras=args["keras"]) if args["keras"] else ctx.keras_callback()
    hist = model.fit(ds, epochs=3, verbose=0, callbacks=[callback])
    try:
        ctx.keras_callback(keras="tf")
    except sparktf.ConfigTypeError as e:
        refused = str(e)
    return {
        "loss": [float(v) for v in hist.history["loss"]],
        "subclass": isinstance(callback, keras.callbacks.Callback),
        "refused": refused,
    }


def ps_fit(args, ctx):
    """ParameterServerStrategy's chief: tf-keras model.fit over a DatasetCreator with the
    callback; the workers serve."""
    if ctx.job_name == "worker":
        return ctx.serve()
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.ParameterServerStrategy(ctx.cluster_resolver())
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")

    def dataset_fn(input_context):
        x, y = tf_jobs._data(256, seed=input_context.input_pipeline_id)
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).batch(32).repeat()

    hist = model.fit(
        keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=args["epochs"],
        steps_per_epoch=10,
        verbose=0,
        callbacks=[ctx.keras_callback()],
    )
    return {"loss": [float(v) for v in hist.history["loss"]]}


@pytest.mark.parametrize("keras", [None, "tf_keras"], ids=["default", "named"])
def test_the_keras_callback_reports_a_tf_keras_fit_without_TF_USE_LEGACY_KERAS(sc_local, keras):
    cluster = sparktf.run(sc_local, tf_keras_fit, {"keras": keras}, num_executors=1, env=TF_ENV)
    chief = cluster.shutdown(timeout=180)
    assert chief["loss"][-1] < 0.2 * chief["loss"][0]
    reported = cluster.progress()["chief:0"]  # what ctx.keras_callback() sent
    assert reported["step"] == 24 and reported["metrics"]["epoch_done"] == 3  # 8 batches/epoch
    assert reported["metrics"]["loss"] == pytest.approx(chief["loss"][-1], rel=1e-3)
    if keras:  # named: a tf-keras Callback itself
        assert chief["subclass"]
    assert chief["refused"].startswith("keras must be the Keras module your model is built with")
    assert "got 'tf'" in chief["refused"]


def test_the_keras_callback_reports_each_epoch_under_parameter_server_strategy(sc_local):
    cluster = sparktf.run(sc_local, ps_fit, {"epochs": 3}, num_executors=3, num_ps=1, env=TF_ENV)
    chief = cluster.shutdown(timeout=300)
    assert chief["loss"][-1] < chief["loss"][0]
    history = cluster.metrics()["chief:0"]  # one report an epoch, no batch's
    assert [p["values"]["epoch_done"] for p in history] == [1, 2, 3]
    assert [p["step"] for p in history] == [10, 20, 30]
    assert [p["values"]["loss"] for p in history] == pytest.approx(chief["loss"], rel=1e-3)
