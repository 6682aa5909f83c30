"""MNIST the classic TF1 way: asynchronous between-graph replication through parameter servers.

``spark-submit --master local[3] examples/mnist_async_ps.py`` (a chief, a worker and one ps)

The code the seeds of distributed TensorFlow taught: every worker builds the graph with its
variables placed on the ps by ``replica_device_setter``, starts a ``MonitoredTrainingSession``
(the chief initializes, restores and checkpoints) and pushes its updates without waiting for
the others until ``StopAtStepHook`` ends training. Spark feeds each worker its share of the
DataFrame (``--input-mode tensorflow``: each reads its own files). The parameter servers run no
code: sparktf starts their servers and stops them when training ends. A small MLP, since the
graph is written by hand.
"""

import contextlib
import sys
import time

import mnist_helpers as helpers
from mnist_helpers import PIXELS

import sparktf.fs


def main_fn(args, ctx):
    import numpy as np
    import tensorflow as tf

    from sparktf.node import tf1

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    server = ctx.start_server()
    cluster = tf.train.ClusterSpec(ctx.cluster_spec)
    device = f"/job:{ctx.job_name}/task:{ctx.task_index}"
    with v1.device(v1.train.replica_device_setter(worker_device=device, cluster=cluster)):
        global_step = v1.train.get_or_create_global_step()
        x = v1.placeholder(tf.float32, [None, PIXELS])
        y = v1.placeholder(tf.int64, [None])
        w1 = v1.get_variable("w1", [PIXELS, 256], initializer=v1.glorot_uniform_initializer())
        b1 = v1.get_variable("b1", [256], initializer=v1.zeros_initializer())
        w2 = v1.get_variable("w2", [256, 10], initializer=v1.glorot_uniform_initializer())
        b2 = v1.get_variable("b2", [10], initializer=v1.zeros_initializer())
        logits = tf.matmul(tf.nn.relu(tf.matmul(x / 255.0, w1) + b1), w2) + b2
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=global_step)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))

    if args.input_mode == "spark":
        feed = ctx.get_data_feed(train_mode=True)

        def batches():
            while not feed.should_stop():
                items = feed.next_batch(args.batch_size)  # {"image": [n, 784], "label": [n]}
                if len(items["label"]):
                    yield items["image"], items["label"]
    else:
        xs, ys = helpers.node_shard(args, ctx)

        def batches():
            rng = np.random.RandomState(ctx.rank)
            while True:
                idx = rng.randint(0, len(ys), args.batch_size)
                yield xs[idx], ys[idx]

    last_step = args.max_steps or args.epochs * max(1, args.train_size // args.batch_size)
    hooks = [v1.train.StopAtStepHook(last_step=last_step)]
    config = v1.ConfigProto(device_filters=["/job:ps", device])
    # The chief initializes or restores the variables and writes the checkpoints: into a local
    # mirror of --model-dir when that is on HDFS (copied there every 5 s and at the end).
    checkpoints = (
        sparktf.fs.SyncedDir(args.model_dir, interval=5)
        if ctx.is_chief and args.model_dir
        else contextlib.nullcontext()
    )
    with checkpoints as checkpoint_dir:
        if ctx.is_chief:
            session = v1.train.MonitoredTrainingSession(
                master=server.target,
                is_chief=True,
                checkpoint_dir=checkpoint_dir,
                hooks=hooks,
                config=config,
                save_checkpoint_steps=max(1, last_step // 4),
                log_step_count_steps=0,
                save_summaries_steps=None,
                save_summaries_secs=None,
            )
        else:  # as MonitoredTrainingSession(is_chief=False), but polls the chief every second
            session = v1.train.MonitoredSession(
                session_creator=tf1.worker_session_creator(master=server.target, config=config),
                hooks=hooks,
            )
        steps = train(session, batches(), ctx, global_step, train_op, x, y)
    result = {"my_steps": steps}
    if ctx.is_chief:  # the variables still live on the ps: read them in a plain session
        with v1.Session(server.target, config=config) as sess:
            x_test, y_test = args.test
            result["test_accuracy"] = float(sess.run(accuracy, {x: x_test, y: y_test}))
            result["global_step"] = int(sess.run(global_step))
        print(f"{ctx.name}: global step {result['global_step']}, {steps} of them mine", flush=True)
    return result


def train(session, batches, ctx, global_step, train_op, x, y):
    """Steps until StopAtStepHook (or the data) ends; returns this worker's step count."""
    steps = 0
    with session as sess:
        for bx, by in batches:
            if sess.should_stop():
                break
            step, _ = sess.run([global_step, train_op], {x: bx, y: by})
            steps += 1
            if ctx.is_chief and steps % 50 == 0:
                print(f"{ctx.name}: global step {step}", flush=True)
    return steps


def main(argv=None):
    import sparktf

    p = helpers.parser(__doc__)
    p.add_argument("--num-ps", type=int, default=1, help="parameter servers (default 1)")
    p.add_argument("--input-mode", choices=["spark", "tensorflow"], default="spark")
    p.add_argument(
        "--max-steps",
        type=helpers.count,
        default=None,
        help="global steps (default: --epochs passes over the training data)",
    )
    args = helpers.finish(p.parse_args(argv))
    args.initial_epoch = 0  # MonitoredTrainingSession resumes from --model-dir by itself
    if args.num_ps < 1:
        p.error("asynchronous parameter-server training needs --num-ps >= 1")
    spark = helpers.start_spark("sparktf-mnist-async-ps")
    started = time.time()
    spark_input = args.input_mode == "spark"
    # The executors' Python daemons (DataFrame stages or RDD stages: the nodes' barrier stage
    # is one or the other) start, importing TensorFlow, while the driver loads data.
    sparktf.warm_up(spark, dataframes=spark_input, rdds=not spark_input)
    train_df, args.test, args.train_size = helpers.load_on_driver(spark, args, spark_input)
    print(
        f"mnist: async-ps, input mode {args.input_mode}, {args.train_size} training and "
        f"{len(args.test[1])} held-out images",
        flush=True,
    )

    cluster = sparktf.run(
        spark.sparkContext,
        main_fn,
        args,
        num_ps=args.num_ps,
        num_executors=args.num_executors,
        tensorboard=args.tensorboard,
        log_dir=args.log_dir,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        input_mode=sparktf.InputMode.SPARK if spark_input else sparktf.InputMode.TENSORFLOW,
    )
    if spark_input:
        cluster.train(train_df, num_epochs=args.epochs, shuffle=True)
    result = cluster.shutdown()
    return helpers.report(spark, args, cluster, result, started, score=False)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
