"""The job's rules, table-tested on the pure JobState: no Spark, no sockets, no processes.

Each test feeds the messages a real job would see, at chosen times, and checks what the state
decides. The clock is a number: nothing sleeps.
"""

import pytest

from sparktf.common import messages
from sparktf.common.topology import assign_roles
from sparktf.driver.job.failures import restartable
from sparktf.driver.job.state import JobState, Limits, Status
from sparktf.errors import ClusterTimeoutError, NodeError, ReservationTimeoutError, SparkJobError

NODE, SUPERVISOR, TASK = messages.NODE, messages.SUPERVISOR, messages.TASK


def job(num=3, num_ps=0, eval_node=False, **limits):
    roles = assign_roles(num, num_ps, "chief", eval_node)
    return JobState(roles, Limits(**limits), now=0.0)


def start(state, now=1.0, names=None):
    for name in names or state.nodes:
        state.apply(name, SUPERVISOR, messages.hello(SUPERVISOR, name, "h"), now)
        state.apply(name, NODE, messages.hello(NODE, name, "h"), now)


def beat(state, now, names=None, step=None):
    for name in names or state.nodes:
        state.apply(name, NODE, messages.make("heartbeat", step=step, rows=None), now)


def finish(state, name, now, value="v", code=0):
    """A node returns value, is stopped, and exits (its channel closes)."""
    state.apply(name, NODE, messages.done(value), now)
    state.apply(name, SUPERVISOR, messages.make("exit", code=code, aborted=False, tail=[]), now)
    state.apply(name, NODE, {"type": "closed"}, now)


def sent(actions, type_):
    return {name for a in actions if a.message["type"] == type_ for name in a.to}


def test_nodes_register_and_the_attempt_runs():
    s = job()
    assert s.status is Status.LAUNCHING and not s.registered
    start(s, names=["chief:0", "worker:0"])
    assert s.status is Status.LAUNCHING
    start(s, names=["worker:1"])
    assert s.registered and s.status is Status.RUNNING


def test_training_done_then_stop_after_the_grace_then_finished():
    s = job(num_ps=1)
    start(s)
    s.apply("ps:0", NODE, messages.make("state", state="serving"), 1.0)
    s.grace = 2.0
    for name in ("chief:0", "worker:0"):
        s.apply(name, NODE, messages.done(name), 2.0)
    actions = s.step(2.0)
    assert s.status is Status.STOPPING
    assert sent(actions, "training_done") == {"chief:0", "worker:0", "ps:0"}
    assert sent(actions, "stop") == set()  # the grace runs
    actions = s.step(4.1)
    # finished nodes wait for 'stop' too: their TF servers may still be used by a late peer
    assert sent(actions, "stop") == {"chief:0", "worker:0", "ps:0"}
    s.job_ended(None, 5.0)
    for name in s.nodes:
        s.apply(name, NODE, messages.done(None), 5.0) if name == "ps:0" else None
        s.apply(name, SUPERVISOR, messages.make("exit", code=0, aborted=False, tail=[]), 5.0)
        s.apply(name, NODE, {"type": "closed"}, 5.0)
    s.step(5.0)
    assert s.status is Status.FINISHED
    assert s.results == {"chief:0": "chief:0", "worker:0": "worker:0", "ps:0": None}


def test_a_parameter_server_still_starting_is_stopped_with_the_others():
    """A ps whose server is not up yet when training ends (it still imports TensorFlow: a
    short main_fn, or a chief that failed over at once) gets 'stop' with the others instead
    of keeping shutdown() waiting until its server has started only to be stopped."""
    s = job(num=4, num_ps=2)
    start(s)
    s.apply("ps:0", NODE, messages.make("state", state="serving"), 1.0)  # ps:1 still starting
    for name in ("chief:0", "worker:0"):
        s.apply(name, NODE, messages.done(name), 2.0)
    actions = s.step(2.0)
    assert sent(actions, "stop") == {"chief:0", "worker:0", "ps:0", "ps:1"}
    # it reports serving after all (the stop crossed its start): told again, harmlessly
    assert sent(s.apply("ps:1", NODE, messages.make("state", state="serving"), 2.1), "stop") == {
        "ps:1"
    }


def test_the_last_result_is_never_lost_to_its_processes_exit():
    """The supervisor's exit report may overtake the node's own 'done' on its channel."""
    s = job(num=2)
    start(s)
    s.job_ended(None, 1.0)
    finish(s, "chief:0", 1.0)
    s.apply("worker:0", SUPERVISOR, messages.make("exit", code=0, aborted=False, tail=[]), 1.0)
    s.step(1.5)
    assert s.status is not Status.FINISHED  # worker:0's value is still on its way
    s.apply("worker:0", NODE, messages.done([1] * 1000), 1.6)
    s.apply("worker:0", NODE, {"type": "closed"}, 1.6)
    s.step(1.7)
    assert s.status is Status.FINISHED and s.results["worker:0"] == [1] * 1000


def test_a_clean_exit_without_a_result_is_a_failure_not_a_silent_none():
    s = job(num=2)
    start(s)
    s.apply("worker:0", SUPERVISOR, messages.make("exit", code=0, aborted=False, tail=["bye"]), 2.0)
    s.apply("worker:0", NODE, {"type": "closed"}, 2.0)
    s.step(2.0)
    assert s.status is Status.FAILED
    assert isinstance(s.outcome, NodeError) and s.outcome.node == "worker:0"
    assert "without reporting main_fn's result" in str(s.outcome)


