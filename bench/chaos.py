"""Chaos, measured: a ParameterServerStrategy job run N times per fault, each fault injected at
a random moment of training, and what came of it.

    python3 bench/chaos.py [--runs 3] [--master local-cluster[4,1,1024]] [--seed S]

The job (chief + 2 workers + 1 ps, tf-keras ``model.fit`` of a small regression, 40 epochs of
20 steps) runs with ``max_restarts=1`` and the default ``worker_restarts`` (3 with a ps). Per
run, once the chief has reported its first epoch, the bench waits a random 0.5-3 s and injects
one fault:

* ``none``: undisturbed (the baseline, same SparkContext, same session);
* ``worker-kill``: SIGKILL of worker:0's TF process (restarted in place);
* ``worker-kill-whole``: the same with ``worker_restarts=0``: today's whole-cluster restart;
* ``worker-stop``: SIGSTOP of worker:0's TF process (``heartbeat_timeout=6``): once silent
  that long, its supervisor kills it and it is restarted in place;
* ``ps-kill``: SIGKILL of the parameter server (whole restart);
* ``chief-kill``: SIGKILL of the chief (whole restart);
* ``executor-kill``: SIGKILL of worker:0's executor JVM (whole restart on the executors left).

Per fault kind it prints: runs completed, wall time (median, max) and its extra over the
undisturbed median, the final loss's change against the undisturbed median, and anything left
behind (sparktf processes of this bench still alive 10 s after the job, ports of the job's TF
servers still held by a process). A first undisturbed run warms the executors up, uncounted. The job restarts from scratch (no checkpoint): a whole-cluster restart
costs the training done before the fault again. Traffic stays on loopback.
"""

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "TF_USE_LEGACY_KERAS": "1"}
KINDS = (
    "none",
    "worker-kill",
    "worker-kill-whole",
    "worker-stop",
    "ps-kill",
    "chief-kill",
    "executor-kill",
)


