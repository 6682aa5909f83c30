"""A node that prints hundreds of thousands of lines as fast as it can, on a loaded machine:
its exit report is never lost behind its output, and every line reaches the driver's log file.
Real Spark (local[4]), real node processes, a real CPU hog beside them.

The lines travel on the supervisor's control connection, ahead of its exit report, through
socket buffers that hold megabytes (loopback's receive buffer grows to
``net.ipv4.tcp_rmem``'s maximum, 32 MB here): the supervisor, its task and the Spark job can
all have ended while the driver still reads the lines, and the exit behind them."""

import subprocess
import sys

import cloudpickle
import pytest

import sparktf

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.slow]

LINES = 300_000
KEY = "spark.sparktf.nodeLogDir"


def flood(args, ctx):
    """Print ``args['lines']`` numbered lines to stdout as fast as Python can, then return."""
    out, n = sys.stdout, args["lines"]
    for start in range(0, n, 1000):
        out.write("".join(f"{ctx.name} line {i}\n" for i in range(start, min(n, start + 1000))))
    out.flush()
    return ctx.name


@pytest.fixture
def cpu_hog():
    """A process spinning on a core beside the job; stopped by its PID."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield hog.pid
    finally:
        hog.kill()
        hog.wait()


@pytest.fixture
def logs_in(sc_local, tmp_path):
    from pyspark.sql import SparkSession

    spark = SparkSession(sc_local)
    spark.conf.set(KEY, str(tmp_path / "logs"))
    yield tmp_path / "logs"
    spark.conf.unset(KEY)


@pytest.mark.parametrize("round_", range(3))
def test_a_node_flooding_its_output_still_reports_its_exit(sc_local, logs_in, cpu_hog, round_):
    cluster = sparktf.run(sc_local, flood, {"lines": LINES}, num_executors=2)
    assert cluster.shutdown(timeout=280) == "chief:0"  # not "never reported their exit"
    for node, path in cluster.log_files.items():
        with open(path) as f:
            got = sum(1 for line in f if line.startswith(f"{node} line "))
        assert got == LINES, f"{node}: {got} of {LINES} lines reached the driver"
