"""Where the main job's time goes: every phase of ``examples/mnist.py`` with its seconds, and
the whole ``spark-submit examples/mnist.py`` next to the same CNN trained in one plain TF
process, all in this one run.

    python3 bench/mainjob_timeline.py [--epochs 12] [--master local[2]] [--skip-submit]
                                      [--predecessor] [--repeats N]

(0) With ``--predecessor``: the same work with TensorFlowOnSpark 2.2.5 (bench/predecessor_mnist.py,
    its Keras MNIST pattern, 2 workers on local-cluster[2,1,2048]): process wall, "trained in",
    test_accuracy, and (1)'s wall as a fraction of it.

(1) ``spark-submit examples/mnist.py`` as a user runs it (no flags): process wall, its
    "trained in", test_accuracy. (2) The same steps in this process, stamped: Spark start
    (with ``spark.python.daemon.module=sparktf.daemon`` and ``sparktf.warm_up`` as the example
    has them: the line under the table says when the warm-up's job ended), data to a
    DataFrame, ``run()``, from ``train()`` to ``main_fn`` on every node (Spark jobs, barrier
    tasks, node processes), TF import, strategy and model set-up, each epoch, export,
    evaluation, ``main_fn`` end to ``shutdown()``'s return, inference with ``sparktf.predict``, and
    this bench's own Spark stop (the example leaves that to the process's end). Node stamps are
    wall-clock times taken inside the TF processes (the same machine). (3) Baseline: the same
    CNN on the same digits, ``model.fit`` in one plain TF process, batch 64.

With ``--repeats N``, (0) and (1) run N times, alternately, and their medians are printed
(with the ratio of the medians): on a shared VM one run of each is not enough to compare.
"""

import argparse
import os
import re
import subprocess
import sys
import threading
import time

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import mnist  # noqa: E402  (examples/mnist.py: its model and its scoring)
import mnist_data  # noqa: E402


def keras_modules():
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    return tf, keras


def timed_main_fn(args, ctx):
    """examples/mnist.py's main_fn, with wall-clock stamps."""
    import time

    t = {"main_fn": time.time()}
    tf, keras = keras_modules()
    t["tf_import"] = time.time()
    strategy = (
        tf.distribute.MultiWorkerMirroredStrategy()
        if ctx.num_workers > 1
        else tf.distribute.get_strategy()
    )
    with strategy.scope():
        model = mnist.build_model(keras)
    t["strategy"] = time.time()
    feed = ctx.get_data_feed(train_mode=True)
    train = feed.to_dataset(args.batch_size).map(lambda b: (b["image"], b["label"]))
    epochs, steps = [], []

    class Stamp(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            steps.append(0)

        def on_train_batch_end(self, batch, logs=None):
            steps[-1] += 1

        def on_epoch_end(self, epoch, logs=None):
            epochs.append(time.time())

    t["fit_start"] = time.time()
    model.fit(train, epochs=args.epochs, callbacks=[Stamp()], verbose=0)
    t["epochs"] = epochs
    import contextlib
    import io
    import tempfile

    import sparktf

    local = (
        sparktf.fs.export_dir(args.export_dir) if ctx.is_chief else tempfile.TemporaryDirectory()
    )
    with local as target, contextlib.redirect_stdout(io.StringIO()):
        model.export(target)
    t["export"] = time.time()
    plain = mnist.build_model(keras)
    plain.set_weights(model.get_weights())
    accuracy = float(plain.evaluate(*args.test, batch_size=250, verbose=0)[1])
    t["evaluate"] = time.time()
    return {"t": t, "steps": steps, "test_accuracy": accuracy}


def plain_tf(args, x, y, test):
    """The same CNN in this process (no Spark, no distribution): fit seconds, accuracy."""
    tf, keras = keras_modules()
    model = mnist.build_model(keras)
    t = time.perf_counter()
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, shuffle=True, verbose=0)
    secs = time.perf_counter() - t
    _, acc = model.evaluate(*test, batch_size=250, verbose=0)
    return secs, float(acc)


def submit(args):
    import pyspark

    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    cmd = [
        spark_submit,
        "--master",
        args.master,
        os.path.join(ROOT, "examples", "mnist.py"),
        "--epochs",
        str(args.epochs),
        *(["--num-executors", str(args.num_executors)] if args.num_executors else []),
        "--export-dir",
        args.export_dir + "-submit",
    ]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"spark-submit failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    trained = float(re.search(r"trained in ([\d.]+)s", out.stdout).group(1))
    acc = float(out.stdout.strip().splitlines()[-1].split("=")[1])
    return wall, trained, acc


PREDECESSOR = "tensorflowonspark==2.2.5"


