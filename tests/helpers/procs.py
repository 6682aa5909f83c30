"""What the tests ask of processes, threads and ports, whichever tier they are in: the live
processes of sparktf jobs on this machine, the driver's sparktf threads, waiting for a
condition, whether a port is free or a process alive; and the environment that quiets
TensorFlow in the nodes."""

import os
import socket
import sys
import threading
import time

import psutil

#: Quiet TensorFlow's C++ start-up messages in the nodes.
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


#: Marks what this test session starts (tests/conftest.py sets it in os.environ, so Spark's
#: JVM, its Python workers and the nodes inherit it): another session's processes on a shared
#: machine are not this one's leaks.
SESSION_VARIABLE = "SPARKTF_TEST_SESSION"


def _of_another_session(proc):
    """Whether ``proc`` says it belongs to another test session (a process without the
    marker, or whose environment cannot be read, counts as this session's)."""
    try:
        theirs = proc.environ().get(SESSION_VARIABLE)
    except (psutil.Error, OSError):
        return False
    return theirs is not None and theirs != os.environ.get(SESSION_VARIABLE)


def sparktf_processes():
    """Every live process of a sparktf job on this machine but another test session's:
    supervisors, TF processes, and everything they started (TensorBoard, a main_fn's own
    children): these all carry the SPARKTF_NODE variable, unless they cleared their
    environment. A supervisor forked from its Spark Python worker, and the TF process forked
    from it, are known by their names."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "name"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if (
            "sparktf.task.supervisor" in cmd
            or "sparktf.node" in cmd
            or proc.info["name"] in ("sparktf-sup", "sparktf-node")
        ):
            found.append(proc)
            continue
        try:
            if "SPARKTF_NODE" in proc.environ() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            pass
    return [p for p in found if not _of_another_session(p)]


def sparktf_threads():
    """The driver's threads of sparktf jobs (monitor, Spark job, control server)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("sparktf")]


def wait_until(predicate, timeout=15.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def port_is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def pid_alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


#: The checkout the tests run from (tests/helpers/procs.py is two folders below it).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def user_env(**extra):
    """The environment of a user's command (spark-submit, python script.py) in a test: this
    checkout first on PYTHONPATH, loopback, this Python for the driver and the workers."""
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        **extra,
    )
