"""Stopping a process tree (sparktf.common.procs), with real child processes; no Spark."""

import subprocess
import sys


def _run(code: str) -> list[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()


def test_has_children_sees_a_running_child_and_a_zombie_and_nothing_once_reaped():
    """The supervisor asks this after its TF process has exited; with no child left it skips
    the scan of every process on the host that finding descendants takes."""
    out = _run(r"""
import os, subprocess, sys, time
from sparktf.common import procs
a = procs.has_children()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
b = procs.has_children()
child.kill()
time.sleep(0.5)   # dead, not yet reaped: a zombie is still a child
c = procs.has_children()
child.wait()
d = procs.has_children()
print(a, b, c, d)
""")
    assert out == ["False", "True", "True", "False"]


def test_kill_tree_stops_an_orphaned_grandchild_of_a_subreaper():
    """A grandchild whose parent has exited is re-parented to the subreaper (the supervisor),
    so its being a child again is what makes kill_tree look for descendants and stop it."""
    out = _run(r"""
import os, subprocess, sys, time
from sparktf.common import procs
procs.become_subreaper()
middle = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
    "'import time; time.sleep(30)'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "print(p.pid, flush=True)"], stdout=subprocess.PIPE)
grandchild = int(middle.stdout.readline())
middle.wait()
time.sleep(0.2)
alive = procs.has_children()
procs.kill_tree(grace=2.0)
try:
    os.kill(grandchild, 0)
    gone = False
except ProcessLookupError:
    gone = True
print(alive, gone, procs.has_children())
""")
    assert out == ["True", "True", "False"]


def test_kill_tree_with_no_children_returns_at_once():
    """Nothing to stop: no scan, no grace waited, nothing killed."""
    out = _run(
        "import time; from sparktf.common import procs; t = time.monotonic(); "
        "print(procs.kill_tree(grace=5.0), time.monotonic() - t < 1.0)"
    )
    assert out == ["[]", "True"]
