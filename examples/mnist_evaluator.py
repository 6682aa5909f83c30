"""MNIST with an evaluator node: it scores each new checkpoint of the chief on the held-out
digits while training runs.

``spark-submit --master local[3] examples/mnist_evaluator.py --model-dir /tmp/mnist/model``

The chief and the worker train as ``mnist.py`` does (InputMode.SPARK,
MultiWorkerMirroredStrategy) and save a checkpoint to ``--model-dir`` after every epoch (local
or Hadoop; ``mnist.py --model-dir`` resumes from them). The evaluator (``eval_node=True``)
follows that directory until training is done and prints each checkpoint's accuracy.
"""

import argparse
import operator
import os
import tempfile

import mnist_data

import sparktf


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


# ----------------------------------------------------- main_fn: chief, worker and evaluator
def main_fn(args, ctx):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored
    import tensorflow as tf
    import tf_keras as keras

    if ctx.job_name == "evaluator":
        return {"evaluated": evaluate(tf, build_model(keras), args, ctx)}
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = build_model(keras)
    feed = ctx.get_data_feed(train_mode=True)
    train = feed.to_dataset(args.batch_size).map(operator.itemgetter("image", "label"))
    # TensorFlow cannot write hdfs://: a local mirror of --model-dir, copied up after every
    # epoch. Every node must save; only the chief's copy is kept.
    mirror = sparktf.fs.SyncedDir(args.model_dir)
    with mirror as local:
        ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        own = local if ctx.is_chief else tempfile.mkdtemp()
        manager = tf.train.CheckpointManager(ckpt, own, max_to_keep=3)

        class Save(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                manager.save(checkpoint_number=epoch + 1)
                if ctx.is_chief:
                    mirror.sync()

        model.fit(
            train,
            epochs=args.epochs,
            callbacks=[Save(), ctx.keras_callback()],
            verbose=2 if ctx.is_chief else 0,
        )
    return {"steps": int(model.optimizer.iterations.numpy())}


def evaluate(tf, model, args, ctx):
    """Score every new checkpoint in --model-dir until the chief and workers are done."""
    seen = []
    with sparktf.fs.SyncedDir(args.model_dir, direction="down", interval=1) as model_dir:
        for path in tf.train.checkpoints_iterator(
            model_dir, min_interval_secs=1, timeout=2, timeout_fn=ctx.training_done
        ):
            try:  # a checkpoint can be replaced while we read it (max_to_keep): skip it then
                tf.train.Checkpoint(model=model).restore(path).expect_partial()
            except (tf.errors.NotFoundError, ValueError):
                continue
            _, accuracy = model.evaluate(*args.test, batch_size=250, verbose=0)
            seen.append((os.path.basename(path), float(accuracy)))
            print(f"{ctx.name}: {seen[-1][0]} test_accuracy={accuracy:.4f}", flush=True)
    return seen


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", help="checkpoints (default: a temporary directory)")
    p.add_argument("--num-executors", type=int, help="nodes, the evaluator too (default: all)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64, help="global batch size")
    p.add_argument("--limit", type=int, help="train on the first N digits only")
    args = p.parse_args(argv)
    args.model_dir = args.model_dir or tempfile.mkdtemp(prefix="mnist-model-")
    if "://" not in args.model_dir:
        args.model_dir = os.path.abspath(args.model_dir)

    spark = sparktf.spark_session(
        "sparktf-mnist-evaluator",
        py_files=[mnist_data.__file__],  # for the executors and the nodes
        preload=("tensorflow", "tf_keras"),  # imported once per executor, before the fork
    )
    (x, y), args.test = mnist_data.load_default(limit=args.limit)
    train_df = sparktf.from_numpy(spark, {"image": x, "label": y}).cache()
    print(f"mnist: mirrored with an evaluator, {len(y)} training images, {args.model_dir}")

    cluster = sparktf.run(
        spark,
        main_fn,
        args,
        eval_node=True,
        num_executors=args.num_executors,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(train_df, num_epochs=args.epochs, shuffle=True)
    cluster.shutdown()
    scores = cluster.results["evaluator:0"]["evaluated"]
    print(f"test_accuracy={scores[-1][1]:.4f}" if scores else "the evaluator saw no checkpoint")
    return scores


if __name__ == "__main__":
    main()
