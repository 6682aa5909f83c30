"""How long a sparktf cluster takes to start and stop, and to report a crash.

    python3 bench/cluster_lifecycle.py [--master local-cluster[2,1,1024]] [--repeats 5]

Prints, from one run on one SparkContext:

* baseline: a 2-task barrier stage whose tasks call ``allGather`` once and return (Spark's own
  floor for any barrier gang that exchanges addresses), cold and warm;
* sparktf: a trivial 2-node job (chief + worker, main_fn returns a dict), run() to shutdown(),
  cold (first job on fresh executors) and warm (median of the following ones).
  Each side gets a fresh SparkContext, so both "cold" figures start from new executors;
* scaling: on ``--scale-master`` (local[8]), a warm trivial job of 2 nodes and of 8 nodes,
  next to Spark's own barrier stage of 2 and of 8 Python tasks (returning at once, and with
  one allGather) on the same SparkContext; wall and the whole host's CPU-seconds (Linux
  ``/proc/stat``: with 8 nodes on 2 cores the job is CPU-bound, and CPU is the steadier
  figure on a shared machine);
* parameter servers: on the same SparkContext, the trivial job with ``num_ps=2`` (4 nodes),
  next to the same 4 nodes without parameter servers (a ps imports TensorFlow to run its
  server; a job shorter than that import should not wait for it);
* crash detection: a worker kills itself with SIGKILL (or raises) and the time from that moment
  to the driver's NodeError (both clocks are this machine's ``time.time()``).

Traffic stays on loopback (SPARK_LOCAL_IP=127.0.0.1).
"""

import argparse
import os
import statistics
import sys
import time

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def trivial(args, ctx):
    return {"node": ctx.name}


def crash(args, ctx):
    import signal
    import time

    if ctx.name == "worker:0":
        time.sleep(1.0)
        print(f"CRASH_AT={time.time():.6f}", flush=True)
        if args == "raise":
            raise RuntimeError("injected failure")
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)


def _gather_once(_):
    from pyspark import BarrierTaskContext

    BarrierTaskContext.get().allGather("x")
    return [1]


def _return_at_once(_):
    return [1]


def bare_barrier(sc, tasks=2, task=_gather_once):
    """Spark's floor for a gang of ``tasks`` Python tasks running ``task`` (by default one
    allGather; ``_return_at_once``: nothing at all)."""
    start = time.perf_counter()
    sc.parallelize(range(tasks), tasks).barrier().mapPartitions(task).collect()
    return time.perf_counter() - start


def host_cpu():
    """CPU-seconds the whole host has spent so far (user, nice and system; Linux
    ``/proc/stat``): every process of a job, the JVM's and the kernel's work included."""
    with open("/proc/stat") as f:
        user, nice, system = (int(x) for x in f.readline().split()[1:4])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def medians(fn, repeats, *args):
    """Median wall seconds (as ``fn`` returns them) and median host CPU-seconds of
    ``repeats`` calls of ``fn(*args)``."""
    walls, cpus = [], []
    for _ in range(repeats):
        before = host_cpu()
        walls.append(fn(*args))
        cpus.append(host_cpu() - before)
    return statistics.median(walls), statistics.median(cpus)


def sparktf_job(sc, nodes=2, num_ps=0):
    import sparktf

    start = time.perf_counter()
    sparktf.run(sc, trivial, num_executors=nodes, num_ps=num_ps, log_to_driver=False).shutdown()
    return time.perf_counter() - start


def crash_latency(sc, how):
    import sparktf

    cluster = sparktf.run(sc, crash, how, num_executors=2, log_to_driver=False)
    try:
        cluster.shutdown(timeout=60)
    except sparktf.NodeError as err:
        seen = time.time()
        at = [float(x.split("=")[1]) for x in err.output_tail if x.startswith("CRASH_AT=")]
        return seen - at[0]
    raise AssertionError("the crash was not reported")


