"""The driver's rules for workers restarted in place (sparktf/driver/job/inplace.py), on the pure
JobState: no Spark, no sockets, no processes; the clock is a number."""

from sparktf.common import messages
from sparktf.common.topology import assign_roles
from sparktf.driver.job.state import JobState, Limits, Status

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


# ------------------------------------------------------------------ races (issue 47, §4)
HB = 5.0  # heartbeat_timeout


def supervised_job(withhold=(), kill_wait=13.0):
    """chief:0, worker:0, worker:1, ps:0 with heartbeat_timeout, the workers' supervisors
    restartable; the TF processes of the nodes in ``withhold`` have not said hello yet."""
    roles = assign_roles(4, 1, "chief", False)
    limits = Limits(worker_restarts=3, heartbeat_timeout=HB, kill_wait=kill_wait)
    s = JobState(roles, limits, now=0.0)
    for name in s.nodes:
        restartable = name.startswith("worker")
        s.apply(name, AGENT, messages.hello(AGENT, name, "h", restartable=restartable), 1.0)
        if name not in withhold:
            s.apply(name, NODE, messages.hello(NODE, name, "h"), 1.0)
    return s


def connect(s, name, incarnation, now):
    """A TF process's hello as the runner takes it: refused when stale. Whether it ran."""
    if s.stale(name, incarnation):
        return False
    s.apply(name, NODE, messages.hello(NODE, name, "h", incarnation=incarnation), now)
    return True


def beat_all_but(s, silent, now):
    for name in s.nodes:
        if name != silent:
            s.apply(name, NODE, messages.make("heartbeat", step=None, rows=None), now)


def kills(actions):
    return [a for a in actions if a.message["type"] == "kill"]


def test_a_process_that_crashed_before_its_hello_was_read_cannot_blind_the_drivers_liveness():
    s = supervised_job(withhold=("worker:0",))
    assert answer(ask(s, "worker:0", 2.0, code=1))["go"]  # granted at once: never connected
    assert not connect(s, "worker:0", 0, 2.1)  # its late hello: turned away
    s.apply("worker:0", NODE, {"type": "closed", "incarnation": 0}, 2.2)  # changes nothing
    assert connect(s, "worker:0", 1, 3.0)
    assert s.nodes["worker:0"].alive
    beat_all_but(s, "worker:0", 3.0 + HB + 1)
    [kill] = kills(s.step(3.0 + HB + 1))  # the new process froze: it is seen
    assert kill.to == ("worker:0",) and kill.message["incarnation"] == 1


def test_a_late_hello_of_a_process_restarted_twice_in_a_row_is_stale():
    s = supervised_job()
    s.apply("worker:0", NODE, {"type": "closed", "incarnation": 0}, 2.0)
    assert answer(ask(s, "worker:0", 2.1))["go"]  # restart 1
    # the new process (incarnation 1) crashes before the driver has read its hello
    assert answer(ask(s, "worker:0", 2.5, code=1))["go"]  # restart 2, granted at once
    assert s.stale("worker:0", 1) and not s.stale("worker:0", 2)
    assert not connect(s, "worker:0", 1, 2.6)
    s.apply("worker:0", NODE, {"type": "closed", "incarnation": 1}, 2.7)
    assert connect(s, "worker:0", 2, 3.0)
    beat_all_but(s, "worker:0", 3.0 + HB + 1)
    [kill] = kills(s.step(3.0 + HB + 1))
    assert kill.message["incarnation"] == 2


def test_a_worker_whose_main_fn_raised_waits_for_its_supervisors_restart_request():
    s = supervised_job()
    s.apply("worker:0", NODE, messages.error("main_fn", ValueError("boom")), 2.0)
    s.apply("worker:0", NODE, {"type": "closed", "incarnation": 0}, 2.1)
    beat_all_but(s, "worker:0", 8.0)
    s.step(8.0)  # a large process's exit took 6 s: past the error settle
    assert s.failure(8.0) is None and s.status is Status.RUNNING
    assert answer(ask(s, "worker:0", 8.5, code=1))["go"]
    [absorbed] = s.take_restarted()
    assert absorbed.exc_message == "boom"


def test_a_held_error_fails_the_job_once_its_exit_comes_without_a_restart_request():
    s = supervised_job()
    s.apply("worker:0", NODE, messages.error("main_fn", ValueError("boom")), 2.0)
    s.apply("worker:0", NODE, {"type": "closed", "incarnation": 0}, 2.1)
    assert s.failure(8.0) is None
    s.apply("worker:0", AGENT, messages.make("exit", code=1, aborted=False, tail=[]), 8.1)
    error = s.failure(8.1)
    assert error.node == "worker:0" and error.exc_message == "boom"


def test_a_held_error_fails_the_job_when_neither_exit_nor_request_comes_within_kill_wait():
    s = supervised_job(kill_wait=13.0)
    s.apply("worker:0", NODE, messages.error("main_fn", ValueError("boom")), 2.0)
    assert s.failure(14.9) is None
    error = s.failure(15.1)
    assert error.node == "worker:0" and error.exc_message == "boom"


def test_an_error_is_not_held_for_a_worker_that_may_not_restart_in_place():
    s = job()  # supervisors not restartable (InputMode.SPARK)
    s.apply("worker:0", NODE, messages.error("main_fn", ValueError("boom")), 2.0)
    assert s.failure(5.1).node == "worker:0"


def lockstep(s, name="worker:1", what="SyncReplicasOptimizer"):
    s.apply(name, NODE, messages.make("heartbeat", step=1, rows=None, collective=what), 1.5)


def test_a_lock_step_job_with_parameter_servers_is_not_restarted_in_place():
    s = supervised_job()
    lockstep(s)
    s.apply("worker:0", NODE, {"type": "closed", "incarnation": 0}, 2.0)
    no = answer(ask(s, "worker:0", 2.1))
    assert not no["go"]
    assert "SyncReplicasOptimizer" in no["why"] and "worker:1" in no["why"]
    assert "max_restarts" in no["why"]


def test_a_frozen_worker_of_a_lock_step_job_is_declared_hung_not_killed():
    s = supervised_job()
    lockstep(s, "worker:0")
    beat_all_but(s, "worker:0", 1.5 + HB + 1)
    assert kills(s.step(1.5 + HB + 1)) == []
    assert s.failure(1.5 + HB + 1).node == "worker:0"


def test_an_error_of_a_lock_step_worker_is_not_held():
    s = supervised_job()
    lockstep(s)
    s.apply("worker:0", NODE, messages.error("main_fn", ValueError("boom")), 2.0)
    assert s.failure(5.1).node == "worker:0"


def test_a_kill_names_the_incarnation_it_is_for():
    s = supervised_job()
    beat_all_but(s, "worker:0", 1.0 + HB + 1)
    [kill] = kills(s.step(1.0 + HB + 1))
    assert kill.message["incarnation"] == 0