def predecessor_path():
    """A private install of the predecessor (no dependencies: it uses this pyspark and TF),
    patched to bind the address in SPARK_LOCAL_IP: it otherwise picks the machine's outbound
    address (a UDP connect to 8.8.8.8), and everything here stays on loopback."""
    target = os.path.join("/tmp", "sparktf-bench-" + PREDECESSOR.replace("==", "-"))
    util = os.path.join(target, "tensorflowonspark", "util.py")
    if not os.path.exists(util):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                target,
                PREDECESSOR,
            ],
            check=True,
        )
    with open(util) as f:
        code = f.read()
    hook = (
        'def get_ip_address():\n  if os.environ.get("SPARK_LOCAL_IP"):  # sparktf bench\n'
        '    return os.environ["SPARK_LOCAL_IP"]\n'
    )
    if hook not in code:
        with open(util, "w") as f:
            f.write(code.replace("def get_ip_address():\n", hook, 1))
    return target


def run_predecessor(args):
    """(0): bench/predecessor_mnist.py under spark-submit; (wall, trained in, accuracy)."""
    import json
    import signal

    import pyspark

    result = os.path.join("/tmp", f"bench-predecessor-{os.getpid()}.json")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [predecessor_path()] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        ),
    )
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    cmd = [
        spark_submit,
        "--master",
        args.predecessor_master,
        os.path.join(ROOT, "bench", "predecessor_mnist.py"),
        "--epochs",
        str(args.epochs),
        "--batch-size",
        str(args.batch_size),
        "--result",
        result,
    ]
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=args.predecessor_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session, started here: by its PID
        proc.communicate()
        sys.exit(f"the predecessor did not finish in {args.predecessor_timeout}s")
    wall = time.perf_counter() - t
    match = re.search(r"trained in ([\d.]+)s", out)
    if proc.returncode != 0 or not match:
        # It fails now and then on its own (its standalone executors killed at its shutdown
        # until the master gives up): said, and the round goes on without its figure.
        print(
            f"(0) the predecessor failed (rc {proc.returncode}); its last lines:\n{out[-1500:]}",
            flush=True,
        )
        return None, None, None
    if not os.path.exists(result):
        # It ran to its end but its chief never wrote the accuracy: when its feed ends before
        # a node's last step, that node fails on the partial batch (executors' stderr), and
        # its shutdown does not wait for the chief's evaluation. The wall still counts.
        print("(0) the predecessor's chief reported no accuracy (see its executors' stderr)")
        return wall, float(match.group(1)), None
    with open(result) as f:
        accuracy = json.load(f)["test_accuracy"]
    os.unlink(result)
    return wall, float(match.group(1)), accuracy


