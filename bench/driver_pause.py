"""A paused driver while its nodes keep printing: does the job survive?

    python3 bench/driver_pause.py [--pause 120] [--rate 2048]

A real driver (``local[2]``, two nodes whose ``main_fn`` prints ``--rate`` bytes a second in
100-byte lines for the pause plus 50 s) is stopped with SIGSTOP (its process group: the driver
and its JVM, as Ctrl-Z does) ``--pause`` seconds, then continued. Prints the pause, the
driver's exit code and its RESULT line (or its error). The nodes' connections carry
``TCP_USER_TIMEOUT`` (30 s): they survive while what they write during the pause fits the
driver's receive buffers (docs/reliability.md, "Keepalive, and how long a paused driver is
survived"). Traffic stays on loopback.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

DRIVER = textwrap.dedent('''
    import sys
    from pyspark import SparkConf, SparkContext
    import sparktf

    seconds, rate = float(sys.argv[1]), int(sys.argv[2])
    sc = SparkContext(conf=SparkConf().setMaster("local[2]").setAppName("pause")
                      .set("spark.driver.host", "127.0.0.1").set("spark.ui.enabled", "false")
                      .set("spark.pyspark.python", sys.executable))
    sc.setLogLevel("ERROR")

    def main_fn(ctx):
        import time
        line, end = "x" * 99, time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(rate // 100):
                print(line, flush=True)
            time.sleep(1)
        return ctx.name

    cluster = sparktf.run(sc, main_fn, num_executors=2, progress=False, log_to_driver=False)
    print("RUNNING", flush=True)
    print("RESULT", cluster.shutdown(timeout=seconds + 300), flush=True)
    sc.stop()
''')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pause", type=float, default=120.0)
    parser.add_argument("--rate", type=int, default=2048, help="bytes a second each node prints")
    opts = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONPATH=root,
    )
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "driver.py")
        with open(script, "w") as f:
            f.write(DRIVER)
        seconds = str(opts.pause + 50)
        proc = subprocess.Popen(
            [sys.executable, script, seconds, str(opts.rate)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=work,
            start_new_session=True,
        )
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("RUNNING"):
                break
        time.sleep(3)
        os.killpg(proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        time.sleep(opts.pause)
        os.killpg(proc.pid, signal.SIGCONT)
        print(f"driver paused {time.monotonic() - stopped:.1f}s, nodes printing {opts.rate} B/s")
        try:
            out, _ = proc.communicate(timeout=opts.pause + 400)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    text = "".join(lines) + (out or "")
    print(f"driver exit code {proc.returncode}")
    for line in text.splitlines():
        if line.startswith("RESULT") or "Error:" in line:
            print(line)


if __name__ == "__main__":
    main()