def test_an_evaluator_evaluating_after_training_ended_is_alive_and_finishes():
    s = job(num=3, eval_node=True, heartbeat_timeout=3.0)
    start(s)
    for name in ("chief:0", "worker:0"):
        s.apply(name, NODE, messages.done(name), 2.0)
    actions = s.step(2.0) + s.step(2.1)
    assert "evaluator:0" in sent(actions, "training_done")
    assert "evaluator:0" not in sent(actions, "stop")  # it still evaluates
    for t in range(3, 20):  # evaluates for a long time, heartbeating as it does
        beat(s, t, ["evaluator:0", "chief:0", "worker:0"])
        s.step(t + 0.5)
    assert s.status is Status.STOPPING and s.outcome is None
    actions = s.apply("evaluator:0", NODE, messages.done({"acc": 0.9}), 20.0)
    assert sent(actions, "stop") == {"evaluator:0"}  # the job is over: it may exit
    s.job_ended(None, 21.0)
    for name in s.nodes:
        s.apply(name, SUPERVISOR, messages.make("exit", code=0, aborted=False, tail=[]), 21.0)
        s.apply(name, NODE, {"type": "closed"}, 21.0)
    s.step(21.0)
    assert s.status is Status.FINISHED and s.results["evaluator:0"] == {"acc": 0.9}


@pytest.mark.parametrize("state_msg", [None, "serving"], ids=["running", "serving"])
def test_a_frozen_node_is_found_by_its_heartbeat_timeout_whatever_it_does(state_msg):
    s = job(num=3, num_ps=1, heartbeat_timeout=3.0)
    start(s)
    if state_msg:
        s.apply("ps:0", NODE, messages.make("state", state=state_msg), 1.0)
    for t in (2.0, 3.0):
        beat(s, t)
        s.step(t)
    beat(s, 4.0, ["chief:0", "worker:0"])  # ps:0 froze after t=3
    s.step(5.9)
    assert s.outcome is None
    beat(s, 6.0, ["chief:0", "worker:0"])
    s.step(6.1)
    assert isinstance(s.outcome, NodeError) and s.outcome.node == "ps:0"
    assert "sent no heartbeat for 3.1s" in str(s.outcome)


def test_a_finished_node_waiting_for_stop_is_watched_too():
    s = job(num=2, heartbeat_timeout=3.0)
    start(s)
    s.apply("chief:0", NODE, messages.done(1), 1.5)
    beat(s, 2.0, ["worker:0"])
    s.step(4.5)
    assert isinstance(s.outcome, NodeError) and s.outcome.node == "chief:0"


def test_progress_timeout_counts_from_the_start_of_main_fn():
    s = job(num=2, progress_timeout=5.0, heartbeat_timeout=None)
    # still starting (no hello yet): the reservation timeout's business, not progress
    s.step(30.0)
    assert s.outcome is None
    start(s, now=30.0)
    s.apply("chief:0", NODE, messages.make("heartbeat", step=1, rows=None), 31.0)
    s.step(34.9)
    assert s.outcome is None
    s.apply("chief:0", NODE, messages.make("heartbeat", step=2, rows=None), 35.0)
    s.step(35.2)
    # worker:0 hangs before its first report: it is caught 5 s after its main_fn started
    assert isinstance(s.outcome, NodeError) and s.outcome.node == "worker:0"
    assert "no progress reported since its main_fn started" in str(s.outcome)


def test_progress_timeout_spares_parameter_servers_and_serving_nodes():
    s = job(num=3, num_ps=1, progress_timeout=2.0, heartbeat_timeout=None)
    start(s)
    s.apply("ps:0", NODE, messages.make("state", state="serving"), 1.0)
    s.apply("worker:0", NODE, messages.make("state", state="serving"), 1.0)
    for t in range(2, 10):
        s.apply("chief:0", NODE, messages.make("heartbeat", step=t, rows=None), t)
        s.step(t + 0.1)
    assert s.outcome is None


def test_every_attempt_has_a_reservation_timeout():
    s = job(num=2, reservation_timeout=10.0)
    s.launched_at = 100.0  # a restarted attempt, launched later
    start(s, now=101.0, names=["chief:0"])
    s.step(109.0)
    assert s.outcome is None
    s.step(110.5)
    assert isinstance(s.outcome, ClusterTimeoutError)
    assert "['worker:0'] did not start within reservation_timeout=10s" in str(s.outcome)


def rendezvous(state, hosts, now):
    """Each barrier task of ``hosts`` ({node: host}) says hello and sends its port."""
    out = []
    for name, host in hosts.items():
        state.apply(name, TASK, messages.hello(TASK, name, host), now)
        out += state.apply(name, TASK, messages.make("address", port=4000), now)
    return out


def test_a_node_silent_after_the_rendezvous_is_a_lost_host_and_may_restart():
    """Issue 47: chief:0's task sent its address and was sent everyone's, then its host was
    partitioned: its node never says hello. The reservation timeout names the node and its
    host as lost after the rendezvous, and allows a restart (max_restarts); a node whose task
    never reached the driver (slots held elsewhere, too few executors) does not."""
    s = job(num=2, reservation_timeout=10.0)
    assert sent(rendezvous(s, {"chief:0": "10.0.0.11", "worker:0": "10.0.0.12"}, 0.5), "addresses")
    start(s, now=1.0, names=["worker:0"])
    s.step(11.0)
    err = s.outcome
    assert isinstance(err, ReservationTimeoutError) and err.restartable
    text = str(err)
    assert "chief:0" in text and "10.0.0.11" in text and "worker:0" not in text, text
    assert "after the rendezvous" in text and "network partition" in text, text
    assert restartable(err)

    slow = job(num=2, reservation_timeout=10.0)  # its supervisor heard: a slow start
    rendezvous(slow, {"chief:0": "10.0.0.11", "worker:0": "10.0.0.12"}, 0.5)
    slow.apply("chief:0", SUPERVISOR, messages.hello(SUPERVISOR, "chief:0", "10.0.0.11"), 0.6)
    start(slow, now=1.0, names=["worker:0"])
    slow.step(11.0)
    assert isinstance(slow.outcome, ReservationTimeoutError) and not slow.outcome.restartable

    never = job(num=2, reservation_timeout=10.0)
    rendezvous(never, {"worker:0": "10.0.0.12"}, 0.5)  # chief:0's task never came
    never.step(11.0)
    assert isinstance(never.outcome, ReservationTimeoutError)
    assert not never.outcome.restartable and not restartable(never.outcome)


