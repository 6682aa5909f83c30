"""Scripts as they are: ``sparktf.run(sc, "train.py", args=[...])`` and ``python -m sparktf run``
on a real local[4] Spark, with real node processes (the scripts here import no TensorFlow;
tests/e2e/test_examples.py runs a TF_CONFIG script that trains)."""

import json
import os
import subprocess
import sys

import pytest

import sparktf

pytestmark = pytest.mark.usefixtures("no_leaks")

#: A script written for plain TF_CONFIG, as any multi-worker TensorFlow script reads it.
REPORTER = """\
import json, os, sys
import shipped_helper

task = json.loads(os.environ["TF_CONFIG"])["task"]
print(f"hello from {task['type']}:{task['index']}")
out = os.path.join(sys.argv[1], f"{task['type']}-{task['index']}.json")
with open(out, "w") as f:
    json.dump({"argv": sys.argv[1:], "name": __name__, "helper": shipped_helper.VALUE,
               "cluster": json.loads(os.environ["TF_CONFIG"])["cluster"]}, f)
if task["type"] == "worker" and "--fail" in sys.argv:
    sys.exit(3)
"""


@pytest.fixture
def reporter(tmp_path):
    (tmp_path / "reporter.py").write_text(REPORTER)
    (tmp_path / "shipped_helper.py").write_text("VALUE = 'shipped'\n")
    out = tmp_path / "out"
    out.mkdir()
    return tmp_path / "reporter.py", tmp_path / "shipped_helper.py", out


def test_a_script_runs_on_every_node_with_tf_config_and_its_argv(sc_local, reporter, capfd):
    script, helper, out = reporter
    cluster = sparktf.run(
        sc_local, str(script), [str(out), "--epochs", "2"], num_executors=2, py_files=[helper]
    )
    assert cluster.shutdown() is None
    reports = {p: json.loads((out / p).read_text()) for p in sorted(os.listdir(out))}
    assert sorted(reports) == ["chief-0.json", "worker-0.json"]
    for r in reports.values():
        assert r["argv"] == [str(out), "--epochs", "2"] and r["name"] == "__main__"
        assert r["helper"] == "shipped" and sorted(r["cluster"]) == ["chief", "worker"]
    assert "[worker:0] hello from worker:0" in capfd.readouterr().out  # tagged as any node's


def test_a_scripts_exit_code_fails_the_job_naming_the_node(sc_local, reporter):
    script, helper, out = reporter
    # the script fails within a second: run() may see it while it waits for the nodes to start
    with pytest.raises(sparktf.NodeError) as info:
        sparktf.run(
            sc_local, str(script), [str(out), "--fail"], num_executors=2, py_files=[str(helper)]
        ).shutdown()
    assert info.value.node == "worker:0" and "the script called sys.exit(3)" in str(info.value)
    assert "runpy" not in str(info.value)  # no traceback through sparktf and runpy


def test_a_second_script_job_in_the_same_session(sc_local, reporter):
    script, helper, out = reporter
    for _ in range(2):
        sparktf.run(sc_local, script, [str(out)], num_executors=2, py_files=[helper]).shutdown()
    assert len(os.listdir(out)) == 2


def test_rows_held_back_by_rebalance_false_are_blamed_on_it(sc_local, caplog):
    """Partitions of 0 and 1,001 rows fed as they are: every row held back, and the warning
    says that rebalance=False did it (left unset, the surplus is moved between nodes)."""
    from helpers import feed_jobs

    rdd = sc_local.parallelize(range(1001), 2).map(lambda i: (1, float(i)))  # all in one
    data = rdd.partitionBy(2, lambda k: k).values().map(lambda x: [x]).cache()
    cluster = sparktf.run(
        sc_local, feed_jobs.sum_ids, {}, num_executors=2, input_mode=sparktf.InputMode.SPARK
    )
    with caplog.at_level("WARNING", logger="sparktf"):
        cluster.train(data, num_epochs=1, rebalance=False)
    cluster.shutdown()
    assert cluster.rows_held_back == 1001
    assert "rebalance=False" in caplog.text and "leave rebalance unset" in caplog.text


def test_py_files_without_a_script_is_refused(sc_local):
    with pytest.raises(sparktf.ConfigError, match="py_files"):
        sparktf.run(sc_local, lambda ctx: None, py_files=["x.py"])


@pytest.mark.slow
def test_the_command_line_runs_a_script_and_carries_its_exit_code(reporter):
    script, helper, out = reporter
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    base = [sys.executable, "-m", "sparktf", "run", "--master", "local[2]"]
    base += ["--conf", "spark.driver.host=127.0.0.1", "--num-executors", "2"]
    base += ["--py-files", str(helper), str(script), str(out)]
    ok = subprocess.run(base, env=env, capture_output=True, text=True, timeout=240)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["chief-0.json", "worker-0.json"]
    assert "[chief:0] hello from chief:0" in ok.stdout
    failed = subprocess.run(base + ["--fail"], env=env, capture_output=True, text=True, timeout=240)
    assert failed.returncode == 1
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("sparktf: error: NodeError") and "worker:0" in last
