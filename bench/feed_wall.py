"""The feed as a user sees it: the driver's wall time of a whole sparktf call against Spark's
own barrier stage over the same cached data, in the same run.

    python3 bench/feed_wall.py --form df  [--rows 60000] [--repeats 3]
    python3 bench/feed_wall.py --form rdd [--rows 60000] [--repeats 3]

Rows of 784 float32 and a label (MNIST-sized), 2 training nodes, ``local-cluster[2,1,2048]``.
For each number of epochs E (1 and 3) and each layout of the data:

- sparktf: ``run()`` + ``train(data, num_epochs=E)`` + ``shutdown()``, every default, timed
  on the driver; the nodes read every batch (``feed.next_batch(1024)``) and do nothing else;
- Spark (the baseline): E passes of its own barrier stage over the 2-partition cached data,
  ``mapInArrow`` for a DataFrame, ``mapPartitions`` for an RDD, touching each batch, each
  pass ``collect()``-ed on the driver, timed on the driver, run back to back with sparktf.

Layouts: ``as-is`` is the data cached in 2 partitions, one per node: fed as it is; ``dealt``
is the same cached rows as 3 partitions (a union with an empty one), which sparktf deals out
over a shuffle; ``forced`` (``--layouts as-is,forced``) is the 2 cached partitions dealt out all
the same (``rebalance=True``: what sparktf 06a8b60 did with a cached DataFrame, whose count it
no longer read under adaptive execution). The baseline reads the 2 cached partitions (Spark's barrier stage needs a slot
per partition, and the cluster has 2).

**The ratio is Spark's wall / sparktf's wall**: how many times faster than Spark's own
passes the whole sparktf call is (above 1: faster; equal to sparktf's rows/s over Spark's).
Each repeat runs the two back to back, alternating which goes first; the ratio printed is the
median (and range) of the per-repeat ratios. With ``--phases`` each sparktf call's time is
split: ``run()``, ``train()`` to the first batch in a node (launch), first to last batch
(feed), last batch to ``train()``'s return, ``shutdown()``; and the first of Spark's passes of
each repeat the same way (the call to its last task's start, that start to its first batch,
first to last batch, last batch to ``collect()``'s return): what the two share (Spark making the
first Arrow batch out of the cache) shows beside what only sparktf pays. Loopback only.
"""

import argparse
import os
import statistics
import sys
import time

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

WIDTH = 784
BATCH = 1024
WHERE = set()  # the sparktf the nodes imported


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


def _touched(sizes):
    """Rows counted from ``sizes`` (one per batch or element), and when the task started and
    its first and last batch arrived (epoch seconds)."""
    started = time.time()
    rows, first = 0, None
    for n in sizes:
        if first is None:
            first = time.time()
        rows += n
    return rows, started, first if first is not None else started, time.time()


