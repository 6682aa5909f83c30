"""The main job (``mnist.py``) with one more node: an evaluator that scores each new checkpoint
of the chief on the held-out digits while training runs.

``spark-submit --master local[3] examples/mnist_evaluator.py --model-dir /tmp/mnist/model``

The chief and workers run ``mnist.main_fn`` unchanged; the evaluator node (``eval_node=True``)
follows ``--model-dir`` (a temporary directory if not given) until training is done, prints
each checkpoint's accuracy and writes it to TensorBoard under ``--log-dir``.
"""

import os
import sys
import tempfile
import time

import mnist
import mnist_helpers as helpers

import sparktf.fs


def main_fn(args, ctx):
    if ctx.job_name != "evaluator":
        return mnist.main_fn(args, ctx)
    tf, keras = helpers.keras_modules()
    model = helpers.build_model(keras)
    x_test, y_test = args.test
    writer = (
        tf.summary.create_file_writer(os.path.join(ctx.log_dir, "evaluator"))
        if ctx.log_dir
        else None
    )
    seen = []
    # --model-dir may be on HDFS: follow a local mirror that fetches new checkpoints every second.
    with sparktf.fs.SyncedDir(args.model_dir, direction="down", interval=1) as model_dir:
        evaluate(tf, model, x_test, y_test, model_dir, ctx, writer, seen)
    return {"evaluated": seen}


def evaluate(tf, model, x_test, y_test, model_dir, ctx, writer, seen):
    for path in tf.train.checkpoints_iterator(
        model_dir, min_interval_secs=1, timeout=2, timeout_fn=ctx.training_done
    ):
        # A checkpoint can be replaced while we read it (max_to_keep): skip it then.
        try:
            tf.train.Checkpoint(model=model).restore(path).expect_partial()
        except (tf.errors.NotFoundError, ValueError):
            continue
        _, acc = model.evaluate(x_test, y_test, batch_size=250, verbose=0)
        seen.append((os.path.basename(path), float(acc)))
        print(f"{ctx.name}: {os.path.basename(path)} test_accuracy={acc:.4f}", flush=True)
        if writer:
            with writer.as_default():
                tf.summary.scalar("test_accuracy", acc, step=int(path.rsplit("-", 1)[1]))


def main(argv=None):
    import sparktf

    args = helpers.finish(helpers.parser(__doc__).parse_args(argv))
    args.model_dir = args.model_dir or tempfile.mkdtemp(prefix="mnist-model-")
    spark = helpers.start_spark("sparktf-mnist-evaluator", mnist)
    started = time.time()
    sparktf.warm_up(spark)  # the daemon imports TensorFlow while the driver loads data
    train_df, args.test, train_size = helpers.load_on_driver(spark, args)
    print(
        f"mnist: mirrored with an evaluator, input mode spark, {train_size} training and "
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
        eval_node=True,
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
