"""A supervisor told to ``kill`` its worker's silent TF process kills only the process of the
incarnation the driver named (sparktf/task/supervisor.py): a kill that crossed a restart in
place must not reach the new process. A real child process; the driver's channel is a list."""

import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from sparktf.common import messages
from sparktf.task.supervisor import Supervisor


class Sent(list):
    """Stands in for the driver's channel: keeps what the supervisor sends."""

    def send(self, message):
        self.append(message)


@pytest.fixture
def supervisor():
    spec = SimpleNamespace(name="worker:0", incarnation=1, launch=SimpleNamespace(tail_lines=10))
    sup = Supervisor(spec, Sent())
    sup.child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield sup
    sup.child.kill()
    sup.child.wait()


def kill(incarnation):
    return messages.make("kill", why="sent no heartbeat for 31s", incarnation=incarnation)


def test_a_kill_for_an_older_incarnation_leaves_the_new_process_alone(supervisor):
    assert supervisor.on_message(kill(0))
    with pytest.raises(subprocess.TimeoutExpired):
        supervisor.child.wait(timeout=0.5)
    assert supervisor.killed_for is None and supervisor.chan == []


def test_a_kill_for_the_running_incarnation_kills_it(supervisor):
    assert supervisor.on_message(kill(1))
    assert supervisor.child.wait(timeout=30) == -signal.SIGKILL
    assert supervisor.killed_for == "sent no heartbeat for 31s"
    assert "killing its TF process" in supervisor.chan[0]["line"]


def test_abort_ends_the_listening():
    sup = Supervisor(
        SimpleNamespace(name="w", incarnation=0, launch=SimpleNamespace(tail_lines=5)), Sent()
    )
    assert not sup.on_message(messages.make("abort"))
