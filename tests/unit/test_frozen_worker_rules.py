"""A worker whose TF process is stopped or frozen (silent past heartbeat_timeout) is killed by
its supervisor and restarted in place, where a worker may be (sparktf/driver/job/inplace.py,
liveness.py, state.py); everywhere else it is declared hung, as before. On the pure JobState:
no Spark, no sockets, no processes; the clock is a number."""

import pytest

from sparktf.common import messages
from sparktf.common.topology import assign_roles
from sparktf.driver.job import failures
from sparktf.driver.job.state import JobState, Limits, Status

NODE, AGENT = messages.NODE, messages.SUPERVISOR
HB = 5.0  # heartbeat_timeout
HUNG = "while running: its process is stopped, frozen or starved"  # today's words


def job(worker_restarts=2, restartable=True, kill_wait=13.0):
    """chief:0, worker:0, worker:1, ps:0; every node said hello at 1.0 and beats at 1.0.
    ``restartable``: what the workers' supervisors say in their hello (False: fed by
    InputMode.SPARK)."""
    roles = assign_roles(4, 1, "chief", False)
    limits = Limits(worker_restarts=worker_restarts, heartbeat_timeout=HB, kill_wait=kill_wait)
    s = JobState(roles, limits, now=0.0)
    for name in s.nodes:
        said = restartable and name.startswith("worker")
        s.apply(name, AGENT, messages.hello(AGENT, name, "h", restartable=said), 1.0)
        s.apply(name, NODE, messages.hello(NODE, name, "h"), 1.0)
    return s


def beat_all_but(s, silent, now):
    for name in s.nodes:
        if name != silent:
            s.apply(name, NODE, messages.make("heartbeat", step=None, rows=None), now)


def kills(actions):
    return [a for a in actions if a.message["type"] == "kill"]


def test_a_silent_worker_is_killed_by_its_supervisor_and_restarted_in_place():
    s = job()
    beat_all_but(s, "worker:0", 6.5)
    [kill] = kills(s.step(6.5))  # 5.5 s of silence: past heartbeat_timeout
    assert kill.to == ("worker:0",) and kill.channel == AGENT
    assert kill.message["why"] == "sent no heartbeat for 5.5s (heartbeat_timeout=5s)"
    assert s.failure(6.5) is None and s.status is Status.RUNNING
    # while it is being killed, liveness leaves it alone: no second kill, no hung
    beat_all_but(s, "worker:0", 10.0)
    assert kills(s.step(10.0)) == [] and s.failure(10.0) is None
    # its supervisor killed it: the process's channel ends, then the restart request
    s.apply("worker:0", NODE, {"type": "closed"}, 10.1)
    [go] = s.apply("worker:0", AGENT, messages.make("restart", code=-9, tail=["last"]), 10.2)
    assert go.message["type"] == "resume" and go.message["go"]
    [absorbed] = s.take_restarted()
    assert absorbed.node == "worker:0" and absorbed.restarted_in_place
    assert "sent no heartbeat for 5.5s (heartbeat_timeout=5s)" in str(absorbed)
    assert "stopped or frozen, and its supervisor killed it" in str(absorbed)
    assert s.progress_snapshot(10.2)["worker:0"]["restarts"] == 1
    # its new process says hello and beats: a later silence counts afresh
    s.apply("worker:0", NODE, messages.hello(NODE, "worker:0", "h", incarnation=1), 12.0)
    beat_all_but(s, None, 16.0)
    assert kills(s.step(16.0)) == [] and s.failure(16.0) is None


def test_the_resume_go_follows_the_kill_as_for_any_exit():
    s = job()
    beat_all_but(s, "worker:0", 6.5)
    assert kills(s.step(6.5))
    assert s.apply("worker:0", AGENT, messages.make("restart", code=-9, tail=[]), 7.0) == []
    [resume] = s.apply("worker:0", NODE, {"type": "closed"}, 7.1)  # once the channel ended
    assert resume.message["type"] == "resume" and resume.message["go"]


