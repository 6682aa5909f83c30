"""The suite's leak check (helpers.procs.sparktf_processes, behind the no_leaks fixture) on a
shared machine: a node process of this session counts, another session's does not."""

import os
import subprocess
import sys

import pytest
from helpers.procs import SESSION_VARIABLE, sparktf_processes


@pytest.mark.parametrize("session, counted", [("mine", True), ("another", False), (None, True)])
def test_a_node_of_another_test_session_is_not_this_sessions_leak(session, counted):
    env = dict(os.environ, SPARKTF_NODE="worker:0")
    if session == "another":
        env[SESSION_VARIABLE] = "another-session"
    elif session is None:
        env.pop(SESSION_VARIABLE, None)  # (a process without the marker counts: conservative)
    # (Popen returns once the child has exec'd: its environment is readable)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        assert (proc.pid in [p.pid for p in sparktf_processes()]) is counted
    finally:
        proc.kill()
        proc.wait()
