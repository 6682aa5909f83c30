"""Progress as the driver shows it: the state's snapshot and its lines, without Spark."""

import io

from sparktf.common import messages
from sparktf.common.topology import assign_roles
from sparktf.driver.job.state import JobState, Limits
from sparktf.driver.progress import Reporter, status_line, summary_lines


def _state():
    state = JobState(assign_roles(3, 1), Limits(), 0.0)
    for t, name in enumerate(("chief:0", "worker:0", "ps:0")):
        state.apply(
            name,
            messages.NODE,
            messages.hello(messages.NODE, name, "h", pid=1, port=1),
            1.0 + t * 0.0,
        )
    return state


def beat(state, node, now, **fields):
    state.apply(
        node,
        messages.NODE,
        messages.make(
            "heartbeat", step=fields.pop("step", None), rows=fields.pop("rows", None), **fields
        ),
        now,
    )


def test_snapshot_has_rows_per_epoch_rate_step_and_metrics():
    state = _state()
    beat(state, "chief:0", 2.0, rows=1000, epoch=0, epoch_rows=1000, step=10, metrics={"loss": 0.5})
    beat(state, "chief:0", 3.0, rows=3000, epoch=0, epoch_rows=3000, step=30, metrics={"loss": 0.4})
    beat(
        state,
        "chief:0",
        4.0,
        rows=4500,
        epoch=1,
        epoch_rows=500,
        step=45,
        metrics={"loss": 0.3, "accuracy": 0.9},
    )
    beat(
        state,
        "chief:0",
        5.0,
        rows=6000,
        epoch=1,
        epoch_rows=2000,
        step=60,
        metrics={"loss": 0.2, "accuracy": 0.95},
    )
    snap = state.progress_snapshot(6.0)
    chief = snap["chief:0"]
    assert chief["epoch"] == 2 and chief["step"] == 60 and chief["rows"] == 6000
    assert chief["epoch_rows"] == 2000  # as its feed counted them
    assert chief["rows_per_s"] == (6000 - 1000) / (5.0 - 2.0)  # first to last report of rows
    assert chief["metrics"] == {"loss": 0.2, "accuracy": 0.95}
    assert chief["state"] == "running" and chief["seconds"] == 5.0
    assert snap["ps:0"]["rows"] is None and snap["ps:0"]["metrics"] == {}


def test_a_feed_shorter_than_a_heartbeat_still_has_a_rate():
    """A node that fed its whole share between two heartbeats reports rows once: its rate
    is its feed's own (rows over the time from the first batch asked for to the last fed),
    which also wins over the heartbeats' when both are known."""
    state = _state()
    beat(state, "chief:0", 2.0, rows=2000, epoch=1, epoch_rows=1000, feed_secs=1.25)
    beat(state, "worker:0", 2.0, rows=2000, epoch=1, epoch_rows=1000)  # an older node
    snap = state.progress_snapshot(3.0)
    assert snap["chief:0"]["rows_per_s"] == 2000 / 1.25
    assert snap["worker:0"]["rows_per_s"] is None  # one report, no time of its own
    beat(state, "chief:0", 3.0, rows=4000, epoch=1, epoch_rows=2000, feed_secs=2.5)
    assert state.progress_snapshot(4.0)["chief:0"]["rows_per_s"] == 4000 / 2.5


def test_no_rate_is_shown_over_a_near_zero_interval():
    """256 rows handed out in 18 microseconds are not 14 million rows a second: no rate until
    the feed's time, or the heartbeats', spans a second."""
    state = _state()
    beat(state, "chief:0", 2.0, rows=256, epoch=0, epoch_rows=256, feed_secs=0.000018)
    beat(state, "worker:0", 2.0, rows=100, epoch=0, epoch_rows=100)
    beat(state, "worker:0", 2.5, rows=200, epoch=0, epoch_rows=200)  # half a second apart
    state.apply("chief:0", messages.NODE, messages.done(None), 3.0)
    snap = state.progress_snapshot(3.0)
    assert snap["chief:0"]["rows_per_s"] is None
    assert snap["worker:0"]["rows_per_s"] is None
    assert "rows/s" not in status_line(snap)
    assert not any("rows/s" in line for line in summary_lines(snap))
    beat(state, "worker:0", 3.0, rows=300, epoch=0, epoch_rows=300)  # a second: a rate
    assert state.progress_snapshot(3.0)["worker:0"]["rows_per_s"] == 200 / 1.0


def test_lines_show_only_nodes_that_report():
    state = _state()
    assert status_line(state.progress_snapshot(2.0)) is None  # nothing reported yet
    beat(
        state,
        "chief:0",
        2.0,
        rows=1200,
        epoch=0,
        epoch_rows=1200,
        step=20,
        metrics={"loss": 0.51234},
    )
    beat(state, "worker:0", 2.0, rows=1100, epoch=0, epoch_rows=1100, step=20)
    line = status_line(state.progress_snapshot(2.5))
    assert line.startswith("[sparktf] progress: chief:0: epoch 1, step 20, 1,200 rows")
    assert "loss=0.5123" in line and "| worker:0: epoch 1, step 20, 1,100 rows" in line
    assert "ps:0" not in line
    state.apply("chief:0", messages.NODE, messages.done(None), 3.0)
    lines = summary_lines(state.progress_snapshot(9.0))
    assert lines[0].startswith("[sparktf] chief:0 done in 2.0s: epoch 1, step 20, 1,200 rows")
    assert lines[1].startswith("[sparktf] worker:0 running in 8.0s:")
    assert len(lines) == 2


def test_reporter_writes_a_line_only_when_something_changed_and_a_summary_at_stop():
    state = _state()
    out = io.StringIO()
    reporter = Reporter(lambda: state.progress_snapshot(5.0), 60.0, out=out, bar=False)
    beat(state, "chief:0", 2.0, rows=100, step=1)
    reporter.show(state.progress_snapshot(2.0))
    reporter.show(state.progress_snapshot(2.0))
    beat(state, "chief:0", 3.0, rows=200, step=2)
    reporter.show(state.progress_snapshot(3.0))
    reporter.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert "step 1" in lines[0] and "step 2" in lines[1]
    assert lines[2].startswith("[sparktf] chief:0 running")


def test_reporter_bar_on_a_terminal_counts_rows():
    state = _state()
    reporter = Reporter(lambda: state.progress_snapshot(5.0), 60.0, out=io.StringIO(), bar=True)
    beat(state, "chief:0", 2.0, rows=100, step=1)
    beat(state, "worker:0", 2.0, rows=50, step=1)
    reporter.show(state.progress_snapshot(2.0))
    # (private: the progress bar the reporter drives; its count is what the user sees)
    assert reporter._bar.n == 150
    reporter.stop(summary=False)
