"""When the barrier task may fork the node's supervisor (no Spark needed)."""

import subprocess
import sys


def test_the_supervisor_is_not_forked_from_a_process_with_other_threads():
    """A fork copies only the calling thread (a lock another one holds stays held): then the
    supervisor gets an interpreter of its own."""
    code = ("import threading; from sparktf.task.barrier import _may_fork; a = _may_fork(); "
            "e = threading.Event(); t = threading.Thread(target=e.wait); t.start(); "
            "b = _may_fork(); e.set(); t.join(); print(a, b)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False"]
