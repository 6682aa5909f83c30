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

from conftest import sparktf_processes, wait_until
from yarn_harness import kill_tree

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
    driver = subprocess.Popen(yarn.submit_cmd(script, conf=conf), cwd=tmp_path,
                              env=yarn.env(), stdout=log, stderr=subprocess.STDOUT)
    return driver, log


def _running_nodes(yarn, tmp_path, driver):
    said = lambda: (tmp_path / "driver.log").read_text()  # noqa: E731
    assert wait_until(lambda: "SPARKTF_TEST_RUNNING" in said() or driver.poll() is not None,
                      timeout=240), \
        said()[-3000:]
    assert driver.poll() is None, said()[-3000:]
    assert wait_until(lambda: len([p for p in sparktf_processes()
                                   if p.info["name"] == "sparktf-node"]) == 3, timeout=60)
    app_id = re.search(r"SPARKTF_TEST_APP (application_\d+_\d+)", said()).group(1)
    return app_id, said


def _gone(yarn, started):
    alive = [p for p in started if psutil.pid_exists(p)
             and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    return (not alive and not sparktf_processes() and not yarn.container_processes()
            and not yarn.containers())


def test_an_application_killed_through_the_rest_api_leaves_nothing(yarn, tmp_path):
    """PUT /ws/v1/cluster/apps/ID/state {"state": "KILLED"} (what `yarn application -kill`
    does) while a chief, a worker and a ps run: YARN stops the containers, the driver's
    SparkContext stops, the driver exits with an error; no process or container is left."""
    driver, log = _start(yarn, tmp_path, WAITS, THREE)
    try:
        app_id, said = _running_nodes(yarn, tmp_path, driver)
        started = [p.pid for p in sparktf_processes()] + \
            [p.pid for p in yarn.container_processes()]
        t0 = time.monotonic()
        yarn.kill(app_id)
        assert wait_until(lambda: _gone(yarn, started) and driver.poll() is not None,
                          timeout=GONE_WITHIN), (yarn.describe_leftovers(), said()[-3000:])
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
        started = [driver.pid] + [p.pid for p in psutil.Process(driver.pid).children(True)] \
            + [p.pid for p in sparktf_processes()] + [p.pid for p in yarn.container_processes()]
        t0 = time.monotonic()
        for pid in [driver.pid] + [p.pid for p in psutil.Process(driver.pid).children(True)]:
            os.kill(pid, signal.SIGKILL)
        driver.wait(30)
        assert wait_until(lambda: _gone(yarn, started), timeout=GONE_WITHIN), \
            yarn.describe_leftovers()
        print(f"\n[yarn] SIGKILLed driver's application gone in {time.monotonic() - t0:.1f}s")
        assert wait_until(lambda: yarn.app(app_id)["state"] in ("FINISHED", "FAILED", "KILLED"),
                          timeout=30), yarn.app(app_id)
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
    out = subprocess.run(yarn.submit_cmd(script, conf=conf), cwd=tmp_path, env=yarn.env(),
                         capture_output=True, text=True, timeout=400)
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr[-3000:]
    error = out.stdout.split("NODE_ERROR_START\n")[1].split("NODE_ERROR_END")[0]
    print(f"\n[yarn] NodeError: {error[:1500]}")
    assert yarn.wait_idle(), yarn.describe_leftovers()
    assert "worker:0" in error.splitlines()[0]
    assert re.search(r"killed by YARN .*physical memory", error), error
    assert "spark.executor.memoryOverhead" in error, error