def fresh_context(master, slots=2):
    from pyspark import SparkConf, SparkContext

    import sparktf.driver.sparkfacts as pf

    t0 = time.perf_counter()
    sc = SparkContext(
        conf=SparkConf()
        .setMaster(master)
        .setAppName("sparktf-bench")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
    )
    sc.setLogLevel("ERROR")
    pf.wait_for_slots(sc, slots, 60)
    print(f"SparkContext {master} up with {slots} slots in {time.perf_counter() - t0:.1f}s")
    return sc


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", default="local-cluster[2,1,1024]")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--scale-master",
        default="local[8]",
        help="where 2-node and 8-node warm jobs are compared ('' to skip)",
    )
    a = p.parse_args()
    sc = fresh_context(a.master)
    base_cold = bare_barrier(sc)
    base_warm = statistics.median(bare_barrier(sc) for _ in range(a.repeats))
    sc.stop()
    sc = fresh_context(a.master)
    cold = sparktf_job(sc)
    warm_runs = [sparktf_job(sc) for _ in range(a.repeats)]
    kill = [crash_latency(sc, "kill") for _ in range(3)]
    raised = [crash_latency(sc, "raise") for _ in range(3)]
    sc.stop()
    print(f"\n| {a.master} | cold | warm (median of {a.repeats}) |")
    print("|---|---|---|")
    print(
        f"| baseline: 2-task barrier stage, one allGather | {base_cold:.2f} s | {base_warm:.2f} s |"
    )
    print(
        f"| sparktf: trivial 2-node job, run() to shutdown() | {cold:.2f} s | "
        f"{statistics.median(warm_runs):.2f} s (min {min(warm_runs):.2f}) |"
    )
    print(f"\ncrash to driver exception, worker SIGKILLed: {', '.join(f'{x:.2f}' for x in kill)} s")
    print(f"crash to driver exception, main_fn raised:  {', '.join(f'{x:.2f}' for x in raised)} s")
    if a.scale_master:
        sc = fresh_context(a.scale_master, 8)
        sparktf_job(sc, 8)  # warm the Python workers of all 8 slots
        two, two_cpu = medians(sparktf_job, a.repeats, sc, 2)
        eight, eight_cpu = medians(sparktf_job, a.repeats, sc, 8)
        bare_barrier(sc, 8, _return_at_once)
        s2, s2_cpu = medians(bare_barrier, a.repeats, sc, 2, _return_at_once)
        s8, s8_cpu = medians(bare_barrier, a.repeats, sc, 8, _return_at_once)
        g2 = statistics.median(bare_barrier(sc, 2) for _ in range(a.repeats))
        g8 = statistics.median(bare_barrier(sc, 8) for _ in range(a.repeats))
        four = statistics.median(sparktf_job(sc, 4) for _ in range(a.repeats))
        with_ps = statistics.median(sparktf_job(sc, 4, 2) for _ in range(a.repeats))
        sc.stop()
        print(f"\n| {a.scale_master}, warm (median of {a.repeats}) | 2 | 8 | 8 / 2 |")
        print("|---|---|---|---|")
        print(
            f"| sparktf: trivial job, run() to shutdown() | {two:.2f} s | {eight:.2f} s | "
            f"{eight / two:.2f} x |"
        )
        print(
            f"| baseline: barrier stage of Python tasks that return at once | {s2:.2f} s | "
            f"{s8:.2f} s | {s8 / s2:.2f} x |"
        )
        print(f"| baseline: the same, one allGather | {g2:.2f} s | {g8:.2f} s | {g8 / g2:.2f} x |")
        print(
            f"| sparktf: host CPU-seconds per job | {two_cpu:.2f} | {eight_cpu:.2f} | "
            f"{eight_cpu / max(two_cpu, 1e-9):.2f} x |"
        )
        print(
            f"| baseline: host CPU-seconds per empty stage | {s2_cpu:.2f} | {s8_cpu:.2f} | "
            f"{s8_cpu / max(s2_cpu, 1e-9):.2f} x |"
        )
        print(
            f"sparktf's own cost over the empty barrier stage: 2 nodes {two - s2:.2f} s, "
            f"8 nodes {eight - s8:.2f} s ({(eight - s8) / max(two - s2, 1e-9):.2f} x); "
            f"CPU per node {(eight_cpu - s8_cpu) / 8 * 1000:.0f} ms "
            f"({os.cpu_count()} cores)"
        )
        print(
            f"\nthe mission's call, sparktf.run(sc, main_fn, num_ps=2), trivial main_fn, "
            f"4 nodes (2 ps, chief, worker): {with_ps:.2f} s; the same 4 nodes without "
            f"parameter servers: {four:.2f} s ({with_ps / four:.2f} x)"
        )


if __name__ == "__main__":
    main()
