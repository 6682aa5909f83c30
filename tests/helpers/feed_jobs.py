"""main_fn's for InputMode.SPARK tests; shipped to nodes by value."""

import glob
import os
import time


def sum_ids(args, ctx):
    """Read every batch; return the sum and count of ids, and how many batches it took."""
    feed = ctx.get_data_feed(train_mode=True)
    total = rows = batches = 0
    per_epoch = []
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 32))
        ids = (
            batch[args["col"]]
            if isinstance(batch, dict)
            else [e if isinstance(e, int) else e[0] for e in batch]
        )
        total += int(sum(ids))
        rows += len(ids)
        batches += 1
        per_epoch.append(len(ids))
    return {
        "sum": total,
        "rows": rows,
        "batches": batches,
        "held_back": feed.rows_held_back,
        "spool_dir": ctx.work_dir,
    }


def describe_batch(args, ctx):
    """The first batch of a DataFrame, described: column -> (dtype, shape, first value)."""
    feed = ctx.get_data_feed(input_mapping=args.get("mapping"))
    batch = feed.next_batch(4)
    out = {
        k: (str(v.dtype), v.shape, v[0].tolist() if hasattr(v[0], "tolist") else v[0])
        for k, v in batch.items()
    }
    feed.terminate()
    return out


def read_one_then_stop(args, ctx):
    feed = ctx.get_data_feed()
    first = feed.next_batch(10)
    feed.terminate()
    return {"rows": len(first), "stopped": feed.should_stop()}


def read_one_then_sleep(args, ctx):
    feed = ctx.get_data_feed(train_mode=ctx.train_mode)  # under train() or inference()
    feed.next_batch(1)
    time.sleep(args["sleep"])


def evaluator_asks_for_data(args, ctx):
    if ctx.job_name == "evaluator":
        try:
            ctx.get_data_feed()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "got a feed"
    return sum_ids({"col": "id"}, ctx)


def leftover_node_dirs(args, ctx):
    import tempfile

    return sorted(glob.glob(os.path.join(tempfile.gettempdir(), f"sparktf-{args}-*")))


def mwms_on_feed(args, ctx):
    """MultiWorkerMirroredStrategy + tf-keras fit over the feed's tf.data adapter."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = ctx.get_data_feed()
    ds = feed.to_dataset(args["batch"]).map(lambda b: (b["x"], b["y"]))
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    steps = []

    class CountSteps(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            steps.append(0)

        def on_train_batch_end(self, batch, logs=None):
            steps[-1] += 1

    hist = model.fit(ds, epochs=args["epochs"], verbose=0, callbacks=[CountSteps()])
    return {
        "loss": [float(v) for v in hist.history["loss"]],
        "held_back": feed.rows_held_back,
        "kernel": model.get_weights()[0].ravel().tolist(),
        "steps": steps,
        "rows_per_epoch": feed.rows_fed // args["epochs"],
    }


def infer_double(args, ctx):
    """Inference: one output per input row (RDD elements or a DataFrame's 'id')."""
    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 16))
        if isinstance(batch, dict):
            feed.batch_results((batch["id"] * 2).tolist())
        else:
            feed.batch_results([x * 2 for x in batch])
    return "inferred"


def infer_double_keeping_id(args, ctx):
    """Inference over a DataFrame's 'id': answers (id, 2 * id) per row, as a dict of columns."""
    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 16))
        feed.batch_results({"id": batch["id"], "doubled": batch["id"] * 2})
    return "inferred"


def score_as_the_guide_does(args, ctx):
    """docs/guides/input-modes.md's inference example as written: a Keras model's
    ``predict`` (shape (n, 1)) in a dict with the key column. The model is built here (the
    guide loads one; a Dense(1) of ones over 'x' predicts its sum)."""
    import tensorflow as tf

    model = tf.keras.Sequential(
        [tf.keras.Input((2,)), tf.keras.layers.Dense(1, kernel_initializer="ones")]
    )
    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(256)
        if len(batch["x"]):
            feed.batch_results(
                {
                    "id": batch["id"],
                    "prediction": model.predict(batch["x"], verbose=0),
                }
            )


