"""MNIST under TF2's ParameterServerStrategy: variables on the parameter servers, the chief
dispatches steps to the workers.

``spark-submit --master local[3] examples/mnist_ps.py`` (a chief, a worker and one ps; every
Spark task slot is a node unless ``--num-executors`` says otherwise)

The workers and parameter servers run no code of their own: a worker calls ``ctx.serve()``
and the chief's ``model.fit`` ships its ``dataset_fn`` to them, so the input pipeline runs
inside the workers' TensorFlow runtime and reads the files itself (InputMode.TENSORFLOW;
Spark cannot feed it). The chief evaluates and exports a plain copy of the model.
"""

import sys
import time

import mnist_helpers as helpers


def main_fn(args, ctx):
    if ctx.job_name == "worker":
        ctx.serve()  # until the job ends; the chief sends it the steps
        return None
    tf, keras = helpers.keras_modules()
    strategy = tf.distribute.experimental.ParameterServerStrategy(ctx.cluster_resolver())
    if args.data:
        x, y = helpers.local_shard(args.data.rstrip("/") + "/train", args.data_format, 0, 1)
    else:
        (x, y), _ = helpers.load_default(args.test_size, args.limit)
    with strategy.scope():
        model = helpers.build_model(keras, steps_per_execution=10)
    batch = args.batch_size

    def dataset_fn(input_context):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(
            input_context.num_input_pipelines, input_context.input_pipeline_id
        )
        return ds.shuffle(len(y)).batch(batch).repeat()

    with helpers.Checkpoints(tf, keras, model, args, ctx) as callbacks:
        model.fit(
            keras.utils.experimental.DatasetCreator(dataset_fn),
            epochs=args.epochs,
            initial_epoch=args.initial_epoch,
            steps_per_epoch=args.steps_per_epoch or max(1, len(y) // batch),
            callbacks=callbacks,
            verbose=2,
        )
    # Evaluate and export a plain copy on the chief, its weights read from the ps.
    plain = helpers.build_model(keras)
    plain.set_weights(model.get_weights())
    helpers.export(plain, ctx, args.export_dir)
    return {
        "test_accuracy": helpers.evaluate_copy(keras, plain, args.test),
        "export_dir": args.export_dir,
    }


def main(argv=None):
    import sparktf

    p = helpers.parser(__doc__)
    p.add_argument("--num-ps", type=int, default=1, help="parameter servers (default 1)")
    p.add_argument(
        "--steps-per-epoch",
        type=helpers.count,
        default=None,
        help="steps per epoch (default: one pass over the data)",
    )
    args = helpers.finish(p.parse_args(argv))
    if args.num_ps < 1:
        p.error("ParameterServerStrategy needs --num-ps >= 1")
    spark = helpers.start_spark("sparktf-mnist-ps")
    started = time.time()
    # InputMode.TENSORFLOW's barrier stage is an RDD stage: its daemon imports TensorFlow
    # while the driver loads the held-out digits.
    sparktf.warm_up(spark, dataframes=False, rdds=True)
    _, args.test, train_size = helpers.load_on_driver(spark, args, spark_input=False)
    print(
        f"mnist: ps, input mode tensorflow, {train_size} training and "
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
        num_ps=args.num_ps,
        num_executors=args.num_executors,
        tensorboard=args.tensorboard,
        log_dir=args.log_dir,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if args.tensorboard:
        print(f"mnist: TensorBoard at {cluster.tensorboard_url(timeout=60)}", flush=True)
    result = cluster.shutdown()
    return helpers.report(spark, args, cluster, result, started)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