def test_an_error_waits_for_its_exit_or_the_settle_time_then_fails():
    s = job(num=2)
    start(s)
    err = messages.make(
        "error", where="main_fn", exc_type="ValueError", message="bad", traceback=""
    )
    s.apply("worker:0", NODE, err, 2.0)
    s.step(2.5)
    assert s.outcome is None  # its last output lines are on their way
    s.step(5.1)
    assert isinstance(s.outcome, NodeError)
    assert s.outcome.exc_type == "ValueError" and s.outcome.exc_message == "bad"


def test_a_barrier_task_failure_is_typed_and_names_the_node():
    s = job(num=2)
    s.apply("worker:0", messages.TASK, messages.hello(messages.TASK, "worker:0", "h7"), 0.5)
    s.apply("worker:0", messages.TASK, messages.error("task", OSError("no port")), 0.5)
    s.step(3.6)
    assert isinstance(s.outcome, NodeError) and s.outcome.node == "worker:0"
    assert s.outcome.host == "h7" and "Spark barrier task failed" in str(s.outcome)
    assert s.outcome.exc_type == "OSError"


def test_a_barrier_task_failure_leads_with_the_tasks_own_error():
    """The task's error (ArrowInvalid while reading main_fn's outputs, say) is not in the TF
    process's output: the error's first line carries it, ahead of that output."""
    s = job(num=2)
    line = messages.make("log", stream="stderr", line="main_fn's own line")
    s.apply("worker:0", messages.SUPERVISOR, line, 0.4)
    s.apply("worker:0", messages.TASK, messages.hello(messages.TASK, "worker:0", "h7"), 0.5)
    s.apply("worker:0", messages.TASK, messages.error("task", OSError("no port")), 0.5)
    s.step(3.6)
    first, *rest = str(s.outcome).splitlines()
    assert first.endswith("failed: its Spark barrier task failed, not main_fn: OSError: no port")
    assert not any("OSError" in line for line in rest)  # said once


def test_the_first_node_to_fail_is_blamed_and_the_others_listed():
    s = job(num=3)
    start(s)
    s.apply("worker:1", SUPERVISOR, messages.make("exit", code=-9, aborted=False, tail=[]), 2.0)
    s.apply("chief:0", SUPERVISOR, {"type": "closed"}, 2.5)
    s.step(2.6)
    assert s.outcome.node == "worker:1" and "SIGKILL" in str(s.outcome)
    assert s.outcome.others == ["chief:0"]


def test_a_failed_spark_job_waits_for_the_nodes_own_reports():
    s = job(num=2)
    start(s)
    s.job_ended("org.apache.spark.SparkException: Job aborted", 2.0)
    s.step(2.5)
    assert s.outcome is None
    s.step(5.1)
    assert isinstance(s.outcome, SparkJobError) and "Job aborted" in str(s.outcome)


def by_node(sends):
    """Each node's message, by name."""
    assert all(len(x.to) == 1 for x in sends)
    return {x.to[0]: x.message for x in sends}


def test_feed_bound_is_the_fewest_rows_and_final_once_known():
    """Every training node hears the bound (the fewest rows any node reported), and until
    it is final, the fewest rows any *other* node reported: with its own count, fresh, that is
    how far it may go without waiting for its own report to come back."""
    s = job(num=2)
    start(s)
    a = s.apply("chief:0", NODE, messages.make("feed_progress", received=10, ended=False), 1.0)
    # worker:0 has reported nothing yet: nobody may hand out a row
    assert by_node(a) == {
        "chief:0": messages.make("feed_bound", bound=0, final=False, others=0),
        "worker:0": messages.make("feed_bound", bound=0, final=False, others=10),
    }
    # the worker's report moves the bound, but what the worker decides by (its others: the
    # chief's 10) does not change: the chief alone hears it
    b = s.apply("worker:0", NODE, messages.make("feed_progress", received=6, ended=False), 1.0)
    assert by_node(b) == {"chief:0": messages.make("feed_bound", bound=6, final=False, others=6)}
    # the chief's own count changes only what the worker may take: the worker alone hears it
    c = s.apply("chief:0", NODE, messages.make("feed_progress", received=12, ended=False), 1.0)
    assert by_node(c) == {"worker:0": messages.make("feed_bound", bound=6, final=False, others=12)}
    d = s.apply("worker:0", NODE, messages.make("feed_progress", received=8, ended=True), 1.0)
    assert by_node(d) == {
        name: messages.make("feed_bound", bound=8, final=True, ended=True)
        for name in ("chief:0", "worker:0")
    }


def test_a_single_training_node_hears_every_move_of_the_bound():
    """With no other node there is no others count: the bound's value is what the node goes
    by (equalize=True on one node), so every move of it is sent."""
    s = job(num=1)
    start(s)
    for received in (5, 9):
        sent = s.apply(
            "chief:0", NODE, messages.make("feed_progress", received=received, ended=False), 1.0
        )
        assert by_node(sent) == {
            "chief:0": messages.make("feed_bound", bound=received, final=False)
        }


def progress(s, name, received, ended, **extra):
    return s.apply(
        name, NODE, messages.make("feed_progress", received=received, ended=ended, **extra), 1.0
    )


