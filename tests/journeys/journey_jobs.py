"""main_fn's of the journey tests; the test modules ship them to the nodes by value
(``cloudpickle.register_pickle_by_value``): the executors cannot import the tests' modules."""

import glob
import os
import time


def _save(path, array):
    """Write a numpy array so that a reader never sees half of it."""
    import numpy as np

    with open(path + ".tmp", "wb") as f:
        np.save(f, array)
    os.replace(path + ".tmp", path)


def fit_line_share(args, ctx):
    """Least squares of ``y`` on ``x`` (a DataFrame's columns) over this node's share, every
    epoch: the node writes its sums (X'X, X'y) to ``args["model_dir"]/part-<rank>.npy``, which
    ``predict_line`` adds up: the model is the line through every row the cluster was fed."""
    import numpy as np

    feed = ctx.get_data_feed(train_mode=True)
    xtx, xty = np.zeros((2, 2)), np.zeros(2)
    rows = {}
    while not feed.should_stop():
        epoch = feed.epoch
        batch = feed.next_batch(args.get("batch", 16))
        x = np.asarray(batch["x"], "float64")
        design = np.stack([x, np.ones_like(x)], axis=1)
        xtx += design.T @ design
        xty += design.T @ np.asarray(batch["y"], "float64")
        rows[epoch] = rows.get(epoch, 0) + len(x)
    os.makedirs(args["model_dir"], exist_ok=True)
    _save(
        os.path.join(args["model_dir"], f"part-{ctx.rank}.npy"), np.concatenate([xtx.ravel(), xty])
    )
    return {
        "rows_per_epoch": [rows[e] for e in sorted(rows)],
        "num_cpus": ctx.num_cpus,
        "host": ctx.host,
    }


def load_line(model_dir):
    """(slope, intercept) from every node's sums in ``model_dir``."""
    import numpy as np

    parts = [np.load(p) for p in sorted(glob.glob(os.path.join(model_dir, "part-*.npy")))]
    total = sum(parts)
    slope, intercept = np.linalg.solve(total[:4].reshape(2, 2), total[4:])
    return float(slope), float(intercept)


def predict_line(args, ctx):
    """Inference with the line ``fit_line_share`` left in ``args["model_dir"]`` (or the
    ``args["line"]`` given): answers (id, prediction) for each row."""
    slope, intercept = args.get("line") or load_line(args["model_dir"])
    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 16))
        feed.batch_results({"id": batch["id"], "prediction": slope * batch["x"] + intercept})
    return {"slope": slope, "intercept": intercept}


def ids_slowly(args, ctx):
    """Read the feed in batches of ``args["batch"]``, sleeping ``args["delay"]`` after each;
    after the first batch, drop a file ``started-<rank>`` in ``args["dir"]`` (so a test knows
    the feed flows). Returns the ids it read, per epoch."""
    feed = ctx.get_data_feed(train_mode=True)
    epochs = []
    while not feed.should_stop():
        epoch = feed.epoch
        batch = feed.next_batch(args["batch"])
        ids = batch[args["col"]].tolist() if isinstance(batch, dict) else list(batch)
        while len(epochs) <= epoch:
            epochs.append([])
        epochs[epoch].extend(int(i) for i in ids)
        marker = os.path.join(args["dir"], f"started-{ctx.rank}")
        if not os.path.exists(marker):
            open(marker, "w").close()
        time.sleep(args["delay"])
    return {"epochs": epochs}


def double_slowly(args, ctx):
    """Inference answering 2 x per row, in batches of ``args["batch"]``, sleeping
    ``args["delay"]`` after each; drops ``started-<rank>`` in ``args["dir"]`` after the first."""
    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(args["batch"])
        feed.batch_results([2 * x for x in batch])
        marker = os.path.join(args["dir"], f"started-{ctx.rank}")
        if not os.path.exists(marker):
            open(marker, "w").close()
        time.sleep(args["delay"])


def tfos_linear(args, ctx):
    """A main_fun as TensorFlowOnSpark users write one, TF2 eager: ``TFNode.DataFeed(ctx.mgr,
    train_mode)``, ``next_batch`` of (features, label) tuples, ``ctx.worker_num``; training
    fits y = w x + b by gradient descent and the chief writes (w, b) to
    ``args["model_dir"]``; inference reads them and answers ``batch_results`` with w x + b."""
    import numpy as np
    import tensorflow as tf

    from sparktf import TFNode

    path = os.path.join(args["model_dir"], "weights.npy")
    if args["mode"] == "train":
        tf_feed = TFNode.DataFeed(ctx.mgr, True)
        w, b = tf.Variable(0.0), tf.Variable(0.0)
        opt = tf.optimizers.SGD(0.5)
        steps = 0
        while not tf_feed.should_stop():
            batch = tf_feed.next_batch(args["batch_size"])
            if len(batch) == 0:
                continue
            x = tf.constant([r[0] for r in batch], tf.float32)
            y = tf.constant([r[1] for r in batch], tf.float32)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((w * x + b - y) ** 2)
            opt.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b]))
            steps += 1
        if ctx.worker_num == 0:
            os.makedirs(args["model_dir"], exist_ok=True)
            _save(path, np.array([w.numpy(), b.numpy()]))
        return {"worker_num": ctx.worker_num, "steps": steps}
    weights = np.load(path)
    tf_feed = TFNode.DataFeed(ctx.mgr, False)
    while not tf_feed.should_stop():
        batch = tf_feed.next_batch(args["batch_size"])
        if len(batch) == 0:
            continue
        x = tf.constant([r[0] for r in batch], tf.float32)
        tf_feed.batch_results((weights[0] * x + weights[1]).numpy().tolist())
    return {"worker_num": ctx.worker_num}