def test_a_supervisor_that_never_asks_for_the_restart_gets_its_worker_declared_hung():
    s = job(kill_wait=13.0)
    beat_all_but(s, "worker:0", 6.5)
    assert kills(s.step(6.5))
    beat_all_but(s, "worker:0", 19.0)
    s.step(19.0)
    assert s.failure(19.0) is None  # 12.5 s since the kill: within kill_wait
    beat_all_but(s, "worker:0", 19.6)
    s.step(19.6)
    error = s.failure(19.6)
    assert error.node == "worker:0" and s.status is Status.FAILED
    assert "sent no heartbeat for 5.5s (heartbeat_timeout=5s)" in str(error)
    assert "did not have it restarted within 13s" in str(error)


def test_a_restart_refused_after_the_kill_fails_the_job_saying_it_was_silent():
    s = job(worker_restarts=1)
    beat_all_but(s, "worker:0", 6.5)
    assert kills(s.step(6.5))
    s.fail(RuntimeError("something else ended the attempt"))  # the job is ending
    s.apply("worker:0", NODE, {"type": "closed"}, 7.0)
    [no] = s.apply("worker:0", AGENT, messages.make("restart", code=-9, tail=[]), 7.1)
    assert not no.message["go"] and "the job is ending" in no.message["why"]
    s.apply("worker:0", AGENT, messages.make("exit", code=-9, aborted=False, tail=[]), 7.2)
    error = failures.node_error(s.nodes["worker:0"], [])
    assert error.reason.startswith(
        "sent no heartbeat for 5.5s (heartbeat_timeout=5s): its TensorFlow process was "
        "stopped or frozen, and its supervisor killed it"
    )


def test_a_silent_worker_whose_supervisor_is_gone_is_lost_not_killed():
    s = job()
    s.apply("worker:0", AGENT, {"type": "closed"}, 2.0)
    beat_all_but(s, "worker:0", 6.5)
    assert kills(s.step(6.5)) == []
    assert s.failure(6.5).node == "worker:0"


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("chief:0", lambda: job()),
        ("ps:0", lambda: job()),
        ("worker:0", lambda: job(worker_restarts=0)),
        ("worker:0", lambda: job(restartable=False)),  # InputMode.SPARK: fed
    ],
    ids=["chief", "ps", "workerRestarts=0", "fed-by-spark"],
)
def test_elsewhere_a_silent_node_is_declared_hung_as_before(name, make):
    s = make()
    if name == "ps:0":
        s.apply(name, NODE, messages.make("state", state="serving"), 1.5)
    beat_all_but(s, name, 6.5)
    assert kills(s.step(6.5)) == []
    error = s.failure(6.5)
    assert error.node == name and s.status is Status.FAILED
    state = "serving" if name == "ps:0" else "running"
    assert str(error).startswith(
        f"sparktf node {name} on host h failed: sent no heartbeat for 5.5s "
        f"(heartbeat_timeout=5s) while {state}: its process is stopped, frozen or starved"
    )
    assert not error_restarted(s)


def error_restarted(s):
    return any(getattr(f, "restarted_in_place", False) for f in s.take_restarted())


def test_a_worker_whose_restarts_ran_out_is_declared_hung_as_before():
    s = job(worker_restarts=1)
    s.apply("worker:0", NODE, {"type": "closed"}, 2.0)
    s.apply("worker:0", AGENT, messages.make("restart", code=-9, tail=[]), 2.0)
    s.apply("worker:0", NODE, messages.hello(NODE, "worker:0", "h", incarnation=1), 3.0)
    beat_all_but(s, "worker:0", 8.5)
    assert kills(s.step(8.5)) == []
    error = s.failure(8.5)
    assert error.node == "worker:0" and HUNG in str(error)
    assert "restarted in place 1 time" in str(error)


def test_the_kill_message_is_in_the_catalogue():
    assert messages.make("kill", why="sent no heartbeat", incarnation=2) == {
        "type": "kill",
        "why": "sent no heartbeat",
        "incarnation": 2,
    }
    assert messages.CATALOGUE["kill"].receiver == "supervisor"
