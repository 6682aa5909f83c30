"""Submit to first training step, and submit to ``test_accuracy``: ``examples/mnist.py`` (no
flags but those a deploy mode needs) on YARN in client and cluster mode, against ``local[2]``
and a standalone cluster, all in this one run.

    python3 bench/yarn_submit.py [--repeats N] [--only local,standalone,yarn-client,yarn-cluster]

Starts a test YARN (``bin/yarn-test-cluster.sh``: Hadoop 3.5.0 RM + NM + NN + DN on loopback,
state in ``$TMPDIR/sparktf-bench-yarn``) and a standalone cluster (``bin/start-standalone.sh``,
2 workers x 1 core, 2 GB; state in ``$TMPDIR/sparktf-bench-standalone``), and stops both at the
end. Each run is one ``spark-submit`` of the same script; its output is read as it appears and
stamped (seconds since the submit started):

- first step: the first ``[sparktf] progress:`` line with a ``step`` (the chief's Keras
  callback reports every batch; the driver prints a line every 0.5 s here,
  ``spark.sparktf.progressInterval=0.5``, and the nodes' heartbeats carry the step each second:
  a resolution of about 1.5 s);
- test_accuracy: the ``test_accuracy=`` line (after training, the SavedModel scored again with
  sparktf.predict);
- exit: spark-submit's end (in cluster mode: the application's end as spark-submit reports it).

In cluster mode the driver runs in the ApplicationMaster's container: its stdout and stderr are
read from the NodeManager's container log directory while it runs. The topology is each
master's default for this script: ``local[2]`` one node on both cores (mnist.py's choice), the
others one node per task slot (2 executors x 1 core: 2 nodes). With ``--repeats N`` the four run
in turn N times and the medians are printed. Executors use this venv's Python (the NodeManager
is this machine).
"""

import argparse
import glob
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MNIST = os.path.join(ROOT, "examples", "mnist.py")
TMP = os.environ.get("TMPDIR", "/tmp")
YARN_DIR = os.path.join(TMP, "sparktf-bench-yarn")
STANDALONE_DIR = os.path.join(TMP, "sparktf-bench-standalone")
STEP = re.compile(r"\[sparktf\] progress: .*\bstep [1-9]")
ACCURACY = re.compile(r"^test_accuracy=(\d\.\d+)$")


def pyspark_home():
    import pyspark

    return os.path.dirname(pyspark.__file__)


def env(**extra):
    return dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        TF_CPP_MIN_LOG_LEVEL="3",
        **extra,
    )


COMMON = {"spark.sparktf.progressInterval": "0.5", "spark.driver.host": "127.0.0.1"}

YARN = {
    "spark.yarn.jars": f"local:{pyspark_home()}/jars/*",
    "spark.pyspark.python": sys.executable,
    "spark.yarn.appMasterEnv.SPARK_LOCAL_IP": "127.0.0.1",
    "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1",
    "spark.executor.instances": "2",
    "spark.executor.cores": "1",
    "spark.executor.memory": "1g",
    "spark.executor.memoryOverhead": "2g",
    "spark.dynamicAllocation.enabled": "false",
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.yarn.maxAppAttempts": "1",
    "spark.ui.enabled": "false",
}


# ------------------------------------------------------------------------------ clusters
def start_yarn():
    out = subprocess.run(
        [os.path.join(ROOT, "bin", "yarn-test-cluster.sh"), "start"],
        env=env(SPARKTF_YARN_DIR=YARN_DIR),
        capture_output=True,
        text=True,
    )
    if out.returncode:
        sys.exit(f"yarn-test-cluster.sh start failed:\n{out.stderr[-3000:]}")
    conf_dir = out.stdout.strip().splitlines()[-1].split("=", 1)[1]
    hdfs = re.search(r"HDFS: (hdfs://\S+)", out.stdout).group(1)
    return conf_dir, hdfs


def stop_yarn():
    subprocess.run(
        [os.path.join(ROOT, "bin", "yarn-test-cluster.sh"), "stop"],
        env=env(SPARKTF_YARN_DIR=YARN_DIR),
        capture_output=True,
    )


