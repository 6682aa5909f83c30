"""main_fn's for the Spark ML Pipeline tests (sparktf.ml); shipped to the nodes by value."""


def mnist_dense(args, ctx):
    """A small dense net on the fed features; the chief exports a SavedModel whose serving
    signature takes ``features`` (float32 [N, 784]) and returns logits."""
    import os
    import shutil
    import tempfile

    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    import sparktf.fs

    (x_col,), y_col = args.input_cols, args.label_col
    strategy = (
        tf.distribute.MultiWorkerMirroredStrategy()
        if ctx.num_workers > 1
        else tf.distribute.get_strategy()
    )
    with strategy.scope():
        keras.utils.set_random_seed(args.args["seed"])
        inputs = keras.Input(shape=(784,), name="features")
        hidden = keras.layers.Dense(64, activation="relu")(keras.layers.Rescaling(1 / 255)(inputs))
        model = keras.Model(inputs, keras.layers.Dense(10)(hidden))
        model.compile(
            optimizer=keras.optimizers.Adam(2e-3),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    feed = ctx.get_data_feed(train_mode=True)
    data = feed.to_dataset(args.batch_size).map(lambda b: (b[x_col], b[y_col]))
    model.fit(data, epochs=args.epochs, verbose=0, callbacks=[ctx.keras_callback()])
    if ctx.is_chief:
        with sparktf.fs.export_dir(args.export_dir) as local:
            model.save(local)
    else:  # every MultiWorkerMirrored node saves; only the chief's copy is kept
        scratch = tempfile.mkdtemp()
        model.save(scratch)
        shutil.rmtree(scratch, ignore_errors=True)
    return {"steps": int(model.optimizer.iterations.numpy())}


def reads_but_exports_nothing(args, ctx):
    """Trains on nothing and forgets to export: reads its feed to the end, returns."""
    feed = ctx.get_data_feed()
    while not feed.should_stop():
        feed.next_batch(args.batch_size)
    return "no export"


def tiny_linear(args, ctx):
    """One dense unit on the fed ``features`` (float32 [N, 3]) trained by plain SGD on one
    node, so that its weights depend on the params (the batch size sets the steps); the chief
    exports a SavedModel to ``args.export_dir``."""
    import os

    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tf_keras as keras

    import sparktf.fs

    (x_col,), y_col = args.input_cols, args.label_col
    keras.utils.set_random_seed(args.args["seed"])
    inputs = keras.Input(shape=(3,), name="features")
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    feed = ctx.get_data_feed(train_mode=True)
    data = feed.to_dataset(args.batch_size).map(lambda b: (b[x_col], b[y_col]))
    model.fit(data, epochs=args.epochs, verbose=0)
    if ctx.is_chief:
        with sparktf.fs.export_dir(args.export_dir) as local:
            model.save(local)
    return {"export_dir": args.export_dir}
