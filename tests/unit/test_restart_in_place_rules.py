"""The driver's rules for workers restarted in place (sparktf/driver/inplace.py), on the pure
JobState: no Spark, no sockets, no processes; the clock is a number."""

from sparktf.common import messages
from sparktf.common.topology import assign_roles
from sparktf.driver.state import JobState, Limits, Status

NODE, AGENT = messages.NODE, messages.SUPERVISOR


def job(worker_restarts=2):
    roles = assign_roles(4, 1, "chief", False)  # chief:0, worker:0, worker:1, ps:0
    limits = Limits(worker_restarts=worker_restarts, heartbeat_timeout=None)
    s = JobState(roles, limits, now=0.0)
    for name in s.nodes:
        s.apply(name, AGENT, messages.hello(AGENT, name, "h"), 1.0)
        s.apply(name, NODE, messages.hello(NODE, name, "h"), 1.0)
    return s


def ask(s, name, now, code=-9):
    return s.apply(name, AGENT, messages.make("restart", code=code, tail=["last"]), now)


def answer(actions):
    [send] = [a for a in actions if a.message["type"] == "resume"]
    assert send.channel == AGENT
    return send.message


def test_a_killed_worker_is_restarted_once_its_old_channel_has_ended():
    s = job()
    assert ask(s, "worker:0", 2.0) == []  # its old process's channel is still open
    assert s.failure(2.1) is None
    go = answer(s.apply("worker:0", NODE, {"type": "closed"}, 2.2))
    assert go["go"] and go["count"] == 1 and go["limit"] == 2
    [absorbed] = s.take_restarted()
    assert absorbed.node == "worker:0" and "SIGKILL" in str(absorbed)
    assert absorbed.restarted_in_place
    # the new process says hello with its incarnation; an old one's late hello is stale
    assert s.stale("worker:0", 0) and not s.stale("worker:0", 1)
    s.apply("worker:0", NODE, messages.hello(NODE, "worker:0", "h", incarnation=1), 3.0)
    assert not s.stale("worker:0", 1) and s.incarnation("worker:0") == 1
    s.step(3.1)
    assert s.failure(3.1) is None and s.status is Status.RUNNING
    assert s.progress_snapshot(3.1)["worker:0"]["restarts"] == 1


def test_a_worker_whose_main_fn_raised_restarts_and_its_error_is_forgotten():
    s = job()
    s.apply("worker:0", NODE, messages.error("main_fn", ValueError("boom")), 2.0)
    s.apply("worker:0", NODE, {"type": "closed"}, 2.1)
    go = answer(ask(s, "worker:0", 2.5, code=1))
    assert go["go"]
    [absorbed] = s.take_restarted()
    assert absorbed.exc_type == "ValueError" and absorbed.exc_message == "boom"
    s.step(10.0)  # past the error settle: nothing failed
    assert s.failure(10.0) is None


def test_a_late_close_of_the_old_channel_does_not_touch_the_new_process():
    s = job()
    s.apply("worker:0", NODE, {"type": "closed"}, 2.0)
    answer(ask(s, "worker:0", 2.1))
    s.apply("worker:0", NODE, messages.hello(NODE, "worker:0", "h", incarnation=1), 3.0)
    s.apply("worker:0", NODE, {"type": "closed", "incarnation": 0}, 3.1)
    assert s.nodes["worker:0"].alive


def test_restarts_run_out_and_the_next_failure_names_them():
    s = job(worker_restarts=1)
    s.apply("worker:0", NODE, {"type": "closed"}, 2.0)
    assert answer(ask(s, "worker:0", 2.0))["go"]
    s.apply("worker:0", NODE, messages.hello(NODE, "worker:0", "h", incarnation=1), 3.0)
    s.apply("worker:0", NODE, {"type": "closed", "incarnation": 1}, 4.0)
    no = answer(ask(s, "worker:0", 4.1))
    assert not no["go"] and "restarted in place 1 time already" in no["why"]
    s.apply("worker:0", AGENT, messages.make("exit", code=-9, aborted=False, tail=[]), 4.2)
    error = s.failure(4.3)
    assert error.node == "worker:0" and "restarted in place 1 time:" in str(error)


def test_only_workers_restart_in_place_and_only_where_the_setting_allows():
    s = job()
    assert "only workers" in answer(ask(s, "chief:0", 2.0))["why"]
    assert "only workers" in answer(ask(s, "ps:0", 2.0))["why"]
    assert "workerRestarts is 0" in answer(ask(job(worker_restarts=0), "worker:0", 2.0))["why"]
    done = job()
    done.apply("worker:1", NODE, messages.done(None), 2.0)
    assert "main_fn had returned" in answer(ask(done, "worker:1", 2.1))["why"]


def test_a_restarted_worker_that_never_connects_fails_after_the_reservation_timeout():
    s = job()
    s.apply("worker:0", NODE, {"type": "closed"}, 2.0)
    answer(ask(s, "worker:0", 2.0))
    s.step(100.0)
    assert s.failure(100.0) is None
    s.step(200.0)  # reservation_timeout 120 s from the restart
    error = s.failure(200.0)
    assert error.node == "worker:0" and "did not connect within reservation_timeout" in str(error)