def test_shares_fed_as_they_are_wait_for_every_end_then_move_only_the_surplus():
    s = job(num=3)
    start(s)
    progress(s, "chief:0", 0, False, exchange="h:1")
    progress(s, "worker:0", 0, False, exchange="h:2")
    progress(s, "worker:1", 0, False, exchange="h:3")
    a = progress(s, "worker:1", 10, True)  # the smallest share ends: not final yet
    assert by_node(a) == {
        "chief:0": messages.make("feed_bound", bound=0, final=False, ended=True, others=0),
        "worker:0": messages.make("feed_bound", bound=0, final=False, ended=True, others=0),
        "worker:1": messages.make("feed_bound", bound=0, final=False, ended=True, others=0),
    }
    progress(s, "chief:0", 50, False)
    assert progress(s, "worker:0", 40, True)[0].message["final"] is False
    final = {x.to: x.message for x in progress(s, "chief:0", 70, True)}
    # 120 rows: 40 each; the chief gives its last 30 to worker:1, which had 10
    assert final == {
        ("chief:0",): messages.make(
            "feed_bound", bound=40, final=True, ended=True, give=[["worker:1", "h:3", 30]]
        ),
        ("worker:0",): messages.make("feed_bound", bound=40, final=True, ended=True),
        ("worker:1",): messages.make(
            "feed_bound", bound=40, final=True, ended=True, take=[["chief:0", 30]]
        ),
    }
    assert s.rows_moved == 30
    assert progress(s, "chief:0", 70, True) == []  # final sticks
    # a node connecting again is told its part of the plan
    again = s.apply("worker:1", NODE, messages.hello(NODE, "worker:1", "h"), 2.0)
    assert again[0].message["take"] == [["chief:0", 30]]


def test_nodes_waiting_for_a_share_still_flowing_hear_that_rows_flow():
    """feed_timeout is an idle timeout: two small shares have ended and wait for a large one
    still read; the bound they go by does not move, yet each hears (at most every FLOW_EVERY
    seconds) that rows still flow, so neither times out while the large share is read."""
    from sparktf.driver.job.feedbound import FLOW_EVERY

    s = job(num=3)
    start(s)
    progress(s, "chief:0", 5, True, exchange="h:1")
    progress(s, "worker:0", 5, True, exchange="h:2")
    progress(s, "worker:1", 100, False, exchange="h:3")
    heard = []
    for i in range(1, 9):
        now = 1.0 + i * FLOW_EVERY / 2
        sends = s.apply(
            "worker:1", NODE, messages.make("feed_progress", received=100 + i, ended=False), now
        )
        heard.append(sorted(n for x in sends for n in x.to))
    waiting = [h for h in heard if "chief:0" in h and "worker:0" in h]
    assert 3 <= len(waiting) <= 5, heard  # every other report: not on each one
    # a report that brings no new rows is not flow
    again = s.apply(
        "worker:1", NODE, messages.make("feed_progress", received=108, ended=False), 100.0
    )
    assert again == []


def test_nearly_equal_shares_or_a_share_stopped_early_move_nothing():
    s = job(num=2)
    start(s)
    progress(s, "chief:0", 500, True, exchange="h:1")
    final = progress(s, "worker:0", 501, True, exchange="h:2")
    assert by_node(final) == {
        name: messages.make("feed_bound", bound=500, final=True, ended=True)
        for name in ("chief:0", "worker:0")
    }
    s = job(num=2)
    start(s)
    progress(s, "chief:0", 0, False, exchange="h:1")
    progress(s, "worker:0", 3, True, exchange="h:2", stopped=True)  # terminate()
    final = progress(s, "chief:0", 900, False)
    assert by_node(final) == {
        name: messages.make("feed_bound", bound=3, final=True, ended=True)
        for name in ("chief:0", "worker:0")
    }


def test_the_rendezvous_answers_every_task_once_every_address_is_in():
    s = job(num=3, num_ps=1)
    hosts = {"chief:0": "a", "worker:0": "b", "ps:0": "::1"}
    replies = []
    for port, name in enumerate(["ps:0", "chief:0", "worker:0"], start=1):  # any order
        assert not replies
        s.apply(name, TASK, messages.hello(TASK, name, hosts[name]), 0.5)
        replies = s.apply(name, TASK, messages.make("address", port=port), 0.5)
    (reply,) = replies
    assert reply.channel == TASK and set(reply.to) == set(hosts)
    assert reply.message == {"type": "addresses", "addresses": ["a:2", "b:3", "[::1]:1"]}
    # Sent once; an address from anything but a task is ignored.
    assert s.apply("chief:0", TASK, messages.make("address", port=9), 0.6) == []
    t = job(num=2)
    assert t.apply("chief:0", NODE, messages.make("address", port=1), 0.5) == []
    assert t.nodes["chief:0"].address is None


def _error(exc_type, message, where="main_fn"):
    return messages.make("error", where=where, exc_type=exc_type, message=message, traceback="")


def test_a_broken_pipe_waits_for_its_cause_from_the_other_side():
    """The node's send broke because its barrier task failed: the task's report, arriving
    after the node's own error and exit, is what the job fails with."""
    s = job(num=2)
    start(s)
    s.apply("chief:0", NODE, _error("BrokenPipeError", "[Errno 32] Broken pipe"), 2.0)
    s.apply("chief:0", SUPERVISOR, messages.make("exit", code=1, aborted=False, tail=[]), 2.1)
    assert s.failure(2.2) is None  # not yet: the cause may be on its way
    s.apply(
        "chief:0",
        TASK,
        _error("TaskFeedError", "cannot be read in the Spark task", where="feed"),
        2.5,
    )
    err = s.failure(2.6)
    assert isinstance(err, NodeError) and "cannot be read in the Spark task" in str(err)


def test_a_broken_pipe_alone_fails_the_job_after_the_settle():
    s = job(num=2)
    start(s)
    s.apply("chief:0", NODE, _error("BrokenPipeError", "[Errno 32] Broken pipe"), 2.0)
    s.apply("chief:0", SUPERVISOR, messages.make("exit", code=1, aborted=False, tail=[]), 2.1)
    assert s.failure(4.0) is None
    err = s.failure(5.1)
    assert isinstance(err, NodeError) and "BrokenPipeError" in str(err)


