"""A small sparktf job that one OS user runs in tests/spark/test_two_users.py: local[2], an RDD
of 100 ints fed to 2 nodes (InputMode.SPARK), no TensorFlow. Run as a script:
``python3 user_job.py OUT.json PORT_RANGE``; writes what it saw to OUT.json (also a failure:
its type and message)."""

import json
import os
import stat
import sys


def main_fn(args, ctx):
    """Sum the fed ints; say which port, user and private directory the node had."""
    import time

    started = time.time()
    print(f"{ctx.name} of uid {os.getuid()} starts", flush=True)  # (a line for its log file)
    feed = ctx.get_data_feed(train_mode=True)
    total = 0
    while not feed.should_stop():
        total += sum(feed.next_batch(16))
    st = os.stat(ctx.work_dir)
    sock = os.stat(os.path.dirname(ctx._runtime.spec.feed_path))  # the feed socket's directory
    return {
        "sock_dir_mode": stat.S_IMODE(sock.st_mode),
        "sock_dir_uid": sock.st_uid,
        "sum": total,
        "span": [started, time.time()],  # while it held its port (at least)
        "port": ctx.port,
        "uid": os.getuid(),
        "work_dir": ctx.work_dir,
        "work_dir_mode": stat.S_IMODE(st.st_mode),
        "work_dir_uid": st.st_uid,
    }


def main():
    from pyspark import SparkConf, SparkContext

    import sparktf

    out, port_range = sys.argv[1], sys.argv[2]
    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName("sparktf-two-users")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.ui.enabled", "false")
        .set("spark.sparktf.portRange", port_range)
    )
    sc = SparkContext(conf=conf)
    try:
        cluster = sparktf.run(sc, main_fn, {}, num_executors=2, input_mode=sparktf.InputMode.SPARK)
        cluster.train(sc.parallelize(range(1, 101), 2))
        cluster.shutdown(timeout=120)
        result = {"ok": True, "results": cluster.results, "log_files": cluster.log_files}
    except Exception as exc:
        result = {"ok": False, "error": type(exc).__name__, "message": str(exc)}
    finally:
        sc.stop()
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
