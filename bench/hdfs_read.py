"""HDFS read rate into the TF processes through each sparktf.fs backend, next to Spark's own
read of the same files, all in one run against a real HDFS on loopback.

    python3 bench/hdfs_read.py [--rows 60000] [--files 4] [--repeats 2]

Starts the test HDFS (bin/hdfs-test-cluster.sh: Apache Hadoop 2.7.3 NameNode + DataNode on
127.0.0.1, fetched once from registry packages) unless SPARKTF_TEST_HDFS names a running one,
writes ``--rows`` MNIST-sized rows (784 float32 and a label) as ``--files`` Parquet files with
Spark, and measures, on ``local[2]``:

(a) Spark: ``spark.read.parquet(path)`` fully read and decoded (``write.format("noop")``);
(b) sparktf, InputMode.TENSORFLOW, 2 nodes, each reading its half of the files with
    ``sparktf.fs.read_bytes`` through libhdfs (pyarrow's HadoopFileSystem) and decoding them
    with pyarrow.parquet;
(c) the same through WebHDFS (the hdfs package).

For (b) and (c) the figure is total rows (and Parquet bytes) / the longest node's read time,
timed inside the TF processes. MB are 10^6 bytes of Parquet files. The best of ``--repeats``.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_share(args, ctx):
    """In the TF process: this node's files, read and decoded; (rows, bytes, seconds)."""
    import io
    import time

    import pyarrow.parquet as pq

    from sparktf import fs

    files = fs.list_files(args["path"])[ctx.rank :: ctx.num_workers]
    fs.backend(args["path"])  # connect before timing
    start = time.perf_counter()
    rows = size = 0
    for f in files:
        data = fs.read_bytes(f)
        size += len(data)
        rows += pq.read_table(io.BytesIO(data)).num_rows
    return {
        "rows": rows,
        "bytes": size,
        "secs": time.perf_counter() - start,
        "backend": fs.backend(args["path"]).name,
    }


def start_hdfs():
    if os.environ.get("SPARKTF_TEST_HDFS"):
        return None, {
            k: os.environ[k]
            for k in ("SPARKTF_TEST_HDFS", "SPARKTF_WEBHDFS_URL", "CLASSPATH", "ARROW_LIBHDFS_DIR")
        }
    state = tempfile.mkdtemp(prefix="bench-hdfs-")
    env = dict(os.environ, SPARKTF_HDFS_DIR=os.path.join(state, "s"))
    out = subprocess.run(
        [os.path.join(ROOT, "bin", "hdfs-test-cluster.sh"), "start"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    exported = dict(
        line[7:].split("=", 1) for line in out.stdout.splitlines() if line.startswith("export ")
    )
    return env, exported


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=60000)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    stop_env, hdfs = start_hdfs()
    os.environ["SPARKTF_DEFAULT_FS"] = hdfs["SPARKTF_TEST_HDFS"]
    os.environ["SPARKTF_WEBHDFS_URL"] = hdfs["SPARKTF_WEBHDFS_URL"]
    try:
        run(a, hdfs)
    finally:
        if stop_env is not None:
            subprocess.run(
                [os.path.join(ROOT, "bin", "hdfs-test-cluster.sh"), "stop"],
                env=stop_env,
                capture_output=True,
            )


def run(a, hdfs):
    import cloudpickle
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import sparktf
    from sparktf import fs

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-hdfs")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    path = hdfs["SPARKTF_TEST_HDFS"] + "/bench/mnist.parquet"
    (
        spark.range(a.rows, numPartitions=a.files)
        .select(
            (F.col("id") % 10).alias("label"),
            F.expr("transform(sequence(1, 784), i -> cast(rand() * 255 as float))").alias("image"),
        )
        .write.mode("overwrite")
        .parquet(path)
    )
    files = fs.list_files(path)
    print(
        f"{a.rows} rows x 784 float32 in {len(files)} Parquet files on HDFS (Hadoop 2.7.3 "
        f"on loopback), local[2], best of {a.repeats}"
    )

    best = {}
    for _ in range(a.repeats):
        t = time.perf_counter()
        spark.read.parquet(path).write.format("noop").mode("overwrite").save()
        best["Spark read.parquet (noop sink)"] = min(
            best.get("Spark read.parquet (noop sink)", 1e9), time.perf_counter() - t
        )
        for backend in ("libhdfs", "webhdfs"):
            env = {"SPARKTF_HDFS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
            if backend == "libhdfs":
                env.update({k: hdfs[k] for k in ("CLASSPATH", "ARROW_LIBHDFS_DIR")})
            cluster = sparktf.run(
                spark.sparkContext, read_share, {"path": path}, num_executors=2, env=env
            )
            cluster.shutdown(timeout=300)
            res = cluster.results.values()
            assert sum(r["rows"] for r in res) == a.rows
            assert {r["backend"] for r in res} == {backend}
            key = f"sparktf.fs in the TF nodes, {backend}"
            best[key] = min(best.get(key, 1e9), max(r["secs"] for r in res))
            total = sum(r["bytes"] for r in res)
    mb = total / 1e6
    print(f"{mb:.1f} MB of Parquet\n| reader | seconds | rows/s | MB/s |\n|---|---|---|---|")
    for name, secs in best.items():
        print(f"| {name} | {secs:.2f} | {a.rows / secs:,.0f} | {mb / secs:.0f} |")
    spark.stop()


if __name__ == "__main__":
    main()