def test_an_error_report_behind_the_exit_report_is_what_the_job_fails_with():
    """The supervisor reports the TF process's exit (code 1) on its own channel, which can
    reach the driver before the node's error report on the node's: the job waits for the
    node's channel to end (everything it sent applied) before it says why the node failed."""
    s = job(num=2)
    start(s)
    s.apply("worker:0", SUPERVISOR, messages.make("exit", code=1, aborted=False, tail=[]), 2.0)
    assert s.failure(2.1) is None
    s.apply(
        "worker:0",
        NODE,
        messages.make(
            "error", where="exit", exc_type="SystemExit", message="3", traceback="", code="3"
        ),
        2.2,
    )
    s.apply("worker:0", NODE, {"type": "closed"}, 2.2)
    err = s.failure(2.3)
    assert isinstance(err, NodeError) and err.node == "worker:0"
    assert err.exc_type == "SystemExit" and "main_fn called sys.exit(3)" in str(err)


@pytest.mark.parametrize("closed_at, failed_at", [(2.1, 2.1), (None, 5.0)])
def test_an_exit_with_an_error_code_and_no_report_fails_once_its_channel_ends(closed_at, failed_at):
    """os._exit(3): no report comes; the node's channel closes with its process (or, lost,
    the settle time passes) and the exit code is the reason."""
    s = job(num=2)
    start(s)
    s.apply("worker:0", SUPERVISOR, messages.make("exit", code=3, aborted=False, tail=[]), 2.0)
    assert s.failure(failed_at - 0.05) is None
    if closed_at is not None:
        s.apply("worker:0", NODE, {"type": "closed"}, closed_at)
    err = s.failure(failed_at + 0.05)
    assert isinstance(err, NodeError) and "exited with code 3" in str(err)


def test_a_node_killed_by_a_signal_fails_at_once():
    s = job(num=2)
    start(s)
    s.apply("worker:0", SUPERVISOR, messages.make("exit", code=-9, aborted=False, tail=[]), 2.0)
    err = s.failure(2.0)
    assert isinstance(err, NodeError) and "SIGKILL" in str(err)


def test_a_real_error_is_not_replaced_by_the_broken_connection_it_caused():
    s = job(num=2)
    start(s)
    s.apply("chief:0", NODE, _error("ValueError", "bad input in main_fn"), 2.0)
    s.apply("chief:0", TASK, _error("BrokenPipeError", "[Errno 32] Broken pipe", where="feed"), 2.1)
    s.apply("chief:0", SUPERVISOR, messages.make("exit", code=1, aborted=False, tail=[]), 2.2)
    err = s.failure(2.3)
    assert isinstance(err, NodeError) and "bad input in main_fn" in str(err)


@pytest.mark.parametrize("order", ["done first", "progress first"])
def test_a_trainer_that_returns_without_reading_its_feed_fails_instead_of_a_long_wait(order):
    s = job(num=2)
    start(s)
    events = [
        ("worker:0", messages.done(None)),
        ("chief:0", messages.make("feed_progress", received=10, ended=False)),
    ]
    for name, msg in events if order == "done first" else events[::-1]:
        s.apply(name, NODE, msg, 1.0)
    s.step(1.0 + s.limits.error_settle + 0.1)
    assert isinstance(s.outcome, NodeError) and s.outcome.node == "worker:0"
    assert "without reading its data feed" in str(s.outcome)
    assert "chief:0" in str(s.outcome) and "equalize=False" in str(s.outcome)


def test_trainers_that_all_ignore_the_feed_or_all_read_it_are_no_failure():
    s = job(num=2)
    start(s)
    for name in ("chief:0", "worker:0"):
        s.apply(name, NODE, messages.done(None), 1.0)
    s.step(5.0)
    assert s.outcome is None
    s = job(num=2)
    start(s)
    for name in ("chief:0", "worker:0"):
        s.apply(name, NODE, messages.make("feed_progress", received=5, ended=True), 1.0)
    s.apply("worker:0", NODE, messages.done(None), 1.0)
    s.step(5.0)
    assert s.outcome is None


@pytest.mark.parametrize(
    "spark_says",
    [
        "An error occurred while calling o97.collectAndServe.\n: org.apache.spark.SparkException: "
        "[SPARK_JOB_CANCELLED] Job 4 cancelled part of cancelled job group cell-7 SQLSTATE: XXKDA",
        ": org.apache.spark.SparkException: Job 0 cancelled as part of cancellation of all jobs",
    ],
)
def test_a_spark_job_cancelled_by_someone_else_says_it_was_cancelled(spark_says):
    from sparktf.driver.sparkjobs import spark_error_text

    s = job(num=2)
    start(s)
    s.job_ended(spark_error_text(Exception(spark_says)), 2.0)
    s.step(5.1)
    text = str(s.outcome)
    assert isinstance(s.outcome, SparkJobError)
    assert text.startswith(
        "the Spark job holding the TensorFlow nodes was cancelled "
        "(cancelJobGroup, cancelJobsWithTag, cancelAllJobs or the Spark UI's "
        "kill); every node was stopped:"
    ), text
    assert "cancelled part of cancelled job group cell-7" in text or "cancellation of all" in text
    assert "org.apache" not in text and "SQLSTATE" not in text and "\n  :" not in text


