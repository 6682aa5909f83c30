"""The README's main job, run as a user runs it: spark-submit examples/mnist.py (fewer epochs)."""

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_spark_submit_mnist(tmp_path, spark_pool):
    spark_pool.stop()  # the example starts its own SparkContext in its own JVM
    import pyspark

    submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    out = subprocess.run(
        [submit, "--master", "local[2]", os.path.join(ROOT, "examples", "mnist.py"),
         "--epochs", "2", "--export-dir", str(tmp_path / "export")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    last = out.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"test_accuracy=(0\.\d+)", last)
    assert m, last
    assert float(m.group(1)) > 0.85  # two epochs on 4,000 real digits
    assert "[chief:0] Epoch 2/2" in out.stdout  # node output reached the driver, tagged
    assert (tmp_path / "export" / "saved_model.pb").exists()
