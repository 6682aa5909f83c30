"""The main job's work done the predecessor's way, for bench/mainjob_timeline.py's baseline:
TensorFlowOnSpark 2.2.5 (``TFCluster.run`` + ``cluster.train(rdd)`` + ``shutdown``), written
after the pattern of its Keras MNIST example (InputMode.SPARK, ``TFNode.DataFeed``, one row
per ``next_batch(1)`` into ``tf.data.Dataset.from_generator``, MultiWorkerMirroredStrategy,
tf-keras ``fit`` with a fixed ``steps_per_epoch`` of 90 % of a worker's share, ``terminate``).
Same digits, same CNN, same epochs and global batch as examples/mnist.py.

    spark-submit --master local-cluster[2,1,2048] bench/predecessor_mnist.py --result FILE

Needs ``tensorflowonspark`` importable on the driver and the executors (not a sparktf
dependency; mainjob_timeline.py installs it into a private folder and sets PYTHONPATH). The
predecessor does not run in ``local[N]`` on pyspark 4 (FACTS.md). The chief scores the
held-out digits and writes ``{"test_accuracy": ...}`` to FILE.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
)

import mnist  # examples/mnist.py: its model
import mnist_data


def main_fun(args, ctx):
    import numpy as np
    from tensorflowonspark import TFNode

    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    feed = TFNode.DataFeed(ctx.mgr, False)

    def rows():
        while not feed.should_stop():
            batch = feed.next_batch(1)
            if not batch:
                return
            image, label = batch[0]
            yield np.asarray(image, np.float32), np.int64(label)

    ds = tf.data.Dataset.from_generator(
        rows,
        output_signature=(
            tf.TensorSpec((mnist_data.PIXELS,), tf.float32),
            tf.TensorSpec((), tf.int64),
        ),
    ).batch(args.batch_size)
    with strategy.scope():
        model = mnist.build_model(keras)
    share = args.train_size // ctx.num_workers
    steps = int(share / (args.batch_size // ctx.num_workers) * 0.9)  # as the predecessor's example
    model.fit(ds, epochs=args.epochs, steps_per_epoch=steps, verbose=0)
    if ctx.job_name == "chief":  # before terminate(): the predecessor's shutdown does not wait
        plain = mnist.build_model(keras)  # for main_fun to return
        plain.set_weights(model.get_weights())
        accuracy = float(plain.evaluate(*args.test, batch_size=250, verbose=0)[1])
        with open(args.result, "w") as f:
            json.dump({"test_accuracy": accuracy}, f)
    feed.terminate()


def main():
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession
    from tensorflowonspark import TFCluster

    for module in (mnist, mnist_data):  # the executors need not find examples/
        cloudpickle.register_pickle_by_value(module)

    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--result", required=True)
    args = p.parse_args()
    spark = SparkSession.builder.appName("predecessor-mnist").getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    started = time.time()
    (x, y), args.test = mnist_data.load_default(1000)
    args.train_size = len(y)
    rdd = sc.parallelize([(row.tolist(), int(label)) for row, label in zip(x, y)], args.workers)
    cluster = TFCluster.run(
        sc, main_fun, args, args.workers, 0, False, TFCluster.InputMode.SPARK, master_node="chief"
    )
    cluster.train(rdd, args.epochs)
    cluster.shutdown()
    print(f"predecessor: trained in {time.time() - started:.1f}s", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