def touch_arrow(batches):
    import pyarrow as pa

    got = _touched(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict(
        dict(zip(("rows", "started", "first", "last"), [[x] for x in got]))
    )


def touch_rdd(items):
    yield _touched(1 for _ in items)


def read_all(args, ctx):
    """main_fn: every batch of every epoch, and when it started and the first and last batch
    arrived."""
    started = time.time()
    feed = ctx.get_data_feed()
    rows, first = 0, None
    while not feed.should_stop():
        batch = feed.next_batch(BATCH)
        if first is None:
            first = time.time()
        rows += len(batch["label"]) if isinstance(batch, dict) else len(batch)
    import sparktf

    return {
        "rows": rows,
        "started": started,
        "first": first,
        "last": time.time(),
        "sparktf": sparktf.__file__,
    }


def sparktf_call(sc, data, epochs, rows, phases, **train_args):
    """Seconds of run() + train() + shutdown() on the driver; their split into ``phases``."""
    import sparktf

    t0 = time.time()
    cluster = sparktf.run(
        sc, read_all, None, num_executors=2, log_to_driver=False, input_mode=sparktf.InputMode.SPARK
    )
    t1 = time.time()
    cluster.train(data, num_epochs=epochs, **train_args)
    t2 = time.time()
    cluster.shutdown()
    t3 = time.time()
    got = cluster.results.values()
    WHERE.update(r["sparktf"] for r in got)
    assert sum(r["rows"] for r in got) + cluster.rows_held_back == epochs * rows, got
    submitted = first_job_submitted(sc, cluster.job_id)
    started = max(r["started"] for r in got)
    first = max(r["first"] for r in got)
    last = max(r["last"] for r in got)
    for name, secs in (
        ("run()", t1 - t0),
        ("train() to the cluster's first Spark job", submitted - t1),
        ("that job's start to main_fn (the last node)", started - submitted),
        ("main_fn to the first batch (the last node)", first - started),
        ("feed: first to last batch", last - first),
        ("last batch to train()'s return", t2 - last),
        ("shutdown()", t3 - t2),
    ):
        phases.setdefault(name, []).append(secs)
    return t3 - t0


def first_job_submitted(sc, tag):
    """When Spark got the first of the cluster's jobs (its status store; epoch seconds)."""
    from sparktf.driver.sparkjobs import jobs_tagged

    store = sc._jsc.sc().statusStore()
    times = [store.job(j).submissionTime().get().getTime() / 1e3 for j in jobs_tagged(sc, tag)]
    return min(times)


def spark_passes(data, epochs, rows, phases=None):
    """Seconds of ``epochs`` passes of Spark's barrier stage over ``data``, on the driver; the
    first pass's split into ``phases``."""
    start = time.time()
    for epoch in range(epochs):
        t0 = time.time()
        if hasattr(data, "mapInArrow"):
            schema = "rows long, started double, first double, last double"
            got = [tuple(r) for r in data.mapInArrow(touch_arrow, schema, barrier=True).collect()]
        else:
            got = data.barrier().mapPartitions(touch_rdd).collect()
        assert sum(g[0] for g in got) == rows
        if phases is not None and epoch == 0:
            started, first, last = (max(g[i] for g in got) for i in (1, 2, 3))
            for name, secs in (
                ("the call to the task's start (the last task)", started - t0),
                ("the task's start to its first batch (the last task)", first - started),
                ("first to last batch", last - first),
                ("last batch to collect()'s return", time.time() - last),
            ):
                phases.setdefault(name, []).append(secs)
    return time.time() - start


def build(spark, form, rows, parts):
    """The rows cached in ``parts`` partitions, as a DataFrame or an RDD of (features, label)."""
    from pyspark import StorageLevel

    df = spark.range(0, rows, numPartitions=parts).mapInArrow(
        make_batches, "features array<float>, label long"
    )
    if form == "df":
        df = df.persist(StorageLevel.MEMORY_ONLY)
        df.count()
        return df

    def to_example(row):
        import numpy as np

        return (np.asarray(row.features, dtype="float32"), int(row.label))

    rdd = df.rdd.map(to_example).persist(StorageLevel.MEMORY_ONLY)  # only one copy cached
    rdd.count()
    return rdd


def with_an_empty_part(spark, data):
    """The same cached rows in 3 partitions: a union with one empty partition. Only one copy
    is cached (two of 150,000 rows do not fit the executors), and sparktf must deal it out:
    3 partitions for 2 nodes, a union that Spark's barrier stage refuses anyway."""
    if hasattr(data, "mapInArrow"):
        return data.union(spark.createDataFrame(spark.sparkContext.parallelize([], 1), data.schema))
    return data.union(spark.sparkContext.parallelize([], 1))


def measure(sc, layout, base, epochs, rows, repeats, phases):
    """Per repeat: (sparktf seconds, Spark seconds), run back to back, the order alternating."""
    data, train_args = layout
    out = []
    for i in range(repeats):
        spark = phases.setdefault("Spark's pass", {})
        if i % 2:
            ours = sparktf_call(sc, data, epochs, rows, phases, **train_args)
            theirs = spark_passes(base, epochs, rows, spark)
        else:
            theirs = spark_passes(base, epochs, rows, spark)
            ours = sparktf_call(sc, data, epochs, rows, phases, **train_args)
        out.append((ours, theirs))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--form", choices=("df", "rdd"), default="df")
    p.add_argument("--rows", type=int, default=60000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", default="1,3")
    p.add_argument("--layouts", default="as-is,dealt")
    p.add_argument("--master", default="local-cluster[2,1,2048]")
    p.add_argument("--phases", action="store_true", help="split each sparktf call's time")
    a = p.parse_args()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(a.master)
        .appName("sparktf-feed-wall")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    import sparktf
    import sparktf.driver.sparkfacts as pf

    pf.wait_for_slots(sc, 2, 60)
    base = build(spark, a.form, a.rows, 2)
    layouts = {
        "as-is": (base, {}),
        "dealt": (with_an_empty_part(spark, base), {}),
        "forced": (base, {"rebalance": True}),
    }
    spark_passes(base, 1, a.rows)  # warm both paths once: Python workers, imports
    sparktf_call(sc, base, 1, a.rows, {})
    print(
        f"{a.rows} rows of {WIDTH} float32 + label, cached ({a.form}), {a.master}, 2 nodes, "
        f"sparktf {os.path.dirname(sparktf.__file__)} (nodes: {sorted(WHERE)}); "
        f"{a.repeats} repeats\n"
    )
    print("| data | epochs | sparktf wall (median) | Spark's wall (median) | Spark / sparktf |")
    print("|---|---|---|---|---|")
    phases = {}
    for layout in a.layouts.split(","):
        for epochs in (int(e) for e in a.epochs.split(",")):
            split = phases.setdefault(f"{a.form}, {layout}, {epochs} epoch(s)", {})
            got = measure(sc, layouts[layout], base, epochs, a.rows, a.repeats, split)
            ratios = sorted(t / o for o, t in got)
            ours = statistics.median(o for o, _ in got)
            theirs = statistics.median(t for _, t in got)
            print(
                f"| {a.form}, {layout} | {epochs} | {ours:.2f} s | {theirs:.2f} s "
                f"({epochs} pass{'es' if epochs > 1 else ''}) | "
                f"**{statistics.median(ratios):.2f}** ({ratios[0]:.2f}-{ratios[-1]:.2f}) |"
            )
    if a.phases:
        print("\nsparktf's calls, split (median seconds, min-max):")
        for config, split in phases.items():
            print(f"  {config}:")
            for name, secs in split.items():
                if isinstance(secs, dict):  # the baseline's first pass, split the same way
                    print(f"    {name} (its first pass):")
                    for sub, s in secs.items():
                        print(
                            f"      {sub}: {statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f})"
                        )
                    continue
                print(
                    f"    {name}: {statistics.median(secs):.2f} ({min(secs):.2f}-{max(secs):.2f})"
                )
    spark.stop()


if __name__ == "__main__":
    main()
