"""MNIST under TF2's ParameterServerStrategy: the variables live on the parameter servers, and
the chief sends training steps to the workers.

``spark-submit --master local[3] examples/mnist_ps.py`` (a chief, a worker and a ps: every
Spark task slot is a node unless ``--num-executors`` says otherwise)

The workers and parameter servers run no code of their own: a worker calls ``ctx.serve()``,
and the chief's ``model.fit`` ships its ``dataset_fn`` to them, so the input pipeline runs in
the workers' TensorFlow runtime (InputMode.TENSORFLOW; Spark cannot feed it). The digits reach
the chief in ``args`` (sparktf ships large args as a Spark broadcast), or the chief reads
``--data`` itself.
"""

import argparse
import os

import mnist_data

import sparktf


# ---------------------------------------------------------------------------------- model
def build_model(keras, **compile_kw):
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
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(keras.optimizers.Adam(1e-3), loss, metrics=["accuracy"], **compile_kw)
    return model


# ------------------------------------------------------------ main_fn: every node, the ps too
def main_fn(args, ctx):
    if ctx.job_name == "worker":
        ctx.serve()  # until the job ends: the chief sends it the steps
        return None
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # the Keras of ParameterServerStrategy's fit
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.experimental.ParameterServerStrategy(ctx.cluster_resolver())
    if args.data:
        x, y = mnist_data.read_files(sparktf.fs.list_files(args.data.rstrip("/") + "/train"))
    else:
        x, y = args.train
    with strategy.scope():
        model = build_model(keras, steps_per_execution=10)

    def dataset_fn(input_context):  # runs on each worker
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return ds.shuffle(len(y)).batch(args.batch_size).repeat()

    model.fit(
        keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch or len(y) // args.batch_size,
        verbose=2,
    )
    # A plain copy on the chief, its weights read from the parameter servers, scores.
    plain = build_model(keras)
    plain.set_weights(model.get_weights())
    return {"test_accuracy": float(plain.evaluate(*args.test, batch_size=250, verbose=0)[1])}


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="train/ and test/ as mnist_data_setup.py writes them")
    p.add_argument("--num-executors", type=int, help="nodes, the ps too (default: every slot)")
    p.add_argument("--num-ps", type=int, default=1, help="parameter servers")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--steps-per-epoch", type=int, help="default: one pass over the data")
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)
    if args.num_ps < 1:
        p.error("ParameterServerStrategy needs --num-ps >= 1")

    spark = sparktf.spark_session(
        "sparktf-mnist-ps",
        py_files=[mnist_data.__file__],  # for the executors and the nodes
        preload=("tensorflow", "tf_keras"),  # imported once per executor, before the fork
        warm_up="rdds",  # InputMode.TENSORFLOW's barrier stage is an RDD stage
    )
    if args.data:
        test = mnist_data.read_dataframe(spark, args.data.rstrip("/") + "/test")
        args.train, args.test = None, mnist_data.to_numpy(test)
    else:
        args.train, args.test = mnist_data.load_default()
    print(f"mnist: ps, input mode tensorflow, {len(args.test[1])} held-out images")

    cluster = sparktf.run(
        spark,
        main_fn,
        args,
        num_ps=args.num_ps,
        num_executors=args.num_executors,
        input_mode=sparktf.InputMode.TENSORFLOW,
    )
    result = cluster.shutdown()  # the chief's main_fn's value; sparktf stops the ps
    print(f"test_accuracy={result['test_accuracy']:.4f}")
    return result


if __name__ == "__main__":
    main()
