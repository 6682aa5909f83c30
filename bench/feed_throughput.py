"""Rows per second that InputMode.SPARK delivers into the TF processes, against the ceiling.

    python3 bench/feed_throughput.py [--rows 60000] [--master local-cluster[2,1,2048]]

Rows of 784 float32 plus an int label (an MNIST-sized example), 2 training nodes, one cached
copy of the data per form, all measured in this one run:

(a) ceiling, DataFrame: a barrier ``mapInArrow`` that only touches each batch of the cached
    DataFrame;
(b) sparktf feeding that DataFrame: ``feed.next_batch(1024)`` in the node process, each batch
    as numpy arrays (a [n, 784] float32 matrix and a label vector);
(c) ceiling, RDD: a barrier ``mapPartitions`` that only iterates the cached RDD;
(d) sparktf feeding that RDD: ``feed.next_batch(1024)`` lists of (features, label) elements.

and, as a user sees it (``--only efghi``), timed on the driver with every sparktf default:

(e) Spark: the barrier ``mapInArrow`` of (a), ``collect()`` on the driver;
(f) sparktf: ``run()`` + ``train(df, num_epochs=1)`` + ``shutdown()`` (defaults: equalized;
    the cached DataFrame's partitions are fed as they are when already equal enough);
(g) Spark: the barrier ``mapPartitions`` of (c), ``collect()``;
(h) sparktf: ``run()`` + ``train(rdd, num_epochs=1)`` + ``shutdown()``;
(i) the same with ``train(rdd, equalize=False)``: what equalizing (every node the same rows,
    the nodes' counts going round the driver while they read) costs of (h).

``--data jvm`` builds the DataFrame in the JVM (Spark SQL expressions, as a DataFrame read from
files is) instead of in Python workers (the default, as earlier runs did): then no Python
worker has imported numpy or pandas before the measured calls, as in most users' jobs.

Each figure is the best of ``--repeats``; with more than one repeat, the median (and range) of
sparktf's ratio to its ceiling within each repeat follows, the two run back to back: on a shared
machine that ratio is steadier than a ratio of two bests taken at different moments.

Figures (a)-(d) are total rows / the longest per-node time from asking for the first batch to
having the last one. The data already has one partition per node, so sparktf is run with
``rebalance=False`` (and equalization on, as for synchronous training). Loopback only.
"""

import argparse
import os
import statistics
import sys

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

WIDTH = 784
BATCH = 1024
TOUCHED = "rows long, secs double, cpu double"  # what touch_arrow's one row says


def make_batches(batches):
    import numpy as np
    import pyarrow as pa

    for b in batches:
        ids = b.column(0).to_numpy()
        rng = np.random.RandomState(int(ids[0]) if len(ids) else 0)
        flat = rng.rand(len(ids) * WIDTH).astype("float32")
        features = pa.FixedSizeListArray.from_arrays(pa.array(flat), WIDTH)
        features = features.cast(pa.list_(pa.float32()))
        yield pa.RecordBatch.from_arrays([features, pa.array(ids % 10)], ["features", "label"])


def touch_arrow(batches):
    import time

    cpu0 = cpu_secs(os.getpid())
    start, rows = time.perf_counter(), 0
    for b in batches:
        rows += b.num_rows
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict(
        {
            "rows": [rows],
            "secs": [time.perf_counter() - start],
            "cpu": [cpu_secs(os.getpid()) - cpu0],
        }
    )


