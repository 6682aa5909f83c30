"""docs/yarn.md section 3, run as written: the Python environment as a venv-pack archive on
HDFS (``spark.archives``, ``./environment/bin/python``), conf/yarn/spark-defaults.conf, the data,
checkpoints and SavedModel on HDFS; examples/mnist.py in cluster mode (the driver in the
ApplicationMaster, on the archive's Python, its output read back with ``yarn logs``: this is
the tier's cluster-mode run of the main job). The recipe's step 4 (client mode on the same
archive, resuming from the checkpoint) is not run here: one more YARN application whose
executors start on the unpacked archive costs about 140 s of the suite's 30 minutes, and what it
adds is run elsewhere (client mode: test_submit.py, README's command; resuming from an HDFS
checkpoint: tests/e2e/test_examples.py::test_hdfs_data_checkpoints_export_and_logs).

The only test of the tier whose containers do not run this venv's Python. Building the archive
takes minutes: tests/yarn/env_archive.py builds it as the recipe does and caches it by a hash
of what goes in it. Beside the recipe's commands, each spark-submit gets what this one-machine,
12 GB test YARN needs (``_test_yarn_flags`` below, as docs/yarn.md lists them).
"""

import getpass
import os
import re
import subprocess
import sys
import time

import env_archive
import pytest
from yarn_harness import ROOT, pyspark_home, spark_submit

# timeout(900): the recipe builds and uploads a venv-pack archive, then trains in cluster mode:
# about 3 minutes on 2 cores with the archive cached (docs/yarn.md), more on a busy host.
pytestmark = [pytest.mark.tf, pytest.mark.yarn, pytest.mark.slow, pytest.mark.timeout(900)]

CONF = os.path.join(ROOT, "conf", "yarn", "spark-defaults.conf")
EXAMPLES = os.path.join(ROOT, "examples")


def _test_yarn_flags():
    """What docs/yarn.md says the test YARN adds to the recipe's commands: its sizes
    (12 GB, two executors), loopback, Spark's jars from the local pyspark."""
    return [
        "--num-executors",
        "2",
        "--executor-memory",
        "1g",
        "--driver-memory",
        "1g",
        "--conf",
        "spark.executor.memoryOverhead=2g",
        "--conf",
        f"spark.yarn.jars=local:{pyspark_home()}/jars/*",
        "--conf",
        "spark.yarn.appMasterEnv.SPARK_LOCAL_IP=127.0.0.1",
        "--conf",
        "spark.executorEnv.SPARK_LOCAL_IP=127.0.0.1",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
    ]


def _accuracy(text):
    found = re.findall(r"^test_accuracy=(0\.\d+|1\.0+)$", text, re.M)
    assert found, text[-4000:]
    return float(found[-1])


@pytest.fixture
def user_env(yarn, tmp_path):
    """The shell the recipe is typed in: HADOOP_CONF_DIR exported, $USER set, no PYSPARK_*
    of the harness's."""
    env = dict(yarn.env(), USER=os.environ.get("USER") or getpass.getuser())
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        env.pop(name)
    return env


