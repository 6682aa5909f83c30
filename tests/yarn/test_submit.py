"""The main job, spark-submitted to the real test YARN as a user submits it, in client mode
(the driver here, executors in YARN containers), with no flags: README's YARN command.

Executors use this venv's Python (spark.pyspark.python), which the NodeManager on this machine
can run. The cluster-mode run (the driver inside the ApplicationMaster's container, its output
read back from YARN's aggregated logs) is test_recipe.py's, on an archived environment.
"""

import os
import re
import time

import pytest
from helpers.procs import wait_until
from yarn_harness import ROOT

# timeout(600): the first test of a session also starts YARN and HDFS (their jars fetched the
# first time), and every test submits to YARN, whose containers take tens of seconds to start.
pytestmark = [pytest.mark.tf, pytest.mark.yarn, pytest.mark.slow, pytest.mark.timeout(600)]

EXAMPLES = os.path.join(ROOT, "examples")
MNIST = os.path.join(EXAMPLES, "mnist.py")


def accuracy(text):
    found = re.findall(r"^test_accuracy=(0\.\d+|1\.0+)$", text, re.M)
    assert found, text[-4000:]
    return float(found[-1])


def apps_since(yarn, started_ms, name):
    return [a for a in yarn.apps() if a["startedTime"] >= started_ms and a["name"] == name]


def test_main_job_in_client_mode_reaches_95_percent(yarn, tmp_path):
    """`spark-submit --master yarn --deploy-mode client examples/mnist.py`, no flags: two
    executors in YARN containers are the two TF nodes (MultiWorkerMirroredStrategy, fed by
    Spark), the SavedModel is scored by sparktf.predict on them, test_accuracy >= 0.95."""
    started_ms = int(time.time() * 1000)
    out = yarn.submit(MNIST, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "[chief:0] chief:0: training epochs 1..12" in out.stdout
    assert "[worker:0] worker:0: training epochs 1..12" in out.stdout
    assert "sparktf.predict on the executors scored 1000 held-out images" in out.stdout
    assert accuracy(out.stdout) >= 0.95
    # (the ApplicationMaster may unregister after spark-submit returned: UNDEFINED until then)
    assert wait_until(
        lambda: (
            [a["finalStatus"] for a in apps_since(yarn, started_ms, "sparktf-mnist")]
            not in ([], ["UNDEFINED"])
        ),
        timeout=60,
    )
    [app] = apps_since(yarn, started_ms, "sparktf-mnist")
    assert app["finalStatus"] == "SUCCEEDED" and app["applicationType"] == "SPARK"
    assert yarn.wait_idle(), yarn.describe_leftovers()
