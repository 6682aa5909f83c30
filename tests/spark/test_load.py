"""Under load: twenty jobs in a row in one SparkContext leave nothing behind, and eight
nodes on local[8] (on a 2-core machine) start, train a few steps and stop cleanly."""

import getpass
import glob
import os
import tempfile
import threading
import time

import psutil
import pytest
from helpers import jobs, tf_jobs
from helpers.procs import sparktf_processes

import sparktf
from sparktf.common import settings

pytestmark = pytest.mark.usefixtures("no_leaks")


def _connections(proc):
    return (proc.net_connections if hasattr(proc, "net_connections") else proc.connections)("tcp")


def _footprint():
    me = psutil.Process()
    tmp = tempfile.gettempdir()  # Spark's local dirs (spark-*/...) are under it here
    # the node logs' root keeps the last jobs' logs on purpose (spark.sparktf.nodeLogKeepJobs):
    # counted apart, below
    logs = os.path.join(tmp, f"sparktf-{getpass.getuser()}", "logs")
    temp = sorted(
        p
        for pattern in ("sparktf-*", "*/sparktf-*", "*/*/sparktf-*")
        for p in glob.glob(os.path.join(tmp, pattern))
        if not p.startswith(logs + os.sep)
    )
    return {
        "processes": len(sparktf_processes()),
        "children": len(me.children(recursive=True)),
        "threads": threading.active_count(),
        "fds": me.num_fds(),
        "listening ports": sorted(
            c.laddr.port for c in _connections(me) if c.status == psutil.CONN_LISTEN
        ),
        "temp files": temp,
    }


def test_twenty_jobs_in_a_row_leave_nothing_behind(sc_local):
    sparktf.run(sc_local, jobs.describe, {}, num_executors=2).shutdown()  # warm up
    before = _footprint()
    for i in range(20):
        cluster = sparktf.run(sc_local, jobs.describe, {"i": i}, num_executors=2)
        assert cluster.shutdown()["args"] == {"i": i}
    time.sleep(1.0)  # connection threads finish closing
    after = _footprint()
    # Nothing extra: counts may only have dropped (a thread of an earlier test ending meanwhile)
    for key in ("processes", "children", "threads", "fds"):
        assert after[key] <= before[key], (key, before, after)
    assert set(after["listening ports"]) <= set(before["listening ports"]), (before, after)
    assert set(after["temp files"]) <= set(before["temp files"]), (before, after)
    logs = os.path.join(tempfile.gettempdir(), f"sparktf-{getpass.getuser()}", "logs")
    kept = [n for n in os.listdir(logs) if n.startswith("sparktf-")]
    assert len(kept) <= settings.default("node_log_keep_jobs"), kept  # older ones pruned


@pytest.mark.slow
@pytest.mark.tf
def test_eight_nodes_on_local8_train_and_stop(spark_pool):
    sc = spark_pool.get("local[8]")
    cluster = sparktf.run(
        sc, tf_jobs.mwms_keras, {"epochs": 1, "steps": 3}, num_executors=8, reservation_timeout=300
    )
    result = cluster.shutdown(timeout=600)
    assert len(cluster.results) == 8
    assert all(len(r["loss"]) == 1 and r["num_replicas"] == 8 for r in cluster.results.values())
    assert result == cluster.results["chief:0"]
