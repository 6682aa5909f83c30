"""Fault injection with real processes on local-cluster (separate executor JVMs).

Each fault, in both input modes where it applies: the driver raises a sparktf error naming
the node (within 15 s; a hang within its timeout), and afterwards no process of the job is
alive and every port its nodes held is free - checked in the process table and by binding.
Detection times are printed (run with -s to see them; docs/reliability.md has them).
"""

import contextlib
import json
import os
import signal
import threading
import time

import psutil
import pytest
from helpers import jobs
from helpers.procs import port_is_free, wait_until

import sparktf

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaks")]

MODES = [sparktf.InputMode.TENSORFLOW, sparktf.InputMode.SPARK]


@pytest.fixture(scope="module")
def sc_cluster(spark_pool):
    return spark_pool.get("local-cluster[3,1,1024]")


def node_processes(info_dir, names):
    """{node name: {"node": pid, "supervisor": pid, "port": its TF port}}: chief and workers
    write theirs (jobs.steady_training); a ps is the process whose TF server listens on its
    port (the barrier task holds the port unlistened until then)."""
    found = {}
    for path in info_dir.glob("*.json"):
        try:
            found[path.stem.replace("_", ":")] = json.loads(path.read_text())
        except ValueError:
            continue  # being written
    if "ps:0" in names and found:
        cluster = next(iter(found.values()))["cluster"]
        port = int(cluster["ps"][0].rsplit(":", 1)[1])
        for conn in psutil.net_connections("tcp"):  # the ps's TF server, once it listens
            if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
                proc = psutil.Process(conn.pid)
                found["ps:0"] = {"node": proc.pid, "supervisor": proc.ppid(), "port": port}
    return found


class Job:
    """A cluster running jobs.steady_training, started in either input mode."""

    def __init__(
        self,
        sc,
        mode,
        args,
        tmp_path,
        num_ps=0,
        eval_node=False,
        main_fn=jobs.steady_training,
        **run_kwargs,
    ):
        self.error, self.raised_at, self.raised_wall = None, None, None
        args = dict(args, dir=str(tmp_path))
        n = 2 + num_ps + eval_node
        self.names = (
            {"chief:0", "worker:0"}
            | ({"ps:0"} if num_ps else set())
            | ({"evaluator:0"} if eval_node else set())
        )
        self.cluster = sparktf.run(
            sc,
            main_fn,
            args,
            num_executors=n,
            num_ps=num_ps,
            eval_node=eval_node,
            input_mode=mode,
            **run_kwargs,
        )
        if mode is sparktf.InputMode.SPARK:
            data = sc.parallelize(range(100000), 4)
            self.thread = threading.Thread(
                target=self._wait, args=(lambda: self.cluster.train(data, feed_timeout=120),)
            )
        else:
            self.thread = threading.Thread(
                target=self._wait, args=(lambda: self.cluster.shutdown(timeout=120),)
            )
        self.thread.start()
        if not wait_until(
            lambda: set(node_processes(tmp_path, self.names)) >= self.names, timeout=90
        ):
            with contextlib.suppress(sparktf.SparkTFError):
                self.cluster.shutdown(timeout=1)  # stops every node
            pytest.fail(f"the nodes did not start: {node_processes(tmp_path, self.names)}")
        time.sleep(1.5)  # every node past its start-up, training
        self.procs = node_processes(tmp_path, self.names)

    def _wait(self, call):
        try:
            call()
        except BaseException as exc:
            self.error, self.raised_at, self.raised_wall = exc, time.monotonic(), time.time()

    def outcome(self, fault_at, limit):
        self.thread.join(limit + 30)
        assert not self.thread.is_alive(), "the driver did not raise"
        with pytest.raises(sparktf.SparkTFError):  # shutdown() says the same afterwards
            self.cluster.shutdown(timeout=60)
        took = self.raised_at - fault_at
        pids = [pid for p in self.procs.values() for pid in (p["node"], p["supervisor"])]
        assert wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), timeout=15), (
            f"processes left: {[p for p in pids if psutil.pid_exists(p)]}"
        )
        ports = [p["port"] for p in self.procs.values()]
        assert wait_until(lambda: all(port_is_free(p) for p in ports), timeout=15)
        return self.error, took


