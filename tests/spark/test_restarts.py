"""run(..., max_restarts=K): after a node dies the whole cluster is launched again, ctx.attempt
counts the launches, training resumes from the checkpoint, the feed starts over cleanly,
and nothing of the failed attempt is left running (the no_leaks fixture checks)."""

import pytest
from helpers import jobs

import sparktf

pytestmark = pytest.mark.usefixtures("no_leaks")


@pytest.mark.tf
def test_a_worker_killed_once_and_the_job_still_reaches_its_final_step(sc_local, tmp_path):
    cluster = sparktf.run(
        sc_local,
        jobs.checkpointed_steps,
        {"dir": str(tmp_path / "ckpt"), "steps": 60},
        num_executors=2,
        max_restarts=2,
    )
    chief = cluster.shutdown(timeout=300)
    assert cluster.attempt == 1
    assert chief["attempt"] == 1 and cluster.results["worker:0"]["attempt"] == 1
    assert 10 <= chief["resumed_from"] < 60  # from the checkpoint, not from zero
    assert chief["final_step"] == 60
    [failure] = cluster.failures
    assert isinstance(failure, sparktf.NodeError) and failure.node == "worker:0"
    assert "SIGKILL" in str(failure)


def test_spark_input_is_fed_again_from_the_start_after_a_restart(sc_local, capfd, caplog):
    caplog.set_level("INFO", logger="sparktf")
    data = sc_local.parallelize(range(1000), 4)
    cluster = sparktf.run(
        sc_local,
        jobs.sum_feed_dying_once,
        None,
        num_executors=2,
        input_mode=sparktf.InputMode.SPARK,
        max_restarts=1,
    )
    cluster.train(data, num_epochs=1, equalize=False)
    cluster.shutdown(timeout=120)
    assert cluster.attempt == 1 and len(cluster.failures) == 1
    results = cluster.results.values()
    assert all(r["attempt"] == 1 for r in results)
    assert sum(r["sum"] for r in results) == sum(range(1000))  # every row exactly once
    assert sum(r["rows"] for r in results) == 1000
    # The restart is told once on the console; its log record stays under WARNING, which
    # Python's last-resort handler would print a second time where no logging is configured.
    assert capfd.readouterr().err.count("restarting every node") == 1
    [record] = [r for r in caplog.records if "restarting every node" in r.getMessage()]
    assert record.levelname == "INFO"


def test_restarts_run_out_and_the_last_failure_is_raised(sc_local):
    cluster = sparktf.run(
        sc_local,
        jobs.raise_on,
        {"node": "worker:0", "message": "always", "delay": 1},
        num_executors=2,
        max_restarts=1,
    )
    with pytest.raises(sparktf.NodeError, match="always") as err:
        cluster.shutdown(timeout=120)
    assert err.value.node == "worker:0"
    assert cluster.attempt == 1 and len(cluster.failures) == 1
    assert cluster.status is sparktf.Status.FAILED


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
def test_max_restarts_must_be_a_count(sc_local, value):
    with pytest.raises(sparktf.ConfigError, match="max_restarts must be an int >= 0"):
        sparktf.run(sc_local, jobs.describe, {}, num_executors=2, max_restarts=value)
