"""What YARN does to a running job, with real daemons: the application killed through the
ResourceManager's REST API, the client-mode driver SIGKILLed, a container killed by the
NodeManager for exceeding its memory. Each is its own YARN application, driven by a
spark-submit of a small driver script (executors on this venv's Python); afterwards nothing of
the job may be left on the host: no sparktf process, no container process, no container.
"""

import os
import re
import signal
import subprocess
import time

import psutil
import pytest
from helpers.procs import sparktf_processes, wait_until
from yarn_harness import kill_tree

# timeout(600): the first test of a session also starts YARN and HDFS (their jars fetched the
# first time), and every test submits to YARN, whose containers take tens of seconds to start.
pytestmark = [pytest.mark.yarn, pytest.mark.slow, pytest.mark.timeout(600)]

#: How long after the kill everything of the job must be gone (measured: see docs/yarn.md)
GONE_WITHIN = 45

WAITS = '''
import sys, time
from pyspark.sql import SparkSession
import sparktf

spark = SparkSession.builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
print("SPARKTF_TEST_APP", spark.sparkContext.applicationId, flush=True)

def main_fn(ctx):
    time.sleep(600)

cluster = sparktf.run(spark.sparkContext, main_fn, num_ps=1)
print("SPARKTF_TEST_RUNNING", flush=True)
try:
    cluster.shutdown()
except Exception as err:
    print("ERROR", type(err).__name__, str(err).splitlines()[0], flush=True)
    sys.exit(3)
'''

GREEDY = '''
import sys, time
from pyspark.sql import SparkSession
import sparktf

spark = SparkSession.builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")

def main_fn(ctx):
    import numpy as np
    if ctx.job_name == "worker":
        hog = np.ones(4 * 1024 ** 3 // 8)  # 4 GB, touched, in a 2.5 GB container
        time.sleep(120)
    time.sleep(120)

try:
    sparktf.run(spark.sparkContext, main_fn, num_executors=2).shutdown(timeout=300)
except sparktf.NodeError as err:
    print("NODE_ERROR_START", flush=True)
    print(str(err), flush=True)
    print("NODE_ERROR_END", flush=True)
    sys.exit(3)
'''

THREE = {"spark.executor.instances": "3", "spark.executor.memoryOverhead": "1500m"}