def _localizing(yarn, app_id):
    """Seconds the application's first container spent LOCALIZING (the NodeManager fetching
    and unpacking the archive, if no earlier application had), from the NodeManager's log."""
    from datetime import datetime

    container = app_id.replace("application_", "container_") + "_01_000001"
    stamps = {}
    for line in open(os.path.join(yarn.state, "nodemanager.log"), errors="replace"):
        if container in line and ("from NEW to LOCALIZING" in line or "from LOCALIZING to" in line):
            key = "start" if "from NEW" in line else "end"
            stamps.setdefault(key, datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f"))
    return (stamps["end"] - stamps["start"]).total_seconds() if len(stamps) == 2 else -1


def _sh(cmd, env, cwd, timeout=600):
    started = time.monotonic()
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - started
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    return out, took


def _sh_keeping_logs(yarn, tmp_path, cmd, env, cwd):
    """``_sh`` for a spark-submit in cluster mode: where it fails, the application's
    containers' logs (the driver's among them) go to ``tmp_path``/cluster-mode.log and their
    tail into the failure (the driver ran in a container: its error is only there)."""
    try:
        return _sh(cmd, env, cwd)
    except AssertionError as failed:
        found = re.search(r"application_\d+_\d+", str(failed))
        if not found:
            raise
        logs = yarn.logs(found.group(0))
        (tmp_path / "cluster-mode.log").write_text(logs)
        raise AssertionError(
            f"{failed}\n--- the application's logs, last lines:\n{logs[-6000:]}"
        ) from failed


def test_the_recipe_archive_on_hdfs_in_cluster_mode(yarn, user_env, tmp_path):
    env, user = user_env, user_env["USER"]

    def hdfs(*args):
        return [
            os.path.join(ROOT, "bin", "yarn-test-cluster.sh"),
            "hdfs",
            "dfs",
            *args,
        ]

    timings = {}

    # Step 1: the environment, built as the recipe builds it (cached), put on HDFS
    started = time.monotonic()
    archive = env_archive.build()
    timings["archive (cache or build)"] = time.monotonic() - started
    try:
        os.link(archive, tmp_path / "sparktf_env.tar.gz")
    except OSError:  # (the cache on another file system)
        os.symlink(archive, tmp_path / "sparktf_env.tar.gz")
    _sh(hdfs("-mkdir", "-p", f"/user/{user}/sparktf"), env, tmp_path)
    _, timings["hdfs dfs -put"] = _sh(
        hdfs("-put", "-f", "sparktf_env.tar.gz", f"/user/{user}/sparktf/"), env, tmp_path
    )

    # Step 2: the data on HDFS
    data, model, export = (
        f"hdfs:///user/{user}/{d}" for d in ("mnist", "mnist_model", "mnist_export")
    )
    _, timings["data setup"] = _sh(
        [
            spark_submit(),
            "--master",
            "local[2]",
            os.path.join(EXAMPLES, "mnist_data_setup.py"),
            "--output",
            data,
        ],
        env,
        tmp_path,
    )

    # Step 3: cluster mode, three epochs, checkpoints and the SavedModel on HDFS
    flags = ["--data", data, "--model-dir", model, "--export-dir", export]
    archives = f"spark.archives=hdfs:///user/{user}/sparktf/sparktf_env.tar.gz#environment"
    out, timings["cluster mode, epochs 1-3"] = _sh_keeping_logs(
        yarn,
        tmp_path,
        [
            spark_submit(),
            "--properties-file",
            CONF,
            "--deploy-mode",
            "cluster",
            "--conf",
            archives,
            *_test_yarn_flags(),
            "--py-files",
            os.path.join(EXAMPLES, "mnist_data.py"),
            os.path.join(EXAMPLES, "mnist.py"),
            *flags,
            "--epochs",
            "3",
        ],
        env,
        tmp_path,
    )
    app_id = re.search(r"application_\d+_\d+", out.stderr).group(0)
    assert "final status: SUCCEEDED" in out.stderr
    timings["of which the AM container localizing"] = _localizing(yarn, app_id)
    logs = yarn.logs(app_id)
    (tmp_path / "cluster-mode.log").write_text(logs)
    # every container (the ApplicationMaster's, where the driver ran, and the executors')
    # ran ./environment/bin/python from the unpacked archive
    launches = re.findall(r"LogType:launch_container.sh\n(.*?)End of LogType", logs, re.S)
    assert len(launches) == 3, logs[-3000:]
    assert all('export PYSPARK_PYTHON="./environment/bin/python"' in s for s in launches)
    # the driver's stdout is the AM container's: the nodes' lines reached it, tagged
    assert "[chief:0] chief:0: training epochs 1..3" in logs
    assert f"mnist: SavedModel in {export}; sparktf.predict on the executors scored 1000" in logs
    first = _accuracy(logs)
    assert first >= 0.9  # three epochs of 4,000 digits (0.949-0.958 in docs/yarn.md's runs)
    rc, listing, _ = yarn.cli("hdfs", "dfs", "-ls", model, export)
    assert rc == 0 and "ckpt-3.index" in listing and "saved_model.pb" in listing, listing

    print(
        f"\n[yarn] recipe: first run test_accuracy={first:.4f}; "
        + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()),
        file=sys.stderr,
    )
    assert yarn.wait_idle(), yarn.describe_leftovers()