def test_a_connect_client_interrupting_its_operations_is_a_cancel_not_a_lost_node():
    """Over Spark Connect, ``spark.interruptAll()`` (a notebook's cancel) kills the tasks: the
    supervisors' channels end without an exit report (the nodes look lost) and the client's
    operation fails with OPERATION_CANCELED. That is the user's cancel: a SparkJobError that
    says so (no restart), not a lost node (which max_restarts would restart)."""
    from sparktf.driver.sparkjobs import spark_error_text

    s = job(num=2)
    start(s)
    s.apply("worker:0", SUPERVISOR, {"type": "closed"}, 2.0)
    s.step(2.5)
    assert s.outcome is None  # a lost node waits for what Spark says of the job
    connect_says = (
        "(org.apache.spark.SparkSQLException) [OPERATION_CANCELED] Operation has been "
        "canceled. SQLSTATE: HY008\n  org.apache.spark.SparkSQLException"
    )
    s.job_ended(spark_error_text(Exception(connect_says)), 2.7)
    s.step(3.0)
    assert isinstance(s.outcome, SparkJobError) and s.outcome.cancelled, s.outcome
    text = str(s.outcome)
    assert "cancelled" in text and "interrupt" in text, text
    assert "org.apache" not in text and "SQLSTATE" not in text
    assert not restartable(s.outcome)


def test_a_spark_job_failure_reads_without_py4js_leading_colon():
    from sparktf.driver.sparkjobs import spark_error_text

    text = spark_error_text(
        Exception(
            "An error occurred while calling o97.collectAndServe.\n: org.apache.spark.SparkException:"
            " Job aborted due to stage failure: Task 1 in stage 3.0 failed 1 times\n\tat org.apache"
            ".spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)"
        )
    )
    assert text == (
        "org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 "
        "in stage 3.0 failed 1 times"
    ), text


def test_executors_without_sparktf_are_told_how_to_ship_it():
    """What Spark said on YARN when the containers' Python lacked sparktf (seen here: a
    driver's editable install that the executors could not import)."""
    from sparktf.driver.sparkjobs import spark_error_text

    text = spark_error_text(
        Exception(
            "org.apache.spark.SparkException: Job aborted due to stage failure: Could not "
            "recover from a failed barrier ResultStage.\n"
            "org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was "
            "thrown from the Python worker: Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/pyspark/serializers.py", line 473, in loads\n'
            "ModuleNotFoundError: No module named 'sparktf'"
        )
    )
    assert "ModuleNotFoundError: No module named 'sparktf'" in text
    assert "sparktf is not installed in the executors' Python" in text
    assert "spark.archives" in text and "PYSPARK_PYTHON" in text


def test_an_exit_reported_before_the_nodes_own_connection_waits_for_its_report():
    """A main_fn that raises at once: its supervisor's exit can reach the driver before the
    TF process's own connection (hello, then the error) is read; the error, not the bare exit
    code, is the reason. A node that never connects fails with the code after the settle."""
    s = job(num=2)
    for name in s.nodes:
        s.apply(name, SUPERVISOR, messages.hello(SUPERVISOR, name, "h"), 1.0)
    s.apply("chief:0", NODE, messages.hello(NODE, "chief:0", "h"), 1.0)
    s.apply(
        "worker:0", SUPERVISOR, messages.make("exit", code=1, aborted=False, tail=["boom"]), 1.1
    )
    s.step(1.12)
    assert s.outcome is None
    s.apply("worker:0", NODE, messages.hello(NODE, "worker:0", "h"), 1.15)
    s.apply("worker:0", NODE, _error("ConfigError", "batch_size must be a positive int"), 1.15)
    s.step(1.2)
    assert isinstance(s.outcome, NodeError) and s.outcome.exc_type == "ConfigError", s.outcome
    assert "main_fn raised" in str(s.outcome)

    s = job(num=2)
    for name in s.nodes:
        s.apply(name, SUPERVISOR, messages.hello(SUPERVISOR, name, "h"), 1.0)
    s.apply("worker:0", SUPERVISOR, messages.make("exit", code=1, aborted=False, tail=[]), 1.1)
    s.step(2.0)
    assert s.outcome is None
    s.step(4.2)
    assert "worker:0" in str(s.outcome) and "exited with code 1" in str(s.outcome)


# ------------------------------------------------ a collective peer waiting for one that returned
MWMS = "MultiWorkerMirroredStrategy"


def mwms_beats(state, name, start, end, cpu_per_s, collective=MWMS):
    """Heartbeats every second from ``start`` to ``end`` (inclusive) with the process's CPU
    seconds growing at ``cpu_per_s``."""
    for t in range(int(start), int(end) + 1):
        state.apply(
            name,
            NODE,
            messages.make(
                "heartbeat", step=None, rows=None, cpu=cpu_per_s * t, collective=collective
            ),
            float(t),
        )


def test_a_collective_chief_idle_after_a_worker_returned_is_named_with_what_to_change():
    """MultiWorkerMirroredStrategy: a worker that took fewer steps returns, and the chief waits
    in an all-reduce for it for ever (its process stays up after main_fn returns, as every
    node's does). The driver cannot tell that wait from work for sure, so it does not fail the
    job, but it says so once the chief has been idle for IDLE_SECS after the return."""
    from sparktf.driver.job.liveness import IDLE_SECS

    s = job(num=2)
    start(s)
    mwms_beats(s, "chief:0", 1, 10, cpu_per_s=0.9)
    mwms_beats(s, "worker:0", 1, 10, cpu_per_s=0.9)
    s.apply("worker:0", NODE, messages.done(None), 10.0)
    # the chief, blocked: its CPU barely moves (the worker, done, beats on until 'stop')
    for t in range(11, 10 + int(IDLE_SECS)):
        s.apply(
            "chief:0",
            NODE,
            messages.make("heartbeat", step=None, rows=None, cpu=9.0 + 0.001 * t, collective=MWMS),
            float(t),
        )
        beat(s, float(t), ["worker:0"])
        s.step(float(t))
    assert not s.take_notes()  # not idle for IDLE_SECS yet
    t = 10 + IDLE_SECS
    s.apply(
        "chief:0",
        NODE,
        messages.make("heartbeat", step=None, rows=None, cpu=9.0 + 0.001 * t, collective=MWMS),
        t,
    )
    beat(s, t, ["worker:0"])
    s.step(t)
    notes = s.take_notes()
    assert len(notes) == 1
    assert "chief:0" in notes[0] and "worker:0" in notes[0]
    assert "same number of steps" in notes[0] and "collectiveIdleTimeout" in notes[0]
    assert "Under MultiWorkerMirroredStrategy" in notes[0]
    beat(s, t + 5)
    s.step(t + 5)
    assert not s.take_notes()  # once
    assert s.status is Status.RUNNING  # a warning, not a failure