def _start(yarn, tmp_path, text, conf):
    script = tmp_path / "driver.py"
    script.write_text(text)
    log = open(tmp_path / "driver.log", "w+")
    driver = subprocess.Popen(
        yarn.submit_cmd(script, conf=conf),
        cwd=tmp_path,
        env=yarn.env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return driver, log


def _sparktf_in(yarn):
    """sparktf's processes in this YARN's containers (the host runs other people's jobs too;
    a process that escaped a container still carries the NodeManager's directories in its
    environment)."""
    import hdfs_test_cluster

    return [p for p in sparktf_processes() if hdfs_test_cluster.in_container(p.pid, yarn.state)]


def _running_nodes(yarn, tmp_path, driver):
    said = lambda: (tmp_path / "driver.log").read_text()  # noqa: E731
    assert wait_until(
        lambda: "SPARKTF_TEST_RUNNING" in said() or driver.poll() is not None, timeout=240
    ), said()[-3000:]
    assert driver.poll() is None, said()[-3000:]
    assert wait_until(
        lambda: len([p for p in _sparktf_in(yarn) if p.info["name"] == "sparktf-node"]) == 3,
        timeout=60,
    )
    app_id = re.search(r"SPARKTF_TEST_APP (application_\d+_\d+)", said()).group(1)
    return app_id, said


def _gone(yarn, started):
    alive = [
        p
        for p in started
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    return (
        not alive
        and not _sparktf_in(yarn)
        and not yarn.container_processes()
        and not yarn.containers()
    )


def test_an_application_killed_through_the_rest_api_leaves_nothing(yarn, tmp_path):
    """PUT /ws/v1/cluster/apps/ID/state {"state": "KILLED"} (what `yarn application -kill`
    does) while a chief, a worker and a ps run: YARN stops the containers, the driver's
    SparkContext stops, the driver exits with an error; no process or container is left."""
    driver, log = _start(yarn, tmp_path, WAITS, THREE)
    try:
        app_id, said = _running_nodes(yarn, tmp_path, driver)
        started = [p.pid for p in _sparktf_in(yarn)] + [p.pid for p in yarn.container_processes()]
        t0 = time.monotonic()
        yarn.kill(app_id)
        assert wait_until(
            lambda: _gone(yarn, started) and driver.poll() is not None, timeout=GONE_WITHIN
        ), (yarn.describe_leftovers(), said()[-3000:])
        print(f"\n[yarn] killed application gone in {time.monotonic() - t0:.1f}s")
        assert yarn.app(app_id)["state"] == "KILLED"
        assert driver.returncode != 0, said()[-3000:]
    finally:
        kill_tree(driver.pid)
        log.close()


def test_a_sigkilled_client_mode_driver_leaves_nothing(yarn, tmp_path):
    """The client-mode driver (spark-submit's JVM and its Python) SIGKILLed mid-job: the
    ApplicationMaster loses its driver and ends the application, the NodeManager stops the
    executors' containers, the nodes lose their channel; nothing is left on the host."""
    driver, log = _start(yarn, tmp_path, WAITS, THREE)
    try:
        app_id, said = _running_nodes(yarn, tmp_path, driver)
        started = (
            [driver.pid]
            + [p.pid for p in psutil.Process(driver.pid).children(True)]
            + [p.pid for p in _sparktf_in(yarn)]
            + [p.pid for p in yarn.container_processes()]
        )
        t0 = time.monotonic()
        for pid in [driver.pid] + [p.pid for p in psutil.Process(driver.pid).children(True)]:
            os.kill(pid, signal.SIGKILL)
        driver.wait(30)
        assert wait_until(lambda: _gone(yarn, started), timeout=GONE_WITHIN), (
            yarn.describe_leftovers()
        )
        print(f"\n[yarn] SIGKILLed driver's application gone in {time.monotonic() - t0:.1f}s")
        assert wait_until(
            lambda: yarn.app(app_id)["state"] in ("FINISHED", "FAILED", "KILLED"), timeout=30
        ), yarn.app(app_id)
    finally:
        kill_tree(driver.pid)
        log.close()


def test_a_container_killed_for_memory_is_a_node_error_saying_so(yarn, tmp_path):
    """A worker's main_fn allocates 4 GB in a container of 1 GB + 1.5 GB overhead: the
    NodeManager kills the container for exceeding its physical memory; the driver's NodeError
    names the node, says YARN killed it for memory, and names the setting to raise."""
    conf = {"spark.executor.instances": "2", "spark.executor.memoryOverhead": "1500m"}
    script = tmp_path / "greedy.py"
    script.write_text(GREEDY)
    out = subprocess.run(
        yarn.submit_cmd(script, conf=conf),
        cwd=tmp_path,
        env=yarn.env(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr[-3000:]
    error = out.stdout.split("NODE_ERROR_START\n")[1].split("NODE_ERROR_END")[0]
    print(f"\n[yarn] NodeError: {error[:1500]}")
    assert yarn.wait_idle(), yarn.describe_leftovers()
    assert "worker:0" in error.splitlines()[0]
    assert re.search(r"killed by YARN .*physical memory", error), error
    assert "spark.executor.memoryOverhead" in error, error


REFUSED = '''
import sys, time
from pyspark.sql import SparkSession
import sparktf

spark = SparkSession.builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
print("SPARKTF_TEST_APP", spark.sparkContext.applicationId, flush=True)

def main_fn(ctx):
    return ctx.name

started = time.monotonic()
try:
    cluster = sparktf.run(spark.sparkContext, main_fn, num_executors=NODES)
    print("RAN", cluster.shutdown(timeout=120), flush=True)
except sparktf.SparkTFError as err:
    print(f"REFUSED {type(err).__name__} after {time.monotonic() - started:.1f}s", flush=True)
    print(str(err), flush=True)
    sys.exit(3)
'''


def _refused(yarn, tmp_path, nodes, conf):
    """spark-submit REFUSED (client mode): (what run() raised, its type, seconds, app id)."""
    script = tmp_path / "refused.py"
    script.write_text(REFUSED.replace("NODES", str(nodes)))
    out = subprocess.run(
        yarn.submit_cmd(script, conf=conf),
        cwd=tmp_path,
        env=yarn.env(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr[-3000:]
    head, error = out.stdout.split("REFUSED ", 1)[1].split("\n", 1)
    kind, took = re.fullmatch(r"(\w+) after ([\d.]+)s", head).groups()
    app_id = re.search(r"SPARKTF_TEST_APP (application_\d+_\d+)", out.stdout).group(1)
    return error.strip(), kind, float(took), app_id


#: The error of the gang test, for the one after it
GANG_ERROR = []


def _ended(yarn, app_id):
    """The application ended and nothing of it is left: no container, and no process in one
    (sparktf's included: this machine runs other people's jobs, so not every sparktf process
    on it is this test's)."""
    assert wait_until(
        lambda: yarn.app(app_id)["state"] in ("FINISHED", "FAILED", "KILLED"), timeout=60
    ), yarn.app(app_id)
    assert yarn.wait_idle(), yarn.describe_leftovers()


def test_spark_executor_pyspark_memory_is_refused_at_once_naming_memory_overhead(yarn, tmp_path):
    """``spark.executor.pyspark.memory`` set, as YARN users often do: run() refuses it before
    any barrier stage (TensorFlow cannot load under its address-space cap), saying to remove
    it and budget with spark.executor.memoryOverhead; the application ends cleanly."""
    conf = {
        "spark.executor.instances": "1",
        "spark.executor.memoryOverhead": "1500m",
        "spark.executor.pyspark.memory": "2g",
        "spark.sparktf.slotWaitTimeout": "120",
    }
    error, kind, took, app_id = _refused(yarn, tmp_path, 1, conf)
    print(f"\n[yarn] pyspark.memory refused after {took:.1f}s: {error[:700]}")
    assert kind == "ConfigError"
    assert "spark.executor.pyspark.memory=2g" in error
    assert "spark.executor.memoryOverhead" in error
    assert took < 60  # at once: not after waiting out spark.sparktf.slotWaitTimeout (120 s)
    _ended(yarn, app_id)


def test_too_few_resources_for_the_gang_is_a_clear_error_and_the_application_ends(yarn, tmp_path):
    """Three nodes of 4 GB heap + 2 GB overhead asked of a NodeManager of 12 GB, one GB of
    which the ApplicationMaster holds: YARN can give one executor, never three. sparktf waits
    spark.sparktf.slotWaitTimeout (20 s) for the task slots, then says how many it found and
    what to change; the application then ends and YARN holds nothing of it."""
    conf = {
        "spark.executor.instances": "3",
        "spark.executor.memory": "4g",
        "spark.executor.memoryOverhead": "2g",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "5s",
        "spark.sparktf.slotWaitTimeout": "20",
    }
    error, kind, took, app_id = _refused(yarn, tmp_path, 3, conf)
    print(f"\n[yarn] too few resources, after {took:.1f}s: {error[:900]}")
    GANG_ERROR.append(error)
    assert kind == "ConfigError"
    assert "num_executors=3 needs 3 concurrent task slots" in error
    assert "(yarn) has 1" in error and "after waiting 20s" in error
    assert "use num_executors <= 1" in error
    assert 20 <= took < 20 + 30
    _ended(yarn, app_id)


def test_too_few_resources_on_yarn_says_yarn_could_not_give_the_executors_asked_for():
    """The gang test's error, read as a YARN user: three executors were asked for
    (spark.executor.instances=3) and YARN gave one, for want of memory; "more executors or
    cores (--num-executors, --executor-cores, spark.cores.max)" points the wrong way
    (spark.cores.max is standalone's). It should say how many were asked for and registered,
    and to make them smaller (spark.executor.memory, spark.executor.memoryOverhead) or the
    queue larger."""
    if not GANG_ERROR:
        pytest.skip("runs after test_too_few_resources_for_the_gang_is_a_clear_error...")
    error = GANG_ERROR[0]
    assert "spark.executor.instances=3" in error
    assert "spark.executor.memoryOverhead" in error
    assert "spark.cores.max" not in error