def read_then_record_pids(args, ctx):
    """Take a batch (so the spool exists), record the pids above us, then wait to be killed."""
    import json

    feed = ctx.get_data_feed()
    feed.next_batch(8)
    with open(f"/proc/{os.getppid()}/stat") as f:
        task_worker = int(f.read().rsplit(")", 1)[1].split()[1])
    path = os.path.join(args["dir"], ctx.name.replace(":", "_") + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump({"task_worker": task_worker, "work_dir": ctx.work_dir}, f)
    os.replace(path + ".tmp", path)
    time.sleep(300)


def dataset_rows(args, ctx):
    """Count rows through the feed's tf.data adapter."""
    feed = ctx.get_data_feed()
    rows = 0
    for _, y in feed.to_dataset(args["batch"]):
        rows += int(y.shape[0])
    return rows


def answer_half_then_return(args, ctx):
    """Inference that answers only half of its first batch, then returns: short output."""
    feed = ctx.get_data_feed(train_mode=False)
    batch = feed.next_batch(10)
    feed.batch_results([x * 2 for x in batch[: len(batch) // 2]])
    return "returned early"


def answer_with_an_unreadable_type(args, ctx):
    """Outputs of a class the Spark task cannot import (defined in a module only this
    process has on its path)."""
    import importlib
    import sys
    import tempfile

    folder = tempfile.mkdtemp(dir=ctx.work_dir)
    with open(os.path.join(folder, "private_outputs.py"), "w") as f:
        f.write("class Score:\n    def __init__(self, v):\n        self.v = v\n")
    sys.path.insert(0, folder)
    Score = importlib.import_module("private_outputs").Score
    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(16)
        if batch:
            feed.batch_results([Score(x) for x in batch])
    return "sent"


def infer_scaled(args, ctx):
    """Inference over a DataFrame column args["col"]: output = 2 * value."""
    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 8))
        values = batch[args["col"]] if isinstance(batch, dict) else batch
        if len(values):
            feed.batch_results([float(v) * 2 for v in values])
    return ctx.name


def rss_over_epochs(args, ctx):
    """Read every batch of 2 epochs; return the process's RSS at the end of epoch 1 and its
    peak during epoch 2 (bytes), and the rows of each epoch."""
    import psutil

    proc = psutil.Process()
    feed = ctx.get_data_feed()
    rows = [0, 0]
    after_first, peak_second = None, 0
    while not feed.should_stop():
        epoch = feed.epoch
        batch = feed.next_batch(args["batch"])
        if epoch < 2:
            rows[epoch] += (
                len(next(iter(batch.values()))) if isinstance(batch, dict) else len(batch)
            )
        if epoch == 1:
            if after_first is None:
                after_first = proc.memory_info().rss
            peak_second = max(peak_second, proc.memory_info().rss)
    return {"rows": rows, "after_first": after_first, "peak_second": peak_second}


def ids_per_epoch(args, ctx):
    """The ids this node was handed in each epoch, in order (DataFrame column or RDD ints)."""
    feed = ctx.get_data_feed()
    epochs = []
    while not feed.should_stop():
        epoch = feed.epoch
        batch = feed.next_batch(args.get("batch", 16))
        ids = batch[args["col"]].tolist() if isinstance(batch, dict) else list(batch)
        while len(epochs) <= epoch:
            epochs.append([])
        epochs[epoch].extend(int(i) for i in ids)
    return {"epochs": epochs, "held_back": feed.rows_held_back}


def sum_ids_reporting(args, ctx):
    """sum_ids, slowly enough for a few heartbeats, reporting its batches as steps."""
    feed = ctx.get_data_feed(train_mode=True)
    steps = 0
    while not feed.should_stop():
        batch = feed.next_batch(100)
        if len(batch):
            steps += 1
            ctx.report(step=steps, seen=float(steps))
            time.sleep(0.05)
    return steps


def drain_then_describe_supervisor(args, ctx):
    """Read the whole feed; then how this node's supervisor was started (its command line)."""
    import psutil

    feed = ctx.get_data_feed(train_mode=True)
    while not feed.should_stop():
        feed.next_batch(64)
    return {"supervisor_cmdline": psutil.Process().parent().cmdline()}


def give_then_die(args, ctx):
    """ids_per_epoch, but the node named args["die"] exits (code 3) once it has taken
    args["after"] rows: a giver that dies while its surplus rows are moving."""
    feed = ctx.get_data_feed()
    taken = 0
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 8))
        taken += len(batch[args["col"]]) if isinstance(batch, dict) else len(batch)
        if ctx.name == args["die"] and taken >= args["after"]:
            os._exit(3)
    return taken


def only_the_chief_reads(args, ctx):
    """The chief reads its feed; the other training nodes return at once without opening it."""
    if ctx.name != "chief:0":
        return 0
    feed = ctx.get_data_feed()
    rows = 0
    while not feed.should_stop():
        rows += len(feed.next_batch(16))
    return rows