def timeline(args):
    import cloudpickle

    import sparktf

    start = time.time()
    marks = []
    from pyspark.sql import SparkSession

    sparktf.quiet_spark_logs()
    spark = (
        SparkSession.builder.appName("bench-mainjob")
        .config("spark.python.daemon.module", "sparktf.daemon")
        .config("spark.executorEnv.SPARKTF_PRELOAD", "tensorflow,tf_keras")
        .getOrCreate()
    )
    for module in (mnist, mnist_data):  # for the executors and the nodes
        spark.sparkContext.addPyFile(module.__file__)
    warming = sparktf.warm_up(spark)  # as the example: the daemon imports TF meanwhile
    warmed = []
    threading.Thread(
        target=lambda: warming.wait() and warmed.append(time.time()), daemon=True
    ).start()
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    marks.append(("Spark start", time.time()))
    args.initial_epoch = 0
    local = spark.sparkContext.master.startswith("local")
    args.num_executors = args.num_executors or (1 if local else None)
    (x, y), args.test = mnist_data.load_default()
    parts = args.num_executors or spark.sparkContext.defaultParallelism
    train_df = sparktf.from_numpy(spark, {"image": x, "label": y}, parts).cache()
    marks.append(("data to a DataFrame (driver)", time.time()))
    cluster = sparktf.run(
        spark.sparkContext,
        timed_main_fn,
        args,
        num_executors=args.num_executors,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        input_mode=sparktf.InputMode.SPARK,
    )
    marks.append(("run() (checks, control server)", time.time()))
    cluster.train(train_df, num_epochs=args.epochs, shuffle=True)
    result = cluster.shutdown()
    shutdown_done = time.time()
    node = {name: r["t"] for name, r in cluster.results.items()}
    t = result["t"]
    # Not the process's create_time: psutil derives it from the boot time, which on these VMs
    # is off by about a second against time.time() (a forked node reaches main_fn in ~0.05 s).
    last_main = max(n["main_fn"] for n in node.values())
    marks.append(
        (
            "train() to main_fn on every node (Spark jobs over the data, barrier "
            "tasks, node processes)",
            last_main,
        )
    )
    marks.append(("TF import (chief)", t["tf_import"]))
    marks.append(("strategy and model set-up (chief)", t["strategy"]))
    marks.append(("feed to the first batch (chief)", t["fit_start"]))
    for i, e in enumerate(t["epochs"]):
        marks.append((f"epoch {i + 1} ({result['steps'][i]} steps)", e))
    marks.append(("export (chief)", t["export"]))
    marks.append(("evaluation (chief)", t["evaluate"]))
    marks.append(("main_fn end to shutdown() returning", shutdown_done))
    accuracy = mnist.score(spark, args)
    marks.append(("inference (sparktf.predict)", time.time()))
    spark.stop()  # the example does not (the JVM stops Spark as spark-submit's process ends)
    marks.append(
        ("Spark stop (pyspark's stop(): this bench's; not in the example's wall)", time.time())
    )
    print(
        f"\n(2) the main job's phases (local[2] as this process's Spark; "
        f"{args.epochs} epochs, {len(node)} nodes; test_accuracy {result['test_accuracy']:.4f}, "
        f"inference_accuracy {accuracy:.4f})"
    )
    print("| phase | seconds | at |\n|---|---|---|")
    prev = start
    for name, at in marks:
        print(f"| {name} | {at - prev:.2f} | {at - start:.1f} |")
        prev = max(prev, at)
    if warmed:
        print(
            f"(in the background: sparktf.warm_up's job, started after Spark's start, ended at "
            f"{warmed[0] - start:.1f} s; {warming})"
        )
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--master", default="local[2]")
    p.add_argument(
        "--num-executors",
        type=int,
        default=None,
        help="nodes (default: as examples/mnist.py, one in local mode)",
    )
    p.add_argument("--skip-submit", action="store_true")
    p.add_argument(
        "--predecessor",
        action="store_true",
        help=f"also run the same work with {PREDECESSOR} (pip-installed into /tmp)",
    )
    p.add_argument(
        "--predecessor-master",
        default="local-cluster[2,1,2048]",
        help="it does not run in local[N] on pyspark 4",
    )
    p.add_argument("--predecessor-timeout", type=int, default=600)
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run (0) and (1) this many times, alternately, and print medians",
    )
    args = p.parse_args()
    args.export_dir = os.path.join("/tmp", f"bench-mainjob-{os.getpid()}")
    args.test_size, args.limit, args.data, args.model_dir = 1000, None, None, None
    p_walls, walls = [], []
    for round_ in range(1, args.repeats + 1):  # interleaved: this VM's speed drifts
        tag = f" [{round_}/{args.repeats}]" if args.repeats > 1 else ""
        p_wall = None  # no predecessor run, or it failed
        if args.predecessor:
            p_wall, p_trained, p_acc = run_predecessor(args)
            if p_wall is not None:
                p_walls.append(p_wall)
                print(
                    f"(0){tag} predecessor, spark-submit --master {args.predecessor_master} "
                    f"bench/predecessor_mnist.py (2 workers): {p_wall:.1f} s process wall, "
                    f"trained in {p_trained:.1f} s, test_accuracy "
                    f"{'none reported' if p_acc is None else f'{p_acc:.4f}'}",
                    flush=True,
                )
        if not args.skip_submit:
            wall, trained, acc = submit(args)
            walls.append(wall)
            print(
                f"(1){tag} spark-submit --master {args.master} examples/mnist.py --epochs "
                f"{args.epochs}: {wall:.1f} s process wall, trained in {trained:.1f} s, "
                f"test_accuracy {acc:.4f}",
                flush=True,
            )
            if p_wall is not None:
                print(
                    f"    = {wall / p_wall:.2f} x the predecessor's process wall (target <= 0.3)",
                    flush=True,
                )
    if args.repeats > 1 and walls:
        import statistics

        line = (
            f"(1) over {len(walls)} runs: median {statistics.median(walls):.1f} s, "
            f"min {min(walls):.1f}, max {max(walls):.1f} (target <= 30 s)"
        )
        if p_walls:
            line += (
                f"; the predecessor's median {statistics.median(p_walls):.1f} s: "
                f"{statistics.median(walls) / statistics.median(p_walls):.2f} x "
                f"(target <= 0.3)"
            )
        print(line, flush=True)
    (x, y), test = mnist_data.load_default(1000)
    secs, acc = plain_tf(args, x, y, test)
    print(
        f"(3) baseline, the same CNN in one plain TF process: fit {secs:.1f} s, "
        f"test_accuracy {acc:.4f}"
    )
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--master {args.master} pyspark-shell")
    timeline(args)


if __name__ == "__main__":
    main()