def ps_job(args, ctx):
    """Workers serve; the chief trains and reports each epoch; every node notes its pid."""
    with open(os.path.join(args["dir"], f"{ctx.name}.{ctx.attempt}.pid"), "w") as f:
        f.write(str(os.getpid()))
    if ctx.job_name == "worker":
        ctx.serve()
        return None
    with open(os.path.join(args["dir"], "cluster.json"), "w") as f:
        json.dump(ctx.cluster_spec, f)
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.experimental.ParameterServerStrategy(ctx.cluster_resolver())
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.02), loss="mse", steps_per_execution=5)

    def dataset_fn(input_context):
        rng = np.random.RandomState(input_context.input_pipeline_id)
        x = rng.randn(512, 4).astype("float32")
        y = (x @ np.array([1.0, 2.0, 3.0, 4.0], "float32")[:, None] + 0.5).astype("float32")
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).batch(32).repeat()

    class Report(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            ctx.report(step=epoch + 1)

    hist = model.fit(
        keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=args["epochs"],
        steps_per_epoch=20,
        verbose=0,
        callbacks=[Report()],
    )
    x = np.random.RandomState(99).randn(1000, 4).astype("float32")
    y = x @ np.array([1.0, 2.0, 3.0, 4.0], "float32")[:, None] + 0.5
    test_loss = float(np.mean((model.predict(x, verbose=0) - y) ** 2))
    return {"loss": float(hist.history["loss"][-1]), "test_loss": test_loss}


def _pid(folder, name):
    """The newest pid node ``name`` noted (its latest attempt)."""
    found = sorted(f for f in os.listdir(folder) if f.startswith(name + ".") and f.endswith(".pid"))
    if not found:
        return None
    with open(os.path.join(folder, found[-1])) as f:
        return int(f.read())


def _listener(port):
    import psutil

    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == "LISTEN" and conn.pid:
            return conn.pid
    return None


def _target(kind, folder):
    """The pid the fault goes to."""
    import psutil

    if kind.startswith("worker"):
        return _pid(folder, "worker:0")
    if kind == "chief-kill":
        return _pid(folder, "chief:0")
    if kind == "ps-kill":
        with open(os.path.join(folder, "cluster.json")) as f:
            return _listener(int(json.load(f)["ps"][0].rsplit(":", 1)[1]))
    if kind == "executor-kill":
        proc = psutil.Process(_pid(folder, "worker:0"))
        while proc is not None and "CoarseGrainedExecutorBackend" not in " ".join(proc.cmdline()):
            proc = proc.parent()
        return proc.pid if proc is not None else None
    return None


def _inject(cluster, kind, folder, rng, log):
    """Once the chief has reported its first epoch, wait a random moment and send the fault."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        step = (cluster.progress().get("chief:0") or {}).get("step")
        if step:
            break
        time.sleep(0.1)
    else:
        return
    time.sleep(rng.uniform(0.5, 3.0))
    pid = _target(kind, folder)
    sig = signal.SIGSTOP if kind == "worker-stop" else signal.SIGKILL
    if pid:
        os.kill(pid, sig)
        log["fault_at"] = time.monotonic()
        log["pid"] = pid


def _ours():
    """sparktf processes below this bench (supervisors and TF processes)."""
    import psutil

    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline())
            if proc.name() in ("sparktf-sup", "sparktf-node") or "sparktf.node" in cmd:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc.pid)
        except psutil.Error:
            pass
    return found


def _ports_held(folder):
    """Ports of the job's TF servers that a process still holds (listening or bound) once the
    job is over; a port with only TIME_WAIT connections left (the kernel's, no process) is not
    held."""
    import psutil

    path = os.path.join(folder, "cluster.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        spec = json.load(f)
    ports = {int(a.rsplit(":", 1)[1]) for addresses in spec.values() for a in addresses}
    return sorted(
        {
            c.laddr.port
            for c in psutil.net_connections("tcp")
            if c.laddr and c.laddr.port in ports and c.pid and c.status != "TIME_WAIT"
        }
    )


def one_run(sc, kind, rng, epochs):
    import sparktf

    folder = tempfile.mkdtemp(prefix="sparktf-chaos-")
    args = {"dir": folder, "epochs": epochs}
    options = dict(num_executors=4, num_ps=1, max_restarts=1, env=TF_ENV, progress=False)
    if kind == "worker-kill-whole":
        options["worker_restarts"] = 0
    if kind == "worker-stop":
        options["heartbeat_timeout"] = 6
    log = {}
    start = time.monotonic()
    cluster = sparktf.run(sc, ps_job, args, **options)
    injector = None
    if kind != "none":
        injector = threading.Thread(target=_inject, args=(cluster, kind, folder, rng, log))
        injector.start()
    result, error = None, None
    try:
        result = cluster.shutdown(timeout=300)
    except Exception as exc:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    wall = time.monotonic() - start
    if injector is not None:
        injector.join()
    if log.get("pid") and kind == "worker-stop":  # (killed since, unless something failed)
        try:
            os.kill(log["pid"], signal.SIGCONT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.2)
    return {
        "kind": kind,
        "wall": wall,
        "completed": error is None,
        "error": error,
        "test_loss": result["test_loss"] if result else None,
        "attempts": cluster.attempt + 1,
        "in_place": sum(bool(getattr(f, "restarted_in_place", False)) for f in cluster.failures),
        "left": _ours(),
        "ports_held": _ports_held(folder),
        "faulted": "pid" in log,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local-cluster[4,1,1024]")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", default=None, help="write every run as JSON lines here")
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    from pyspark import SparkConf, SparkContext

    import sparktf  # noqa: F401

    conf = (
        SparkConf()
        .setMaster(opts.master)
        .setAppName("sparktf-chaos")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.ui.enabled", "false")
        .set("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
        .set("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .set("spark.pyspark.python", sys.executable)
        .set("spark.sparktf.slotWaitTimeout", "180")
    )
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    kinds = opts.kinds.split(",")
    print(f"seed {seed}, {opts.runs} runs per fault, master {opts.master}", flush=True)
    runs = []
    try:
        warm = one_run(sc, "none", rng, opts.epochs)  # executors and their workers start cold
        print(f"warm-up (not counted): {json.dumps(warm)}", flush=True)
        for _ in range(opts.runs):
            for kind in kinds:
                run = one_run(sc, kind, rng, opts.epochs)
                runs.append(run)
                print(json.dumps(run), flush=True)
                if opts.out:
                    with open(opts.out, "a") as f:
                        f.write(json.dumps(run) + "\n")
    finally:
        sc.stop()
    report(runs)


def report(runs):
    base = [r["wall"] for r in runs if r["kind"] == "none" and r["completed"]]
    base_wall = statistics.median(base) if base else float("nan")
    losses = [r["test_loss"] for r in runs if r["kind"] == "none" and r["completed"]]
    base_loss = statistics.median(losses) if losses else float("nan")
    print(
        "\n| fault | completed | wall median (max) s | extra vs undisturbed median (max) s "
        "| test loss vs undisturbed | attempts | restarts in place | left behind |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind in dict.fromkeys(r["kind"] for r in runs):
        rs = [r for r in runs if r["kind"] == kind]
        done = [r for r in rs if r["completed"]]
        walls = [r["wall"] for r in done]
        wall = f"{statistics.median(walls):.1f} ({max(walls):.1f})" if walls else "-"
        extra = (
            f"{statistics.median(walls) - base_wall:+.1f} ({max(walls) - base_wall:+.1f})"
            if walls
            else "-"
        )
        delta = [r["test_loss"] - base_loss for r in done if r["test_loss"] is not None]
        loss = f"{max(delta, key=abs):+.1e} (max abs)" if delta else "-"
        left = sum(len(r["left"]) + len(r["ports_held"]) for r in rs)
        errors = {r["error"] for r in rs if r["error"]}
        print(
            f"| {kind} | {len(done)}/{len(rs)} | {wall} | {extra} | {loss} "
            f"| {', '.join(str(r['attempts']) for r in rs)} "
            f"| {', '.join(str(r['in_place']) for r in rs)} | {left or 'nothing'} |"
            + (f" errors: {sorted(errors)}" if errors else "")
        )


if __name__ == "__main__":
    main()
