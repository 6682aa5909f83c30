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
        ids = batch[args["col"]] if isinstance(batch, dict) else [e if isinstance(e, int) else e[0]
                                                                  for e in batch]
        total += int(sum(ids))
        rows += len(ids)
        batches += 1
        per_epoch.append(len(ids))
    return {"sum": total, "rows": rows, "batches": batches, "held_back": feed.rows_held_back,
            "spool_dir": ctx._work_dir}


def describe_batch(args, ctx):
    """The first batch of a DataFrame, described: column -> (dtype, shape, first value)."""
    feed = ctx.get_data_feed(input_mapping=args.get("mapping"))
    batch = feed.next_batch(4)
    out = {k: (str(v.dtype), v.shape, v[0].tolist() if hasattr(v[0], "tolist") else v[0])
           for k, v in batch.items()}
    feed.terminate()
    return out


def read_one_then_stop(args, ctx):
    feed = ctx.get_data_feed()
    first = feed.next_batch(10)
    feed.terminate()
    return {"rows": len(first), "stopped": feed.should_stop()}


def read_one_then_sleep(args, ctx):
    feed = ctx.get_data_feed()
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
    hist = model.fit(ds, epochs=args["epochs"], verbose=0)
    return {"loss": [float(v) for v in hist.history["loss"]], "held_back": feed.rows_held_back,
            "kernel": model.get_weights()[0].ravel().tolist()}


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


def read_then_record_pids(args, ctx):
    """Take a batch (so the spool exists), record the pids above us, then wait to be killed."""
    import json

    feed = ctx.get_data_feed()
    feed.next_batch(8)
    with open(f"/proc/{os.getppid()}/stat") as f:
        task_worker = int(f.read().rsplit(")", 1)[1].split()[1])
    path = os.path.join(args["dir"], ctx.name.replace(":", "_") + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump({"task_worker": task_worker, "work_dir": ctx._work_dir}, f)
    os.replace(path + ".tmp", path)
    time.sleep(300)


def dataset_rows(args, ctx):
    """Count rows through the feed's tf.data adapter."""
    feed = ctx.get_data_feed()
    rows = 0
    for _, y in feed.to_dataset(args["batch"]):
        rows += int(y.shape[0])
    return rows
