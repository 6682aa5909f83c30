"""When the barrier task may fork the node's supervisor (no Spark needed)."""

import os
import subprocess
import sys


def test_the_supervisor_is_not_forked_from_a_process_with_other_threads():
    """A fork copies only the calling thread (a lock another one holds stays held): then the
    supervisor gets an interpreter of its own."""
    code = (
        "import threading; from sparktf.task.barrier import _may_fork; a = _may_fork(); "
        "e = threading.Event(); t = threading.Thread(target=e.wait); t.start(); "
        "b = _may_fork(); e.set(); t.join(); print(a, b)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "False"]


def test_jemallocs_background_thread_does_not_stop_the_fork():
    """pyarrow's jemalloc starts a native purger thread in a worker that read Arrow data;
    jemalloc is fork-safe, so that thread alone does not stop the fork, while any other
    native thread does. (A bare native thread stands in for each here, named by prctl as
    jemalloc names its own; tests/spark/test_feed.py sees the real one.)"""
    code = r"""
import _thread, ctypes
from sparktf.task.barrier import _may_fork

def native(name, ready, hold):
    ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
    ready.release()
    hold.acquire()

def start(name):
    ready, hold = _thread.allocate_lock(), _thread.allocate_lock()
    ready.acquire(); hold.acquire()
    _thread.start_new_thread(native, (name, ready, hold))
    ready.acquire()
    return hold

jemalloc = start("jemalloc_bg_thd")
a = _may_fork()
other = start("some_pool")
b = _may_fork()
print(a, b)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "False"]


def test_numpys_blas_threads_started_by_the_preload_do_not_stop_the_fork():
    """With spark.task.cpus > 1 Spark sets OMP_NUM_THREADS above 1 and importing numpy starts
    OpenBLAS's thread pool, which stops itself around a fork (pthread_atfork): the threads the
    worker's own preload started do not stop the fork, any other thread still does, and the
    forked child can use BLAS at once."""
    code = r"""
import os, sys, threading
from sparktf.task import barrier
barrier.preload()
a = barrier._may_fork()
pid = os.fork()
if pid == 0:
    import numpy
    m = numpy.ones((300, 300))
    os._exit(0 if float((m @ m)[0, 0]) == 300.0 else 1)
_, status = os.waitpid(pid, 0)
e = threading.Event(); t = threading.Thread(target=e.wait); t.start()
b = barrier._may_fork()
e.set(); t.join()
print(a, os.waitstatus_to_exitcode(status), b, len(barrier._PRELOADED_THREADS) > 0)
"""
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    env.pop("OPENBLAS_NUM_THREADS", None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=60,
    ).stdout.split()
    assert out[:3] == ["True", "0", "False"], out


def test_a_preloaded_thread_that_ended_is_forgotten():
    """The preload's threads end at a fork; a later thread that the kernel gives the same id
    must not pass for one of them."""
    from sparktf.task import barrier

    barrier._PRELOADED_THREADS["999999999"] = "python3"  # an id no thread of ours has
    # (private: the fork guard, tested directly; no public call reaches it alone)
    barrier._may_fork()
    assert "999999999" not in barrier._PRELOADED_THREADS