@pytest.mark.parametrize("limit", [60.0, None])
def test_a_collective_node_idle_for_collective_idle_timeout_fails_the_job(limit):
    """The warning first; then, idle for collective_idle_timeout after the peer returned, the
    job fails naming the node and what to change (None: only the warning, for ever)."""
    from sparktf.driver.job.liveness import IDLE_SECS

    s = job(num=2, collective_idle_timeout=limit)
    start(s)
    mwms_beats(s, "chief:0", 1, 10, cpu_per_s=0.9)
    mwms_beats(s, "worker:0", 1, 10, cpu_per_s=0.9)
    s.apply("worker:0", NODE, messages.done(None), 10.0)
    failed_at = None
    for t in range(11, 200):
        s.apply(
            "chief:0",
            NODE,
            messages.make("heartbeat", step=None, rows=None, cpu=9.0 + 0.001 * t, collective=MWMS),
            float(t),
        )
        beat(s, float(t), ["worker:0"])
        s.step(float(t))
        if s.status is Status.FAILED:
            failed_at = t
            break
    assert len(s.take_notes()) == 1
    if limit is None:
        assert failed_at is None
        return
    assert failed_at == 10 + limit + 1 and IDLE_SECS < limit
    error = s.outcome
    assert isinstance(error, NodeError) and error.node == "chief:0"
    assert "collective_idle_timeout" in str(error) and "same number of steps" in str(error)


@pytest.mark.parametrize("case", ["busy", "not collective", "nobody returned"])
def test_a_chief_still_working_or_not_collective_is_not_named(case):
    from sparktf.driver.job.liveness import IDLE_SECS

    s = job(num=2)
    start(s)
    end = 12 + 2 * IDLE_SECS
    collective = MWMS if case != "not collective" else None
    if case != "nobody returned":
        s.apply("worker:0", NODE, messages.done(None), 10.0)
    else:
        mwms_beats(s, "worker:0", 1, end, cpu_per_s=0.001, collective=MWMS)
    # busy: exporting a model after training, CPU moving; otherwise idle
    rate = 0.8 if case == "busy" else 0.001
    for t in range(1, int(end) + 1):
        s.apply(
            "chief:0",
            NODE,
            messages.make("heartbeat", step=None, rows=None, cpu=rate * t, collective=collective),
            float(t),
        )
        if case != "nobody returned":
            beat(s, float(t), ["worker:0"])
        s.step(float(t))
    assert not s.take_notes()
    assert s.status is Status.RUNNING


def test_a_result_the_driver_cannot_unpickle_fails_the_node_naming_its_type():
    """The value is pickled on the node: one of a class only the executors have fails the
    node (a TypeError at 'result' naming the type), not the control channel."""
    s = job(num=1)
    start(s)
    done = messages.done(1.5)
    done["value"], done["value_type"] = b"\x80\x05cno_such_module\nThing\n.", "x.Thing"
    assert s.apply("chief:0", NODE, done, 2.0) == []
    error = s.failure(2.0 + s.limits.error_settle)
    assert isinstance(error, NodeError) and "x.Thing" in str(error)
    assert "cannot be unpickled on the driver" in str(error)


def test_a_driver_paused_longer_than_heartbeat_timeout_does_not_kill_live_nodes():
    """Ctrl-Z then fg, a VM pause, a long GIL hold: the monitor's first step after it must not
    declare nodes dead whose heartbeats wait unread in the driver's sockets; silence counts
    from the resume, so a node that really went silent still fails heartbeat_timeout later."""
    s = job(num=2, heartbeat_timeout=5, paused_after=2.0)
    start(s)
    for t in range(2, 6):
        beat(s, float(t))
        s.step(float(t))
    s.step(60.0)  # the driver ran again after 55 s: nothing was read yet
    assert s.status is not Status.FAILED
    beat(s, 60.2, ["chief:0"])  # the buffered heartbeats come in; worker:0's never does
    for t in (61.0, 63.0, 64.0):
        beat(s, t, ["chief:0"])
        s.step(t)
    assert s.status is not Status.FAILED
    beat(s, 65.5, ["chief:0"])
    s.step(65.5)
    assert s.status is Status.FAILED and s.outcome.node == "worker:0"


YARN_KILL = (
    "org.apache.spark.SparkException: Job aborted due to stage failure: Could not "
    "recover from a failed barrier ResultStage. Most recent failure reason: Stage "
    "failed because barrier task ResultTask(1, 1) finished unsuccessfully.\n  "
    "ExecutorLostFailure (executor 2 exited caused by one of the running tasks) "
    "Reason: Container killed by YARN for exceeding physical memory limits. 2.7 GB of "
    "2.5 GB physical memory used. Consider boosting spark.executor.memoryOverhead."
)


def test_a_node_lost_with_its_executor_says_why_spark_lost_it():
    """YARN kills a container for memory: the node's supervisor goes (lost), then the Spark
    job fails with the executor's loss reason; the NodeError carries that reason."""
    s = job(num=2)
    start(s)
    s.apply("worker:0", SUPERVISOR, {"type": "closed"}, 5.0)
    s.step(5.5)
    assert s.outcome is None  # the job's own error may say why: it comes at once
    s.job_ended(YARN_KILL, 5.8)
    s.step(5.9)
    error = s.outcome
    assert isinstance(error, NodeError) and error.node == "worker:0"
    assert "lost with its executor: Container killed by YARN for exceeding physical memory" in str(
        error
    )
    assert "spark.executor.memoryOverhead" in str(error)


