"""An exit report is never lost behind a node's output: the rule, on the pure JobState.

A supervisor sends its node's output lines and then its exit report on one connection, in
order. Under heavy output the driver may still be reading megabytes of lines (socket buffers
hold them) when the supervisor, its barrier task and the Spark job have all ended: the exit is
behind those lines, on its way. Deterministic: the clock is a number, nothing sleeps."""

from sparktf.common import messages
from sparktf.common.topology import assign_roles
from sparktf.driver.job.state import JobState, Limits, Status
from sparktf.errors import SparkJobError

NODE, SUPERVISOR = messages.NODE, messages.SUPERVISOR


def _running_job():
    s = JobState(assign_roles(2, 0, "chief", False), Limits(), now=0.0)
    for name in s.nodes:
        s.apply(name, SUPERVISOR, messages.hello(SUPERVISOR, name, "h"), 1.0)
        s.apply(name, NODE, messages.hello(NODE, name, "h"), 1.0)
        s.apply(name, NODE, messages.done(name), 2.0)
        s.apply(name, NODE, {"type": "closed"}, 2.0)
    return s


def _line(s, name, now, i=0):
    s.apply(name, SUPERVISOR, messages.make("log", stream="stdout", line=f"line {i}"), now)


def _exit(s, name, now):
    s.apply(name, SUPERVISOR, messages.make("exit", code=0, aborted=False, tail=[]), now)
    s.apply(name, SUPERVISOR, {"type": "closed"}, now)


def test_an_exit_still_behind_lines_being_read_is_waited_for_after_the_job_ends():
    s = _running_job()
    _exit(s, "chief:0", 2.5)
    s.job_ended(None, 3.0)  # worker:0's supervisor has gone; its lines are still being read
    settle = s.limits.error_settle
    now = 3.0
    for i in range(int(4 * settle / 0.5)):  # lines keep coming, well past the settle time
        now += 0.5
        _line(s, "worker:0", now, i)
        s.step(now)
        assert s.outcome is None, s.outcome
    _exit(s, "worker:0", now + 0.1)
    s.step(now + 0.1)
    assert s.status is Status.FINISHED and s.results == {
        "chief:0": "chief:0",
        "worker:0": "worker:0",
    }


def test_a_supervisor_connection_silent_past_the_settle_time_after_the_job_still_fails():
    s = _running_job()
    _exit(s, "chief:0", 2.5)
    s.job_ended(None, 3.0)
    _line(s, "worker:0", 3.5)
    s.step(3.5 + s.limits.error_settle - 0.1)
    assert s.outcome is None
    s.step(3.5 + s.limits.error_settle + 0.1)  # open but silent: nothing is on its way
    assert s.status is Status.FAILED and isinstance(s.outcome, SparkJobError)
    assert "['worker:0'] never reported their exit" in str(s.outcome)


def test_a_node_whose_supervisor_never_connected_is_still_named_after_the_settle_time():
    s = JobState(assign_roles(2, 0, "chief", False), Limits(), now=0.0)
    s.apply("chief:0", SUPERVISOR, messages.hello(SUPERVISOR, "chief:0", "h"), 1.0)
    s.apply("chief:0", NODE, messages.hello(NODE, "chief:0", "h"), 1.0)
    s.apply("chief:0", NODE, messages.done("chief:0"), 2.0)
    s.apply("chief:0", NODE, {"type": "closed"}, 2.0)
    _exit(s, "chief:0", 2.0)
    s.job_ended(None, 3.0)
    s.step(3.0 + s.limits.error_settle + 0.1)
    assert isinstance(s.outcome, SparkJobError) and "worker:0" in str(s.outcome)