def start_standalone():
    out = subprocess.run(
        [os.path.join(ROOT, "bin", "start-standalone.sh")],
        env=env(SPARKTF_STANDALONE_DIR=STANDALONE_DIR),
        capture_output=True,
        text=True,
    )
    if out.returncode:
        sys.exit(f"start-standalone.sh failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def stop_standalone():
    subprocess.run(
        [os.path.join(ROOT, "bin", "stop-standalone.sh")],
        env=env(SPARKTF_STANDALONE_DIR=STANDALONE_DIR),
        capture_output=True,
    )


# ----------------------------------------------------------------------------- one submit
class Stamps:
    """Seconds since ``t0`` at which each marker first appeared in any watched text."""

    def __init__(self, t0):
        self.t0, self.first_step, self.accuracy_at, self.accuracy = t0, None, None, None
        self.lock = threading.Lock()
        self.text = []

    def line(self, line):
        now = time.monotonic() - self.t0
        with self.lock:
            self.text.append(line)
            if self.first_step is None and STEP.search(line):
                self.first_step = now
            m = ACCURACY.match(line.strip())
            if m and self.accuracy_at is None:
                self.accuracy_at, self.accuracy = now, float(m.group(1))


def _pump(stream, stamps):
    for line in stream:
        stamps.line(line)


def _follow_am(stamps, proc, nm_logs):
    """Cluster mode: the AM container's stdout and stderr, as the NodeManager writes them."""
    offsets = {}
    while True:
        done = proc.poll() is not None
        app = re.search(r"application_\d+_\d+", "".join(stamps.text))
        if app:
            for path in glob.glob(os.path.join(nm_logs, app.group(0), "*_000001", "std*")):
                with open(path, errors="replace") as f:
                    f.seek(offsets.get(path, 0))
                    chunk = f.read()
                    complete = chunk[: chunk.rfind("\n") + 1]
                    offsets[path] = offsets.get(path, 0) + len(complete.encode())
                for line in complete.splitlines(True):
                    stamps.line(line)
        if done:
            return
        time.sleep(0.2)


def submit(name, args, run_env, cwd, nm_logs=None):
    t0 = time.monotonic()
    proc = subprocess.Popen(
        args,
        env=run_env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    stamps = Stamps(t0)
    pump = threading.Thread(target=_pump, args=(proc.stdout, stamps), daemon=True)
    pump.start()
    if nm_logs:
        _follow_am(stamps, proc, nm_logs)
    proc.wait()
    pump.join(10)
    wall = time.monotonic() - t0
    if proc.returncode != 0 or stamps.accuracy is None:
        print("".join(stamps.text)[-3000:], file=sys.stderr)
        print(f"{name}: exit {proc.returncode}, no test_accuracy", file=sys.stderr)
    return {
        "name": name,
        "first_step": stamps.first_step,
        "accuracy_at": stamps.accuracy_at,
        "accuracy": stamps.accuracy,
        "wall": wall,
        "rc": proc.returncode,
    }


def commands(which, master_url, conf_dir, hdfs, work):
    spark_submit = os.path.join(pyspark_home(), "bin", "spark-submit")

    def confs(d):
        return [a for k, v in d.items() for a in ("--conf", f"{k}={v}")]

    yarn_env = env(HADOOP_CONF_DIR=conf_dir, YARN_CONF_DIR=conf_dir)
    nm_logs = os.path.join(YARN_DIR, "nm", "logs")
    table = {
        "local": (
            "local[2]",
            [spark_submit, "--master", "local[2]", *confs(COMMON), MNIST],
            env(),
            None,
        ),
        "standalone": (
            "standalone (2 workers x 1 core)",
            [spark_submit, "--master", master_url, *confs(COMMON), MNIST],
            env(),
            None,
        ),
        "yarn-client": (
            "YARN client mode",
            [
                spark_submit,
                "--master",
                "yarn",
                "--deploy-mode",
                "client",
                *confs(dict(COMMON, **YARN)),
                MNIST,
            ],
            yarn_env,
            None,
        ),
        # the driver's container has neither examples/ nor a directory the executors share
        "yarn-cluster": (
            "YARN cluster mode",
            [
                spark_submit,
                "--master",
                "yarn",
                "--deploy-mode",
                "cluster",
                *confs(dict(COMMON, **YARN)),
                "--py-files",
                os.path.join(ROOT, "examples", "mnist_data.py"),
                MNIST,
                "--export-dir",
                f"{hdfs}/bench/{int(time.time() * 1000)}/export",
            ],
            yarn_env,
            nm_logs,
        ),
    }
    return {k: v for k, v in table.items() if k in which}


def fmt(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def machine():
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in open("/proc/cpuinfo")
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = (
        int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal")))
        / 1024**2
    )
    commit = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{time.strftime('%Y-%m-%d %H:%M')}, {commit}: {os.cpu_count()} cores ({cpu}), "
        f"{mem:.0f} GiB, Python {platform.python_version()}"
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--only", default="local,standalone,yarn-client,yarn-cluster")
    args = p.parse_args(argv)
    which = args.only.split(",")
    print(f"machine: {machine()}; load average {os.getloadavg()}", flush=True)
    master_url = conf_dir = hdfs = None
    work = os.path.join(TMP, f"sparktf-bench-submit-{os.getpid()}")
    os.makedirs(work, exist_ok=True)
    runs = {}
    try:
        if "standalone" in which:
            master_url = start_standalone()
        if any(w.startswith("yarn") for w in which):
            t = time.monotonic()
            conf_dir, hdfs = start_yarn()
            print(f"test YARN started in {time.monotonic() - t:.1f}s", flush=True)
        for i in range(args.repeats):
            for _key, (name, cmd, run_env, nm_logs) in commands(
                which, master_url, conf_dir, hdfs, work
            ).items():
                r = submit(name, cmd, run_env, work, nm_logs)
                runs.setdefault(name, []).append(r)
                print(
                    f"[{i + 1}/{args.repeats}] {name}: first step {fmt(r['first_step'])}s, "
                    f"test_accuracy {fmt(r['accuracy'], '.4f')} at {fmt(r['accuracy_at'])}s, "
                    f"exit {r['rc']} at {r['wall']:.1f}s; load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        if master_url:
            stop_standalone()
        if conf_dir:
            stop_yarn()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average at the end {os.getloadavg()}")
    print(
        f"\n| median of {args.repeats} | submit to first training step | "
        "submit to test_accuracy | submit to spark-submit's exit | test_accuracy |"
    )
    print("|---|---|---|---|---|")

    def med(rs, key):
        values = [r[key] for r in rs if r[key] is not None]
        return statistics.median(values) if values else None

    for name, rs in runs.items():
        print(
            f"| {name} | {fmt(med(rs, 'first_step'))} s | {fmt(med(rs, 'accuracy_at'))} s | "
            f"{fmt(med(rs, 'wall'))} s | {fmt(med(rs, 'accuracy'), '.4f')} |"
        )
    return 0 if all(r["rc"] == 0 and r["accuracy"] for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
