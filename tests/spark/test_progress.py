"""Progress on the driver, on a real local[4] Spark: ctx.report, rows fed per epoch, the
periodic lines when the console is not a terminal, the summary, cluster.progress(), off."""

import contextlib
import re

import pytest
from helpers import feed_jobs, jobs
from helpers.procs import TF_ENV

import sparktf

pytestmark = pytest.mark.usefixtures("no_leaks")


@contextlib.contextmanager
def conf(sc, **values):
    """spark.sparktf.* values on the running SparkContext for the block."""
    for key, value in values.items():
        sc._conf.set(f"spark.sparktf.{key}", value)
    try:
        yield
    finally:
        for key in values:
            sc._jsc.sc().conf().remove(f"spark.sparktf.{key}")


def test_reported_steps_and_metrics_reach_the_driver_as_lines_and_data(sc_local, capfd):
    with conf(sc_local, progressInterval="0.3"):
        cluster = sparktf.run(sc_local, jobs.reports, {"steps": 6}, num_executors=2)
        cluster.shutdown()
    progress = cluster.progress()
    assert set(progress) == {"chief:0", "worker:0"}
    for p in progress.values():
        assert p["step"] == 6 and p["metrics"] == {"loss": pytest.approx(1 / 6)}
        assert p["state"] in ("done", "exited") and p["seconds"] > 1.0
    out = capfd.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("[sparktf] progress: ")]
    assert lines, out  # periodic lines while it ran (this console is no terminal)
    assert any(re.search(r"chief:0: step [1-6], loss=", line) for line in lines)
    assert re.search(r"^\[sparktf\] chief:0 \w+ in [\d.]+s: step 6, loss=0\.1667$", out, re.M)
    assert re.search(r"^\[sparktf\] worker:0 \w+ in [\d.]+s: step 6, loss=0\.1667$", out, re.M)


def test_rows_fed_per_epoch_and_rate(sc_local, capfd):
    data = sc_local.parallelize(range(1, 2001), 2).cache()
    data.count()
    with conf(sc_local, progressInterval="0.3"):
        cluster = sparktf.run(
            sc_local,
            feed_jobs.sum_ids_reporting,
            None,
            num_executors=2,
            input_mode=sparktf.InputMode.SPARK,
        )
        cluster.train(data, num_epochs=2)
        cluster.shutdown(timeout=120)
    progress = cluster.progress()
    assert sum(p["rows"] for p in progress.values()) == 2 * 2000  # every row, both epochs
    for name, p in progress.items():
        assert p["epoch"] == 2 and p["step"] == cluster.results[name] == 20
        assert p["epoch_rows"] == 1000 and p["rows_per_s"] > 0  # its share, each epoch
    assert "rows/s" in capfd.readouterr().out
    data.unpersist()


def test_progress_off_shows_nothing_but_keeps_the_data(sc_local, capfd):
    cluster = sparktf.run(
        sc_local, jobs.reports, {"steps": 2, "pause": 0.6}, num_executors=1, progress=False
    )
    cluster.shutdown()
    assert cluster.progress()["chief:0"]["step"] == 2
    assert "[sparktf]" not in capfd.readouterr().out


def test_a_report_of_the_wrong_type_fails_the_node_with_a_clear_error(sc_local):
    cluster = sparktf.run(
        sc_local, jobs.reports, {"steps": 1, "pause": 0, "bad": True}, num_executors=1
    )
    with pytest.raises(sparktf.NodeError, match=r"ctx.report: step must be an int, got 'seven'"):
        cluster.shutdown()


@pytest.mark.tf
def test_a_custom_loop_reports_its_tensors_as_they_are(sc_local):
    """ctx.report(step=optimizer.iterations, loss=loss) as a TF2 custom loop writes it: an
    int64 variable and eager tensors are read as numbers (they failed the node as "step must be
    an int" before); a tensor of more than one value is a TypeError that says so."""
    cluster = sparktf.run(sc_local, jobs.reports_tensors, num_executors=1, env=TF_ENV)
    said = cluster.shutdown()
    chief = cluster.progress()["chief:0"]
    assert chief["step"] == 4
    assert chief["metrics"]["lr"] == pytest.approx(0.1)
    # w = 3.0 and SGD(0.1) on w*w: w is 0.8x per step, the last loss (3rd step) 1.92**2
    assert chief["metrics"]["loss"] == pytest.approx(1.92**2, rel=1e-5)
    assert chief["metrics"]["w"] == pytest.approx(3.0 * 0.8**3, rel=1e-5)
    assert "ctx.report: metric 'loss' must be a number or a scalar tensor/array" in said
    assert "shape (2,): one value only" in said


@pytest.mark.parametrize("value", ["yes", 0, -1])
def test_progress_settings_are_checked(sc_local, value):
    with pytest.raises(sparktf.ConfigError, match="progress must be True or False"):
        sparktf.run(sc_local, jobs.reports, progress=value)