def test_a_node_lost_without_a_reason_from_spark_still_fails_after_the_settle():
    s = job(num=2)
    start(s)
    s.apply("worker:0", SUPERVISOR, {"type": "closed"}, 5.0)
    s.step(5.0 + s.limits.error_settle + 0.1)
    assert isinstance(s.outcome, NodeError) and "lost contact with the node" in str(s.outcome)


def test_a_broken_feed_is_told_by_its_reason_field_and_waits_for_its_cause():
    """The node's feed from Spark broke because its barrier task failed: the node's report
    carries reason=FeedError.BROKEN (not words to match), and the task's own report is what
    the job fails with."""
    from sparktf.errors import FeedError

    s = job(num=2)
    start(s)
    broken = FeedError("the data feed from Spark broke: EOFError: ", reason=FeedError.BROKEN)
    s.apply("chief:0", NODE, messages.error("main_fn", broken), 2.0)
    assert s.failure(2.1) is None  # its cause may still be on its way
    s.apply("chief:0", TASK, _error("ValueError", "a bad row in partition 3", where="task"), 2.2)
    err = s.failure(2.0 + s.limits.error_settle)
    assert isinstance(err, NodeError) and "a bad row in partition 3" in str(err)


# -------------------------------------------- a host out of reach: teardown does not wait
def test_a_node_and_its_supervisor_silent_past_heartbeat_timeout_are_out_of_reach():
    s = job(heartbeat_timeout=10)
    start(s, now=1.0)
    beat(s, 5.0)
    beat(s, 14.0, names=["chief:0", "worker:0"])  # worker:1's host partitioned after 5 s
    assert s.out_of_reach(14.0) == []
    assert s.out_of_reach(15.5) == ["worker:1"]
    # its supervisor's output still arriving: the host answers, the node is only frozen
    s.apply("worker:1", SUPERVISOR, messages.make("log", stream="stdout", line="x"), 15.0)
    assert s.out_of_reach(15.5) == []


def test_an_exit_report_or_a_node_never_started_is_not_out_of_reach():
    s = job(heartbeat_timeout=10)
    start(s, now=1.0, names=["chief:0", "worker:0"])
    for name in ("worker:1",):  # its TF process still importing TensorFlow: no heartbeat yet
        s.apply(name, SUPERVISOR, messages.hello(SUPERVISOR, name, "h"), 1.0)
    finish(s, "chief:0", 2.0)
    assert s.out_of_reach(60.0) == ["worker:0"]


def test_a_supervisor_channel_ended_without_an_exit_report_is_out_of_reach_at_once():
    s = job(heartbeat_timeout=0)  # off: only the channel's end says so
    start(s, now=1.0)
    s.apply("worker:0", SUPERVISOR, {"type": "closed"}, 2.0)  # the driver's keepalive gave up
    assert s.out_of_reach(2.5) == ["worker:0"]


# ------------------------------- a peer TensorFlow calls dead, the driver still hears: a cut
UNHEALTHY = (
    "Collective ops is aborted by: Error reported from /job:worker/task:0: The following "
    "tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:0\nThe "
    "tasks have crashed. Check the task logs for an earlier error"
)


def test_a_peer_tensorflow_calls_crashed_but_the_driver_hears_is_named_as_cut_off():
    """Multihost: a chief and a worker whose hosts cannot reach each other, both reaching the
    driver; TensorFlow says the worker crashed. The error says it is alive: the network."""
    s = job(num=2)
    start(s)
    beat(s, 5.0)
    s.apply("chief:0", NODE, _error("UnavailableError", UNHEALTHY), 6.0)
    finish_code = messages.make("exit", code=1, aborted=False, tail=[])
    s.apply("chief:0", SUPERVISOR, finish_code, 6.1)
    err = s.failure(6.2)
    assert isinstance(err, NodeError) and err.node == "chief:0", err
    text = str(err)
    assert "worker:0 (on h), which the driver still heard" in text, text
    assert "network partition or a firewall" in text and "not a crash" in text, text


def test_a_peer_that_exited_or_went_quiet_is_not_called_alive():
    s = job(num=2)
    start(s)
    beat(s, 1.5)  # worker:0 silent since 1.5 s: it may well have crashed
    beat(s, 9.0, names=["chief:0"])
    s.apply("chief:0", NODE, _error("UnavailableError", UNHEALTHY), 10.0)
    s.apply("chief:0", SUPERVISOR, messages.make("exit", code=1, aborted=False, tail=[]), 10.1)
    err = s.failure(10.2)
    assert isinstance(err, NodeError) and "still heard" not in str(err), err


def test_a_worker_whose_rpc_to_the_coordination_service_timed_out_names_the_chief():
    """The other side of the same cut: the worker's heartbeat to the coordination service
    (on the chief) timed out; TensorFlow names no task, the driver still hears the chief."""
    s = job(num=2)
    start(s)
    beat(s, 5.0)
    text = (
        "Collective ops is aborted by: Deadline Exceeded\nRPC: "
        "/tensorflow.CoordinationService/Heartbeat\nThe error could be from a previous operation"
    )
    s.apply("worker:0", NODE, _error("DeadlineExceededError", text), 6.0)
    s.apply("worker:0", SUPERVISOR, messages.make("exit", code=1, aborted=False, tail=[]), 6.1)
    err = s.failure(6.2)
    assert isinstance(err, NodeError) and err.node == "worker:0", err
    assert "TensorFlow on worker:0 lost chief:0 (on h), which the driver still heard" in str(err)
