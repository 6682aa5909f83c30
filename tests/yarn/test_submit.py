"""The main job, spark-submitted to the real test YARN as a user submits it, in client mode
(the driver here, executors in YARN containers) and cluster mode (the driver inside the
ApplicationMaster's container, its output read back from YARN's aggregated logs).

Executors and the cluster-mode driver use this venv's Python (spark.pyspark.python), which the
NodeManager on this machine can run; test_recipe.py ships an archived environment instead.
"""

import os
import re
import time

import pytest

from yarn_harness import ROOT

pytestmark = [pytest.mark.yarn, pytest.mark.slow, pytest.mark.timeout(600)]

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
    [app] = apps_since(yarn, started_ms, "sparktf-mnist")
    assert app["finalStatus"] == "SUCCEEDED" and app["applicationType"] == "SPARK"
    assert yarn.wait_idle(), yarn.describe_leftovers()


def test_main_job_in_cluster_mode_driver_in_the_application_master(yarn, tmp_path):
    """`--deploy-mode cluster`: the driver runs in the ApplicationMaster's container, so
    mnist_helpers.py travels with --py-files and the SavedModel goes to HDFS (the executors
    score it from there); the driver's output is read back with `yarn logs`."""
    export = f"{yarn.hdfs}/cluster-mode/export"
    out = yarn.submit(MNIST, "--epochs", 6, "--export-dir", export, deploy_mode="cluster",
                      extra=["--py-files", os.path.join(EXAMPLES, "mnist_helpers.py")],
                      cwd=tmp_path)
    app_id = re.search(r"application_\d+_\d+", out.stderr).group(0)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "final status: SUCCEEDED" in out.stderr
    logs = yarn.logs(app_id)
    # the driver's stdout is the AM container's: the nodes' lines reached it, tagged
    assert "[chief:0] chief:0: training epochs 1..6" in logs
    assert f"mnist: SavedModel in {export}; sparktf.predict on the executors scored 1000" \
        in logs
    assert accuracy(logs) >= 0.9
    rc, listing, _ = yarn.cli("hdfs", "dfs", "-ls", export)
    assert rc == 0 and "saved_model.pb" in listing
    assert yarn.wait_idle(), yarn.describe_leftovers()