def report(what, mode, took):
    print(f"\nDETECTION {what} [{mode.value}]: {took:.2f}s")


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_sigkill_of_a_workers_tf_process(sc_cluster, mode, tmp_path):
    job = Job(sc_cluster, mode, {}, tmp_path)
    os.kill(job.procs["worker:0"]["node"], signal.SIGKILL)
    error, took = job.outcome(time.monotonic(), 15)
    assert isinstance(error, sparktf.NodeError) and error.node == "worker:0"
    assert "SIGKILL" in str(error) and took < 15
    report("worker TF process SIGKILLed", mode, took)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_sigkill_of_a_parameter_server(sc_cluster, mode, tmp_path):
    job = Job(sc_cluster, mode, {}, tmp_path, num_ps=1)
    os.kill(job.procs["ps:0"]["node"], signal.SIGKILL)
    error, took = job.outcome(time.monotonic(), 15)
    assert isinstance(error, sparktf.NodeError) and error.node == "ps:0"
    assert took < 15
    report("parameter server SIGKILLed", mode, took)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_the_chief_raises(sc_cluster, mode, tmp_path):
    job = Job(sc_cluster, mode, {"raise": "chief:0", "raise_after": 3.0}, tmp_path)
    error, _ = job.outcome(time.monotonic(), 60)
    assert isinstance(error, sparktf.NodeError) and error.node == "chief:0"
    assert error.exc_type == "RuntimeError" and "the chief gave up" in error.exc_message
    took = job.raised_wall - marked(error, "raising at")
    assert took < 15
    report("chief raised", mode, took)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_a_worker_that_hangs_is_found_by_its_progress_timeout(sc_cluster, mode, tmp_path):
    job = Job(
        sc_cluster, mode, {"hang": "worker:0", "hang_after": 2.0}, tmp_path, progress_timeout=4
    )
    error, _ = job.outcome(time.monotonic(), 30)
    assert isinstance(error, sparktf.NodeError) and error.node == "worker:0"
    assert "made no progress" in str(error) and "progress_timeout=4s" in str(error)
    took = job.raised_wall - marked(error, "hanging at")
    assert 4 <= took < 10
    report("worker hung, alive (progress_timeout=4s)", mode, took)


def marked(error, label):
    """The wall-clock time a node printed as 'label <time>' (in the error's output tail)."""
    import re

    return float(re.search(label + r" (\d+\.\d+)", str(error)).group(1))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_a_stopped_worker_is_found_by_its_heartbeat_timeout(sc_cluster, mode, tmp_path):
    job = Job(sc_cluster, mode, {}, tmp_path, heartbeat_timeout=3)
    os.kill(job.procs["worker:0"]["node"], signal.SIGSTOP)
    error, took = job.outcome(time.monotonic(), 15)
    assert isinstance(error, sparktf.NodeError) and error.node == "worker:0"
    # from the last heartbeat (up to 1 s before the stop) to heartbeat_timeout, plus a tick
    assert "sent no heartbeat" in str(error) and 1.5 <= took < 10
    report("worker SIGSTOPped (heartbeat_timeout=3s)", mode, took)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_an_executor_jvm_dies(sc_cluster, mode, tmp_path):
    job = Job(sc_cluster, mode, {}, tmp_path)
    jvm = psutil.Process(job.procs["worker:0"]["node"])
    while jvm.name() != "java":
        jvm = jvm.parent()
    jvm.kill()
    error, took = job.outcome(time.monotonic(), 15)
    assert isinstance(error, (sparktf.NodeError, sparktf.SparkJobError))
    assert "worker:0" in str(error) and took < 15
    report("executor JVM SIGKILLed", mode, took)


def test_a_frozen_parameter_server_is_found_by_its_heartbeat_timeout(sc_cluster, tmp_path):
    mode = sparktf.InputMode.TENSORFLOW
    job = Job(sc_cluster, mode, {}, tmp_path, num_ps=1, heartbeat_timeout=3)
    ps = psutil.Process(job.procs["ps:0"]["node"])
    port = job.procs["ps:0"]["port"]
    assert wait_until(
        lambda: any(
            c.status == psutil.CONN_LISTEN and c.laddr.port == port
            for c in ps.net_connections("tcp")
        ),
        timeout=60,
    )
    time.sleep(1.0)  # its TF server listens: it is serving (and has told the driver so)
    os.kill(ps.pid, signal.SIGSTOP)
    error, took = job.outcome(time.monotonic(), 15)
    assert isinstance(error, sparktf.NodeError) and error.node == "ps:0"
    assert "sent no heartbeat" in str(error) and "while serving" in str(error)
    assert 1.5 <= took < 10
    report("parameter server SIGSTOPped (heartbeat_timeout=3s)", mode, took)


def test_an_evaluator_killed_fails_the_job_and_leaves_nothing(sc_cluster, tmp_path):
    mode = sparktf.InputMode.TENSORFLOW
    job = Job(sc_cluster, mode, {}, tmp_path, eval_node=True)
    os.kill(job.procs["evaluator:0"]["node"], signal.SIGKILL)
    error, took = job.outcome(time.monotonic(), 15)
    assert isinstance(error, sparktf.NodeError) and error.node == "evaluator:0"
    assert "SIGKILL" in str(error) and took < 15
    report("evaluator TF process SIGKILLed", mode, took)


def test_an_executor_jvm_dies_and_max_restarts_brings_the_cluster_back(sc_cluster, tmp_path):
    """A fault combined with a restart: the first attempt loses an executor; the second
    attempt runs on the executors left (and the one Spark relaunches) and finishes."""
    job = Job(
        sc_cluster,
        sparktf.InputMode.TENSORFLOW,
        {},
        tmp_path,
        main_fn=jobs.steady_unless_restarted,
        max_restarts=1,
    )
    jvm = psutil.Process(job.procs["worker:0"]["node"])
    while jvm.name() != "java":
        jvm = jvm.parent()
    jvm.kill()
    job.thread.join(180)
    assert not job.thread.is_alive() and job.error is None, job.error
    assert job.cluster.attempt == 1
    [failure] = job.cluster.failures
    assert "worker:0" in str(failure)
    assert {r["attempt"] for r in job.cluster.results.values() if r} == {1}
    pids = [pid for p in job.procs.values() for pid in (p["node"], p["supervisor"])]
    assert wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), timeout=15)
