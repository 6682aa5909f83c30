"""A driver that pauses longer than heartbeat_timeout (Ctrl-Z then fg, a VM pause, a long GIL
hold in a notebook) does not declare its live nodes dead when it resumes: a real driver
process and its JVM are stopped with SIGSTOP (what Ctrl-Z sends their process group) for
three times heartbeat_timeout, then continued; the job finishes with its result."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.slow

DRIVER = textwrap.dedent('''
    import os, sys
    from pyspark import SparkConf, SparkContext
    import sparktf

    sc = SparkContext(conf=SparkConf().setMaster("local[2]").setAppName("pause")
                      .set("spark.driver.host", "127.0.0.1").set("spark.ui.enabled", "false")
                      .set("spark.pyspark.python", sys.executable))
    sc.setLogLevel("ERROR")

    def main_fn(ctx):
        import time
        time.sleep(25)
        return ctx.name

    cluster = sparktf.run(sc, main_fn, num_executors=2, heartbeat_timeout=3, progress=False)
    print("RUNNING", flush=True)
    print("RESULT", cluster.shutdown(timeout=120), flush=True)
    sc.stop()
''')


def test_a_driver_stopped_longer_than_heartbeat_timeout_keeps_its_nodes(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("RUNNING"):
                break
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGSTOP)  # the driver and its JVM; the nodes run on
        time.sleep(9)
        os.killpg(proc.pid, signal.SIGCONT)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = "".join(lines) + (out or "")
    assert proc.returncode == 0, text[-3000:]
    assert "RESULT chief:0" in text, text[-3000:]