def start_profiles(name, pids):
    """py-spy each of ``pids`` until stopped (``--profile``): a profile of the real processes."""
    import subprocess
    import time

    out = os.environ.get("BENCH_PROFILE_DIR")
    if not out:
        return []
    procs = [
        subprocess.Popen(
            [
                "py-spy",
                "record",
                "--nonblocking",
                "--threads",
                "--rate",
                "500",
                "--format",
                "raw",
                "-o",
                f"{out}/{name}-{label}-{pid}.txt",
                "-p",
                str(pid),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for label, pid in pids
    ]
    time.sleep(1.0)  # let py-spy attach before the measured part starts
    return procs


def stop_profiles(procs):
    import signal

    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        p.wait()


def cpu_secs(pid):
    """User + system CPU seconds a process has used so far."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def touch_rdd(items):
    import time

    from pyspark import BarrierTaskContext  # noqa: F401 - runs as a barrier task

    profiles = start_profiles("c", [("task", os.getpid())])
    cpu0 = cpu_secs(os.getpid())
    start, rows = time.perf_counter(), 0
    for _ in items:
        rows += 1
    secs = time.perf_counter() - start
    cpu = cpu_secs(os.getpid()) - cpu0
    stop_profiles(profiles)
    yield (rows, secs, {"task": cpu})


def consume(args, ctx):
    import time

    import psutil

    me = psutil.Process()
    task = me.parent().parent()  # node process <- supervisor <- the Spark barrier task
    profiles = start_profiles("d", [("node", me.pid), ("task", task.pid)])
    cpu0 = {"task": cpu_secs(task.pid), "node": cpu_secs(me.pid)}
    feed = ctx.get_data_feed()
    start, rows = time.perf_counter(), 0
    while not feed.should_stop():
        batch = feed.next_batch(BATCH)
        rows += len(batch["label"]) if isinstance(batch, dict) else len(batch)
    secs = time.perf_counter() - start
    cpu = {"task": cpu_secs(task.pid) - cpu0["task"], "node": cpu_secs(me.pid) - cpu0["node"]}
    stop_profiles(profiles)
    return {"rows": rows, "secs": secs, "cpu": cpu}


CPU = {}  # figure -> {process kind: CPU seconds per 100k rows}, from the fastest run


def rate(results, key=None):
    """Rows/s of one run (all rows / the slowest node); keeps its CPU use if it is the best."""
    value = sum(r[0] for r in results) / max(r[1] for r in results)
    if key and len(results[0]) > 2 and value > CPU.get(key, {}).get("_rate", 0):
        rows = sum(r[0] for r in results)
        kinds = results[0][2].keys()
        CPU[key] = {k: sum(r[2][k] for r in results) * 1e5 / rows for k in kinds}
        CPU[key]["_rate"] = value
    return value


def sparktf_rate(sc, data, key):
    import sparktf

    cluster = sparktf.run(
        sc, consume, None, num_executors=2, log_to_driver=False, input_mode=sparktf.InputMode.SPARK
    )
    cluster.train(data, rebalance=False, equalize=os.environ.get("BENCH_EQUALIZE", "1") == "1")
    cluster.shutdown()
    return rate([(r["rows"], r["secs"], r["cpu"]) for r in cluster.results.values()], key)


def consume_quietly(args, ctx):
    feed = ctx.get_data_feed()
    rows = 0
    while not feed.should_stop():
        batch = feed.next_batch(BATCH)
        rows += len(batch["label"]) if isinstance(batch, dict) else len(batch)
    return rows


def as_user(sc, data, rows, **train_args):
    """(f), (h), (i): rows/s of run() + train() + shutdown(), timed on the driver, defaults
    but ``train_args``."""
    import time

    import sparktf

    start = time.perf_counter()
    cluster = sparktf.run(
        sc,
        consume_quietly,
        None,
        num_executors=2,
        log_to_driver=False,
        input_mode=sparktf.InputMode.SPARK,
    )
    cluster.train(data, **train_args)
    cluster.shutdown()
    secs = time.perf_counter() - start
    assert sum(cluster.results.values()) + cluster.rows_held_back == rows
    return rows / secs


def driver_timed(fn, rows):
    import time

    start = time.perf_counter()
    fn()
    return rows / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=60000)
    p.add_argument("--master", default="local-cluster[2,1,2048]")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--only", default="abcd", help="which figures to measure, e.g. cd")
    p.add_argument(
        "--data",
        choices=("python", "jvm"),
        default="python",
        help="make the rows in Python workers (mapInArrow) or in the JVM",
    )
    p.add_argument(
        "--profile",
        metavar="DIR",
        help="py-spy the (c) and (d) processes into DIR (raw stacks; slows the measured runs)",
    )
    a = p.parse_args()
    if a.profile:
        os.makedirs(a.profile, exist_ok=True)
        os.environ["BENCH_PROFILE_DIR"] = os.path.abspath(a.profile)
    from pyspark import StorageLevel
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(a.master)
        .appName("sparktf-feed-bench")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.BENCH_PROFILE_DIR", os.environ.get("BENCH_PROFILE_DIR", ""))
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    import sparktf.driver.sparkfacts as pf

    pf.wait_for_slots(sc, 2, 60)
    if a.data == "jvm":  # the same shape of rows, and no Python worker touched them
        df = spark.range(0, a.rows, numPartitions=2).selectExpr(
            f"transform(sequence(0, {WIDTH - 1}), i -> cast(((id * {WIDTH} + i) % 1000) / "
            "1000.0 as float)) as features",
            "id % 10 as label",
        )
    else:
        df = spark.range(0, a.rows, numPartitions=2).mapInArrow(
            make_batches, "features array<float>, label long"
        )
    if set("abef") & set(a.only):  # --only cd: room in the 2 GiB executors for more rows
        df = df.persist(StorageLevel.MEMORY_ONLY)
        df.count()

    def to_example(row):
        import numpy as np

        return (np.asarray(row.features, dtype="float32"), int(row.label))

    rdd = None
    if set("cdghi") & set(a.only):
        rdd = df.rdd.map(to_example).persist(StorageLevel.MEMORY_ONLY)
        rdd.count()
    mb = a.rows * (WIDTH * 4 + 8) / 1e6
    print(
        f"{a.rows} rows ({mb:.0f} MB of features, made in {a.data}), cached as a DataFrame "
        f"and as an RDD, {a.master}, 2 nodes; best of {a.repeats}"
    )
    figures, every = {}, {}
    for _ in range(a.repeats):
        runs = {
            "a": lambda: rate(
                [
                    (r.rows, r.secs, {"task": r.cpu})
                    for r in df.mapInArrow(touch_arrow, TOUCHED, barrier=True).collect()
                ],
                "a",
            ),
            "b": lambda: sparktf_rate(sc, df, "b"),
            "c": lambda: rate(rdd.barrier().mapPartitions(touch_rdd).collect(), "c"),
            "d": lambda: sparktf_rate(sc, rdd, "d"),
            "e": lambda: driver_timed(
                lambda: df.mapInArrow(touch_arrow, TOUCHED, barrier=True).collect(), a.rows
            ),
            "f": lambda: as_user(sc, df, a.rows),
            "g": lambda: driver_timed(
                lambda: rdd.barrier().mapPartitions(touch_rdd).collect(), a.rows
            ),
            "h": lambda: as_user(sc, rdd, a.rows),
            "i": lambda: as_user(sc, rdd, a.rows, equalize=False),
        }
        for key, fn in runs.items():
            if key in a.only:
                value = fn()
                every.setdefault(key, []).append(value)
                figures[key] = max(figures.get(key, 0), value)
    print("\n| | rows/s | MB/s | vs ceiling |")
    print("|---|---|---|---|")
    per_row = (WIDTH * 4 + 8) / 1e6
    names = {
        "a": "(a) ceiling: barrier mapInArrow over the cached DataFrame",
        "b": "(b) sparktf feeding the DataFrame",
        "c": "(c) ceiling: barrier mapPartitions over the cached RDD",
        "d": "(d) sparktf feeding the RDD",
        "e": "(e) Spark's barrier mapInArrow, timed on the driver",
        "f": "(f) sparktf run+train+shutdown (DataFrame), timed on the driver",
        "g": "(g) Spark's barrier mapPartitions, timed on the driver",
        "h": "(h) sparktf run+train+shutdown (RDD), timed on the driver",
        "i": "(i) the same, train(equalize=False)",
    }
    base = {
        "a": "a",
        "b": "a",
        "c": "c",
        "d": "c",
        "e": "e",
        "f": "e",
        "g": "g",
        "h": "g",
        "i": "g",
    }
    for key in a.only:
        ceiling = figures.get(base[key], float("nan"))
        print(
            f"| {names[key]} | {figures[key]:,.0f} | {figures[key] * per_row:,.0f} | "
            f"{figures[key] / ceiling:.2f} |"
        )
    pairs = [
        (b, c)
        for b, c in (("a", "b"), ("c", "d"), ("e", "f"), ("g", "h"), ("g", "i"))
        if b in every and c in every
    ]
    if pairs and a.repeats > 1:
        # Each repeat runs the ceiling and sparktf back to back: the ratio within a repeat
        # shares that moment's machine, which the best-of figures above do not.
        print(f"\nsparktf against the ceiling within each repeat (median, min-max of {a.repeats}):")
        for base_key, key in pairs:
            ratios = sorted(x / y for x, y in zip(every[key], every[base_key]))
            print(
                f"  ({key}) / ({base_key}): {statistics.median(ratios):.2f} "
                f"({ratios[0]:.2f}-{ratios[-1]:.2f})"
            )
    if CPU:
        print("\nCPU seconds per 100k rows (user + system, all nodes, the fastest run):")
        for key, use in sorted(CPU.items()):
            parts = ", ".join(f"{k} {v:.2f}" for k, v in use.items() if k != "_rate")
            total = sum(v for k, v in use.items() if k != "_rate")
            print(f"  ({key}) {parts}; total {total:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
