"""spark.sparktf.portRange: every port a job opens (the driver's control server, the TF servers,
TensorBoard) is one of the range, and a range too small for the job fails with an error that
names the setting, leaving nothing behind. Real Spark (local[4]), real TF servers, real sockets;
the listening sockets are read from the kernel (psutil) for every process of the job."""

import os
import socket
import sys
import time

import cloudpickle
import psutil
import pytest
from helpers.procs import TF_ENV, sparktf_processes, wait_until

import sparktf
from sparktf.errors import NodeError, PortRangeError

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pytestmark = pytest.mark.usefixtures("no_leaks")

KEY = "spark.sparktf.portRange"


def serve_and_wait(args, ctx):
    """Start this node's TF server, say so with a file, and wait for the test's signal."""
    ctx.start_server()
    open(os.path.join(args["dir"], f"{ctx.job_name}-{ctx.task_index}.served"), "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(args["go"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return ctx.port


def free_block(size):
    """``size`` consecutive ports nobody holds now, outside the kernel's ephemeral range."""
    for low in range(42000, 48000, 97):
        free = True
        for port in range(low, low + size):
            with socket.socket() as s:
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    free = False
                    break
        if free:
            return low
    pytest.skip(f"no {size} free consecutive ports")


@pytest.fixture
def session(sc_local):
    from pyspark.sql import SparkSession

    spark = SparkSession(sc_local)
    yield spark
    spark.conf.unset(KEY)


def ours():
    """This test run's sparktf processes (its Spark workers' descendants): others may run
    sparktf jobs on the same machine."""
    me = os.getpid()
    out = []
    for proc in sparktf_processes():
        try:
            if any(p.pid == me for p in proc.parents()):
                out.append(proc)
        except psutil.Error:
            pass
    return out


def listening_ports(procs):
    out = {}
    for proc in procs:
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    out.setdefault(conn.laddr.port, set()).add(proc.pid)
        except psutil.Error:
            pass
    return out


def test_every_port_of_the_job_is_in_the_range(sc_local, session, tmp_path):
    low = free_block(5)
    high = low + 4  # the control server, 3 TF servers, TensorBoard: 5 ports
    session.conf.set(KEY, f"{low}-{high}")
    go = str(tmp_path / "go")
    cluster = sparktf.run(
        sc_local,
        serve_and_wait,
        {"dir": str(tmp_path), "go": go},
        num_executors=3,
        tensorboard=True,
        log_dir=str(tmp_path / "tb"),
        env=TF_ENV,
    )
    try:
        assert low <= cluster._runner._current.server.address[1] <= high
        url = cluster.tensorboard_url(timeout=120)
        assert url is not None
        assert wait_until(lambda: len(list(tmp_path.glob("*.served"))) == 3, timeout=120)
        listening = listening_ports(ours())
        assert len(listening) >= 4, listening  # 3 TF servers and TensorBoard at least
        outside = {
            p: [(pid, " ".join(psutil.Process(pid).cmdline())[:200]) for pid in pids]
            for p, pids in listening.items()
            if not low <= p <= high
        }
        assert not outside, f"listening outside {low}-{high}: {outside}"
        assert int(url.rstrip("/").rsplit(":", 1)[1]) in listening
    finally:
        open(go, "w").close()
        ports = cluster.shutdown(timeout=120)
    assert low <= ports <= high


def test_a_range_too_small_for_the_nodes_names_the_setting(sc_local, session, tmp_path):
    low = free_block(3)  # the control server and two TF servers: the third node has none
    session.conf.set(KEY, f"{low}-{low + 2}")
    with pytest.raises(NodeError) as err:
        cluster = sparktf.run(
            sc_local,
            serve_and_wait,
            {"dir": str(tmp_path), "go": str(tmp_path / "never")},
            num_executors=3,
            env=TF_ENV,
        )
        cluster.shutdown(timeout=120)
    assert err.value.exc_type == "PortRangeError", err.value
    assert KEY in str(err.value) and f"{low}-{low + 2}" in str(err.value)
    # the node that found no port never started: the error names no log file of it
    log_file = err.value.log_file
    assert log_file is None or os.path.isfile(log_file), err.value
    assert log_file is not None or "whole output is in" not in str(err.value)
    assert wait_until(lambda: not ours(), timeout=20)


def test_no_port_left_for_the_control_server_fails_at_once(sc_local, session):
    low = free_block(1)
    with socket.create_server(("0.0.0.0", low)):  # someone else's server holds it
        session.conf.set(KEY, f"{low}-{low}")
        with pytest.raises(PortRangeError, match=KEY):
            sparktf.run(sc_local, serve_and_wait, {}, num_executors=1, env=TF_ENV)
