"""Rows per second that ``sparktf.predict`` scores, against Spark's own ``predict_batch_udf``.

    python3 bench/predict_throughput.py [--rows 100000] [--repeats 5] [--batch-size 1024]
                                        [--master local[2]] [--output array<double>]

The same SavedModel (a dense 784-128-10 network, the size of the MNIST examples' head, exported
with Keras 3's ``model.export``), the same cached DataFrame (``--rows`` rows of
``array<float>`` 784, one partition per core), the same batch size, in one run:

(a) sparktf: ``sparktf.predict(df, path, ["features"], "prediction", output_type=...)``;
(b) Spark: ``df.withColumn("prediction", predict_batch_udf(make_predict_fn, ...)("features"))``
    where ``make_predict_fn`` loads the same SavedModel with ``tf.saved_model.load`` and calls
    its ``serving_default`` signature, as the UDF's documentation shows.

Each is computed in full with ``write.format("noop")`` (every row scored, nothing collected).
One warm-up call of each loads the model into the Python workers; then ``--repeats`` rounds,
each running both, the order alternating from one round to the next. Printed: each side's rate
(median and range of its rounds) and the median (and range) of the per-round ratio sparktf /
Spark: on a shared machine that ratio is steadier than a ratio of two figures taken at
different moments. Also the CPU seconds that Spark's JVM and its Python workers spent on each
(psutil, the JVM's process tree), and their ratio: on a busy shared machine, where the wall
time swings with the neighbours' load, the work each side asks for. Loopback only.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

WIDTH = 784

OUTPUT_TYPES = ("array<double>", "array<float>")


def export_model(path: str) -> None:
    """The 784-128-10 dense SavedModel, seeded weights, in a process of its own."""
    code = textwrap.dedent(f"""
        import os
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import contextlib, io
        import keras
        keras.utils.set_random_seed(7)
        model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(128, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        with contextlib.redirect_stdout(io.StringIO()):
            model.export({path!r})
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)


def make_batches(batches):
    import numpy as np
    import pyarrow as pa

    for b in batches:
        ids = b.column(0).to_numpy()
        rng = np.random.RandomState(int(ids[0]) if len(ids) else 0)
        flat = rng.rand(len(ids) * WIDTH).astype("float32")
        features = pa.ListArray.from_arrays(
            pa.array(np.arange(len(ids) + 1, dtype="int32") * WIDTH), pa.array(flat)
        )
        yield pa.RecordBatch.from_arrays([pa.array(ids), features], ["id", "features"])


def spark_udf(path: str, output_type: str, batch_size: int):
    """Spark's own: ``predict_batch_udf`` over the same SavedModel."""
    from pyspark.ml.functions import predict_batch_udf
    from pyspark.sql.types import ArrayType, DoubleType, FloatType

    types = {"array<double>": ArrayType(DoubleType()), "array<float>": ArrayType(FloatType())}

    def make_predict_fn():
        import tensorflow as tf

        fn = tf.saved_model.load(path).signatures["serving_default"]
        (key,) = fn.structured_outputs

        def predict(x):
            return fn(tf.constant(x))[key].numpy()

        return predict

    return predict_batch_udf(
        make_predict_fn,
        return_type=types[output_type],
        batch_size=batch_size,
        input_tensor_shapes=[[WIDTH]],
    )


def spark_cpu(pid: int) -> float:
    """CPU seconds so far of Spark's JVM (launched by pyspark as ``pid``) and every process
    under it (the Python workers; those that ended count in their parent's children times)."""
    import psutil

    total = 0.0
    root = psutil.Process(pid)
    for proc in [root] + root.children(recursive=True):
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def timed(df, pid: int) -> tuple[float, float]:
    """Wall seconds and Spark's CPU seconds (JVM and Python workers) to compute ``df``."""
    cpu, start = spark_cpu(pid), time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start, spark_cpu(pid) - cpu


