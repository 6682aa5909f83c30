"""MNIST the classic TF1 way: asynchronous between-graph replication through parameter servers.

``spark-submit --master local[3] examples/mnist_async_ps.py`` (a chief, a worker and a ps)

Every worker builds the graph with its variables placed on the ps by
``replica_device_setter``, opens a ``MonitoredTrainingSession`` (the chief initializes the
variables) and pushes its updates without waiting for the others, until ``StopAtStepHook``
ends training. Spark feeds each worker its share of the DataFrame. The parameter servers run
no code: sparktf starts their servers and stops them when training ends. The model is a small
MLP, since the graph is written by hand.
"""

import argparse

import mnist_data

import sparktf

PIXELS = mnist_data.PIXELS


# ------------------------------------------------------------------------------ the graph
def build_graph(v1, tf, ctx):
    """The MLP, its loss and training op, with the variables on the parameter servers."""
    cluster = tf.train.ClusterSpec(ctx.cluster_spec)
    device = f"/job:{ctx.job_name}/task:{ctx.task_index}"
    with v1.device(v1.train.replica_device_setter(worker_device=device, cluster=cluster)):
        g = {"global_step": v1.train.get_or_create_global_step()}
        g["x"] = x = v1.placeholder(tf.float32, [None, PIXELS])
        g["y"] = y = v1.placeholder(tf.int64, [None])
        init = v1.glorot_uniform_initializer()
        w1 = v1.get_variable("w1", [PIXELS, 256], initializer=init)
        b1 = v1.get_variable("b1", [256], initializer=v1.zeros_initializer())
        w2 = v1.get_variable("w2", [256, 10], initializer=init)
        b2 = v1.get_variable("b2", [10], initializer=v1.zeros_initializer())
        logits = tf.matmul(tf.nn.relu(tf.matmul(x / 255.0, w1) + b1), w2) + b2
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        g["train_op"] = v1.train.AdamOptimizer(1e-3).minimize(loss, g["global_step"])
        hits = tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32)
        g["accuracy"] = tf.reduce_mean(hits)
    return g, device


# -------------------------------------------------------------- main_fn: chief and workers
def main_fn(args, ctx):
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    server = ctx.start_server()  # this node's tf.compat.v1.train.Server
    g, device = build_graph(v1, tf, ctx)
    config = v1.ConfigProto(device_filters=["/job:ps", device])
    feed = ctx.get_data_feed(train_mode=True)  # this worker's share, batch by batch
    steps = 0
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=ctx.is_chief,
        hooks=[v1.train.StopAtStepHook(last_step=args.max_steps)],
        config=config,
        log_step_count_steps=0,
    ) as sess:
        while not sess.should_stop() and not feed.should_stop():
            batch = feed.next_batch(args.batch_size)  # {"image": [n, 784], "label": [n]}
            if len(batch["label"]):
                data = {g["x"]: batch["image"], g["y"]: batch["label"]}
                step, _ = sess.run([g["global_step"], g["train_op"]], data)
                steps += 1
                if ctx.is_chief and steps % 50 == 0:
                    print(f"{ctx.name}: global step {step}", flush=True)
    # the last global step came before this worker's share ran out (asynchronous workers
    # race to it): say so, so that its unread rows are not taken for lost data
    if not feed.should_stop():
        feed.terminate()
    result = {"my_steps": steps}
    if ctx.is_chief:  # the variables still live on the ps: read them in a plain session
        with v1.Session(server.target, config=config) as sess:
            x_test, y_test = args.test
            feed_dict = {g["x"]: x_test, g["y"]: y_test}
            result["test_accuracy"] = float(sess.run(g["accuracy"], feed_dict))
            result["global_step"] = int(sess.run(g["global_step"]))
        print(f"{ctx.name}: global step {result['global_step']}, {steps} of them mine", flush=True)
    return result


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="train/ and test/ as mnist_data_setup.py writes them")
    p.add_argument("--num-executors", type=int, help="nodes, the ps too (default: every slot)")
    p.add_argument("--num-ps", type=int, default=1, help="parameter servers")
    p.add_argument("--epochs", type=int, default=5, help="passes Spark feeds")
    p.add_argument("--batch-size", type=int, default=64, help="each worker's batch")
    p.add_argument("--max-steps", type=int, help="global steps (default: the epochs' worth)")
    args = p.parse_args(argv)
    if args.num_ps < 1:
        p.error("asynchronous parameter-server training needs --num-ps >= 1")
    if args.max_steps is not None and args.max_steps < 1:
        p.error("argument --max-steps: must be an int >= 1")

    # Spark's INFO lines off, TensorFlow imported once per executor, mnist_data shipped to the
    # executors and the nodes, their daemons started while the driver loads the data.
    spark = sparktf.spark_session("sparktf-mnist-async-ps", py_files=[mnist_data.__file__])
    if args.data:
        train_df = mnist_data.read_dataframe(spark, args.data.rstrip("/") + "/train").cache()
        args.test = mnist_data.to_numpy(mnist_data.read_dataframe(spark, args.data + "/test"))
        size = train_df.count()
    else:
        (x, y), args.test = mnist_data.load_default()
        train_df, size = sparktf.from_numpy(spark, {"image": x, "label": y}).cache(), len(y)
    args.max_steps = args.max_steps or args.epochs * size // args.batch_size
    print(f"mnist: async-ps, input mode spark, {size} training and {len(args.test[1])} held-out")

    cluster = sparktf.run(
        spark,
        main_fn,
        args,
        num_ps=args.num_ps,
        num_executors=args.num_executors,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(train_df, num_epochs=args.epochs, shuffle=True)
    result = cluster.shutdown()  # the chief's main_fn's value; sparktf stops the ps
    print(f"test_accuracy={result['test_accuracy']:.4f}")
    return result


if __name__ == "__main__":
    main()
