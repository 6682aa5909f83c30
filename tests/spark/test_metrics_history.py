"""cluster.metrics(): every ctx.report a node sent, as a series (step, time, values), and the
same as TensorBoard scalars the driver writes under log_dir, read back from the event files
with a TFRecord reader of the tests' own and tensorboard's protos (no TensorFlow in this
process). Real Spark (local[4]) and real node processes."""

import glob
import os
import subprocess
import sys
import textwrap
import time

import cloudpickle
import pytest
from helpers.events import read_scalars

import sparktf

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pytestmark = pytest.mark.usefixtures("no_leaks")


def report_steps(args, ctx):
    """Report ``args['steps']`` steps, over a few heartbeats."""
    for step in range(1, args["steps"] + 1):
        ctx.report(step=step, loss=1.0 / step, rank=float(ctx.task_index))
        time.sleep(0.05)
    return ctx.name


def test_metrics_are_a_series_and_tensorboard_scalars(sc_local, tmp_path):
    log_dir = str(tmp_path / "tb")
    # (an earlier test in this process may have imported TensorFlow; the subprocess test below
    # checks the writer on its own)
    had_tensorflow = "tensorflow" in sys.modules
    cluster = sparktf.run(sc_local, report_steps, {"steps": 40}, num_executors=2, log_dir=log_dir)
    cluster.shutdown(timeout=120)
    series = cluster.metrics()
    assert set(series) == {"chief:0", "worker:0"}
    for points in series.values():
        assert [p["step"] for p in points] == list(range(1, 41))
        assert [p["values"]["loss"] for p in points] == [1.0 / s for s in range(1, 41)]
        times = [p["time"] for p in points]
        assert times == sorted(times) and abs(times[-1] - time.time()) < 600
        assert {p["attempt"] for p in points} == {0}
    assert had_tensorflow or "tensorflow" not in sys.modules  # written without TensorFlow
    for run in ("chief-0", "worker-0"):
        files = glob.glob(os.path.join(log_dir, "sparktf", cluster.job_id, run, "events.*"))
        assert len(files) == 1, files
        scalars = read_scalars(files[0])
        loss = [(step, v) for step, tag, v in scalars if tag == "loss"]
        assert loss == [(s, pytest.approx(1.0 / s)) for s in range(1, 41)]


def test_the_scalars_writer_imports_no_tensorflow(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from sparktf.driver.scalars import Scalars
        s = Scalars({str(tmp_path)!r})
        s.add("chief:0", [(1, 0.0, {{"loss": 0.5}})])
        s.close()
        assert "tensorflow" not in sys.modules, sorted(m for m in sys.modules if "tensorflow" in m)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
    (events,) = glob.glob(str(tmp_path / "chief-0" / "events.*"))
    assert read_scalars(events) == [(1, "loss", 0.5)]
