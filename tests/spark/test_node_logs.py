"""Every node's whole output is kept as a file on the driver (spark.sparktf.nodeLogDir), named
by job, attempt and node; a failed node's error names its file, and each job has its own.
Real Spark (local[4]) and real node processes."""

import os
import sys
import time

import cloudpickle
import pytest

import sparktf
from sparktf.errors import NodeError, UnsafePathError

cloudpickle.register_pickle_by_value(sys.modules[__name__])
pytestmark = pytest.mark.usefixtures("no_leaks")

KEY = "spark.sparktf.nodeLogDir"


def talk_then_fail(args, ctx):
    """Print ``args['lines']`` numbered lines (half to stderr); ``args['fail']`` then raises,
    once ``args['go']`` exists (so that run() has returned: the test sees the error from
    shutdown) and every other node has printed its lines (``go`` + ``.NAME``: on a loaded
    machine the chief's TF process may not have started when run() returns, and the job's
    failure would stop it before it printed anything)."""
    for i in range(args["lines"]):
        print(f"{ctx.name} line {i}", file=sys.stderr if i % 2 else sys.stdout, flush=True)
    if "go" in args and ctx.name != args.get("fail"):
        open(f"{args['go']}.{ctx.name}", "w").close()
    if ctx.name == args.get("fail"):
        others = [f"{args['go']}.{name}" for name in args.get("others", ())]
        while not all(map(os.path.exists, [args["go"], *others])):
            time.sleep(0.05)
        raise ValueError("failed on purpose")
    return ctx.name


#: TensorFlow's C++ start-up lines as this machine's TF 2.21 writes them to stderr on import.
#: Written by main_fn itself (fd 2, as TF's C++ code does) so that the test does not depend on
#: which of them a given TF build prints.
TF_CHATTER = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795711418.801508    2530 port.cc:153] oneDNN custom operations are on. "
    "You may see slightly different numerical results.",
    "I0000 00:00:1795711418.803382    2530 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "E0000 00:00:1795711425.391857    2530 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
)


def chatter_then_fail(args, ctx):
    """TensorFlow's start-up lines on fd 2, a line of main_fn's own, then raise."""
    for line in TF_CHATTER:
        os.write(2, (line + "\n").encode())
    print(f"{ctx.name} says hello", flush=True)
    raise ValueError("failed on purpose")


@pytest.fixture
def logs_in(sc_local, tmp_path):
    from pyspark.sql import SparkSession

    spark = SparkSession(sc_local)
    spark.conf.set(KEY, str(tmp_path / "logs"))
    yield tmp_path / "logs"
    spark.conf.unset(KEY)


def test_a_failed_nodes_error_names_the_file_with_its_whole_output(sc_local, logs_in):
    go = logs_in.parent / "go"
    cluster = sparktf.run(
        sc_local,
        talk_then_fail,
        {"lines": 200, "fail": "worker:0", "go": str(go), "others": ["chief:0"]},
        num_executors=2,
    )
    go.touch()
    with pytest.raises(NodeError) as err:
        cluster.shutdown(timeout=120)
    path = err.value.log_file
    assert path == str(logs_in / cluster.job_id / "attempt-0" / "worker-0.log")
    assert path in str(err.value)
    assert len(err.value.output_tail) <= 40  # the error keeps the tail ...
    with open(path) as f:
        text = f.read()
    for i in range(200):  # ... the file every line, stdout and stderr
        assert f"worker:0 line {i}\n" in text
    assert "ValueError: failed on purpose" in text  # and the traceback the node printed
    chief = cluster.log_files["chief:0"]
    assert chief.endswith(os.path.join("attempt-0", "chief-0.log"))
    assert "chief:0 line 199" in open(chief).read()


def test_each_job_writes_files_of_its_own(sc_local, logs_in):
    first = sparktf.run(sc_local, talk_then_fail, {"lines": 3}, num_executors=2)
    first.shutdown(timeout=120)
    second = sparktf.run(sc_local, talk_then_fail, {"lines": 5}, num_executors=2)
    second.shutdown(timeout=120)
    assert first.job_id != second.job_id
    for cluster, lines in ((first, 3), (second, 5)):
        for node, path in cluster.log_files.items():
            assert path.startswith(str(logs_in / cluster.job_id))
            with open(path) as f:
                got = [ln for ln in f.read().splitlines() if " line " in ln]
            # (stdout and stderr are read apart: each in its order, not with each other)
            assert sorted(got) == sorted(f"{node} line {i}" for i in range(lines))


@pytest.mark.parametrize("shown", [False, True], ids=["filtered", "tfStartupLogs"])
def test_a_failed_nodes_tail_leaves_out_tf_start_up_lines_as_the_console_does(
    sc_local, logs_in, shown
):
    """The error's tail (and err.output_tail) has no TensorFlow C++ start-up chatter, unless
    spark.sparktf.tfStartupLogs=true; the log file keeps every line either way."""
    from pyspark.sql import SparkSession

    spark = SparkSession(sc_local)
    spark.conf.set("spark.sparktf.tfStartupLogs", str(shown).lower())
    try:
        with pytest.raises(NodeError) as err:
            cluster = sparktf.run(sc_local, chatter_then_fail, {}, num_executors=1)
            cluster.shutdown(timeout=120)
    finally:
        spark.conf.unset("spark.sparktf.tfStartupLogs")
    tail = err.value.output_tail
    assert "chief:0 says hello" in tail
    assert any("ValueError: failed on purpose" in line for line in tail)
    for line in TF_CHATTER:
        assert (line in tail) is shown, tail
        assert (line in str(err.value)) is shown
    with open(err.value.log_file) as f:
        text = f.read()
    assert all(line in text for line in TF_CHATTER)


def test_a_symlink_as_the_node_log_dir_fails_the_job_before_it_starts(sc_local, logs_in):
    """A symlink where the logs should go (another user's plant): refused before any node
    starts, naming it and the setting; the place it points to is left untouched."""
    target = logs_in.parent / "elsewhere"
    target.mkdir()
    logs_in.symlink_to(target)
    with pytest.raises(UnsafePathError) as err:
        sparktf.run(sc_local, talk_then_fail, {"lines": 1}, num_executors=2)
    assert str(logs_in) in str(err.value) and KEY in str(err.value)
    assert list(target.iterdir()) == []