def machine() -> str:
    import pyarrow
    import pyspark

    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), ""
            )
    except OSError:
        pass
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    tf_version = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.metadata as m; print(m.version('tensorflow') "
            "if any(d.metadata['Name'] == 'tensorflow' for d in m.distributions()) else "
            "m.version('tensorflow-cpu'))",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (
        f"{platform.node()}: {os.cpu_count()} cores ({cpu}), Python "
        f"{platform.python_version()}, pyspark {pyspark.__version__}, tensorflow "
        f"{tf_version}, pyarrow {pyarrow.__version__}; load average {load}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--output", default="array<double>", choices=OUTPUT_TYPES)
    parser.add_argument(
        "--way",
        default="auto",
        choices=("auto", "mapInArrow"),
        help="mapInArrow: sparktf's way on pyspark 4.0 and Spark Connect "
        "(default: what this pyspark gets, an Arrow UDF on 4.1+)",
    )
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import sparktf

    if args.way == "mapInArrow":
        from sparktf.batch_prediction import dataframe

        dataframe._arrow_udf = lambda: None  # as where pyspark has no arrow_udf
    print(machine(), flush=True)
    root = tempfile.mkdtemp(prefix="sparktf-bench-predict-")
    path = os.path.join(root, "dense")
    export_model(path)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("bench-predict")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "3g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        parts = spark.sparkContext.defaultParallelism
        data = (
            spark.range(args.rows, numPartitions=parts)
            .mapInArrow(make_batches, "id long, features array<float>")
            .cache()
        )
        data.count()

        ours = sparktf.predict(
            data,
            path,
            ["features"],
            "prediction",
            output_type=args.output,
            batch_size=args.batch_size,
        )
        theirs = data.withColumn(
            "prediction", spark_udf(path, args.output, args.batch_size)("features")
        )
        check(ours, theirs)

        pid = spark.sparkContext._gateway.proc.pid  # the JVM pyspark launched
        results = {"sparktf": [], "spark": []}
        for name, df in (("sparktf", ours), ("spark", theirs)):
            print(f"warm-up {name}: {timed(df, pid)[0]:.2f} s", flush=True)
        for r in range(args.repeats):
            order = [("sparktf", ours), ("spark", theirs)]
            for name, df in order if r % 2 == 0 else order[::-1]:
                results[name].append(timed(df, pid))
            (a, ac), (b, bc) = results["sparktf"][-1], results["spark"][-1]
            print(
                f"round {r + 1}: sparktf {a:.2f} s ({ac:.2f} s CPU), Spark's UDF {b:.2f} s "
                f"({bc:.2f} s CPU)",
                flush=True,
            )
        report(results, args)
    finally:
        spark.stop()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def check(ours, theirs) -> None:
    """Both score the same rows alike (the first 200 by id)."""
    import numpy as np

    a = {r.id: r.prediction for r in ours.where("id < 200").select("id", "prediction").collect()}
    b = {r.id: r.prediction for r in theirs.where("id < 200").select("id", "prediction").collect()}
    assert a.keys() == b.keys() and len(a) == 200, (len(a), len(b))
    diff = max(float(np.max(np.abs(np.asarray(a[i]) - np.asarray(b[i])))) for i in a)
    assert diff < 1e-5, f"the two disagree by {diff}"


def report(results: dict, args) -> None:
    rows = args.rows
    print(
        f"\n{rows} rows of array<float> {WIDTH} -> {args.output}, batch_size "
        f"{args.batch_size}, {args.master}, {args.repeats} rounds (order alternating), "
        f"sparktf's way: {args.way}:"
    )
    for name, label in (("sparktf", "sparktf.predict"), ("spark", "predict_batch_udf")):
        rates = [rows / wall for wall, _ in results[name]]
        cpu = [c for _, c in results[name]]
        print(
            f"  {label:18s} {statistics.median(rates):9,.0f} rows/s (median; "
            f"{min(rates):,.0f}-{max(rates):,.0f}); {statistics.median(cpu):.2f} s of Spark's "
            f"CPU (JVM + Python workers; {min(cpu):.2f}-{max(cpu):.2f})"
        )
    for i, what in ((0, "rate"), (1, "CPU per row")):
        ratios = [theirs[i] / ours[i] for ours, theirs in zip(results["sparktf"], results["spark"])]
        print(
            f"  {what} ratio sparktf / Spark's UDF: {statistics.median(ratios):.2f} (median "
            f"of rounds; {min(ratios):.2f}-{max(ratios):.2f})"
            + ("  (> 1: sparktf needs less)" if i else "")
        )


if __name__ == "__main__":
    main()