def sum_ids_saying_where_from(args, ctx):
    """sum_ids, and whether the feed read Spark's own socket (the barrier task passed it on)
    or frames the task forwarded."""
    out = sum_ids(args, ctx)
    # (private: whether the feed reads Spark's socket itself is internal, and what the tests ask)
    out["from_spark_socket"] = ctx.get_data_feed()._stream._spark is not None
    return out


def read_some_then_return(args, ctx):
    """Take ``rows`` rows of the partition and return without reading the rest."""
    feed = ctx.get_data_feed()
    got = len(feed.next_batch(args["rows"]))
    return {"rows": got, "from_spark_socket": feed._stream._spark is not None}


def infer_double_saying_where_from(args, ctx):
    """infer_double, and whether the feed read Spark's own socket."""
    infer_double(args, ctx)
    return {"from_spark_socket": ctx.get_data_feed(train_mode=False)._stream._spark is not None}


def preloaded_mwms(args, ctx):
    """mwms_on_feed, and whether TensorFlow was already imported when main_fn began (forked
    from a sparktf.daemon that preloaded it)."""
    import sys

    preloaded = "tensorflow" in sys.modules
    out = mwms_on_feed(args, ctx)
    out["preloaded"] = preloaded
    return out


def infer_timestamps(args, ctx):
    """Inference over a vector column 'v' of one value: (a timestamp, the value)."""
    import datetime

    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        batch = feed.next_batch(4)
        feed.batch_results(
            [(datetime.datetime(2020, 1, 1, 0, 0, int(v[0])), float(v[0])) for v in batch["v"]]
        )


def infer_numpy(args, ctx):
    """Inference answering each batch of a DataFrame's 'id' with one numpy array, shaped
    ``args["shape"]``: "(n,)" 2*id, "(n, 1)" 2*id, "(n, 2)" (id, 2*id), or "dict" (a Keras
    model's named outputs: {"a": id, "b": 2*id}); with ``args["tensor"]``, as tensors."""
    import numpy as np

    feed = ctx.get_data_feed(train_mode=False)
    while not feed.should_stop():
        x = feed.next_batch(4)["id"].astype("float32")
        out = {
            "(n,)": 2 * x,
            "(n, 1)": (2 * x).reshape(-1, 1),
            "(n, 2)": np.stack([x, 2 * x], axis=1),
            "dict": {"a": x, "b": 2 * x},
        }[args["shape"]]
        if args.get("tensor"):  # what model(x) returns: eager tensors
            import tensorflow as tf

            out = (
                {k: tf.constant(v) for k, v in out.items()}
                if isinstance(out, dict)
                else tf.constant(out)
            )
        feed.batch_results(out)


def refuses_empty_batches(args, ctx):
    """The README's loop, with a consumer that fails on an empty batch as Keras'
    ``model.predict`` does ("Expected input data to be non-empty"): training returns the
    batch sizes per epoch; inference answers each row with its id doubled."""
    feed = ctx.get_data_feed(train_mode=ctx.train_mode)
    sizes = {}
    while not feed.should_stop():
        epoch = feed.epoch
        batch = feed.next_batch(args["batch"])
        if len(batch) == 0:
            raise ValueError("Expected input data to be non-empty.")
        sizes.setdefault(epoch, []).append(len(batch))
        if not ctx.train_mode:
            feed.batch_results([2.0 * x for x in batch])
    return sizes


def read_epochs(args, ctx):
    """Read ``args["epochs"]`` epochs of the feed (stopping early if the feed ends), as a
    ``model.fit(feed.to_dataset(n), epochs=k)`` with ``k`` set apart from ``train()``'s does;
    ``args["exact"]``: take exactly ``args["exact"]`` rows in batches of ``args["batch"]``
    and return without asking the feed for more."""
    feed = ctx.get_data_feed()
    rows = 0
    if args.get("exact") is not None:
        while rows < args["exact"]:
            rows += len(feed.next_batch(min(args["batch"], args["exact"] - rows)))
        return rows
    while not feed.should_stop() and feed.epoch < args["epochs"]:
        rows += len(feed.next_batch(args["batch"]))
    return rows


def values_per_epoch(args, ctx):
    """The values of column ``args["col"]`` (or the RDD elements) this node was handed in each
    epoch, as strings, and the rows its feed held back."""
    feed = ctx.get_data_feed()
    epochs = []
    while not feed.should_stop():
        epoch = feed.epoch
        batch = feed.next_batch(args.get("batch", 16))
        values = batch[args["col"]].tolist() if isinstance(batch, dict) else list(batch)
        while len(epochs) <= epoch:
            epochs.append([])
        epochs[epoch].extend(str(v) for v in values)
    return {"epochs": epochs, "held_back": feed.rows_held_back}
