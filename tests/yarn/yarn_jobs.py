"""main_fns for the YARN tier, shipped by value to the executors (registered with cloudpickle
by the test modules)."""

import os

# (tests/helpers travels by value too: conftest registers it)
from helpers.tf_jobs import mwms_keras


def mwms_in_a_container(args, ctx):
    """tf_jobs.mwms_keras, plus the YARN container this node ran in (YARN sets CONTAINER_ID
    in every container's environment; the node process inherits it from its executor)."""
    result = mwms_keras(args, ctx)
    result["container"] = os.environ.get("CONTAINER_ID")
    return result


def sum_fed(args, ctx):
    """Sum the ids Spark feeds this node (InputMode.SPARK); its container too."""
    feed = ctx.get_data_feed(train_mode=True)
    total = count = 0
    while not feed.should_stop():
        batch = feed.next_batch(64)
        ids = batch["id"] if isinstance(batch, dict) else [row[0] for row in batch]
        total += int(sum(ids))
        count += len(ids)
    return {"sum": total, "count": count, "container": os.environ.get("CONTAINER_ID")}


def steps_checkpointed_on_hdfs(args, ctx):
    """The chief counts to args["steps"] in a real TF checkpoint kept on HDFS (args["dir"],
    mirrored by sparktf.fs.SyncedDir, saved every 5 steps), resuming from it. On attempt 0 the
    chief stops at args["pause_at"] (saved) and waits, and the worker waits: the test kills
    the worker's executor JVM then, mid-training, whatever this machine's speed. Every node
    says which attempt and container it ran in."""
    import time

    import tensorflow as tf

    import sparktf

    result = {"attempt": ctx.attempt, "container": os.environ.get("CONTAINER_ID")}
    if not ctx.is_chief:
        if ctx.attempt == 0:
            # where the test finds the container to kill (a forked node's /proc/PID/environ
            # is its Python daemon's, without SPARKTF_NODE)
            sparktf.fs.write_bytes(args["dir"] + ".worker-container", result["container"].encode())
            time.sleep(600)  # (its container is killed first)
        return result
    mirror = sparktf.fs.SyncedDir(args["dir"])
    with mirror as local:
        step = tf.Variable(0, dtype=tf.int64)
        ckpt = tf.train.Checkpoint(step=step)
        manager = tf.train.CheckpointManager(ckpt, local, max_to_keep=2)
        if manager.latest_checkpoint:
            ckpt.restore(manager.latest_checkpoint)
        result["resumed_from"] = int(step.numpy())
        while int(step.numpy()) < args["steps"]:
            if ctx.attempt == 0 and int(step.numpy()) >= args["pause_at"]:
                time.sleep(600)  # (its peer's container is killed meanwhile)
            step.assign_add(1)
            ctx.report_progress(int(step.numpy()))
            if int(step.numpy()) % 5 == 0:
                manager.save(checkpoint_number=int(step.numpy()))
                mirror.sync()  # on HDFS before the next step
    result["final_step"] = int(step.numpy())
    return result
