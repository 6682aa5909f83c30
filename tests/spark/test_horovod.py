"""A Horovod Keras program on sparktf's gang: ``run(framework="horovod")`` starts no
``horovodrun``; each node gets its rank, size, local rank and the chief's Gloo rendezvous,
trains on its shard of real MNIST digits with ``hvd.DistributedOptimizer``, and the job ends
as any other (local[4], real TF processes, real Gloo over loopback).

Horovod 0.28.1 builds against TensorFlow 2.16 to 2.18 only (docs/compatibility.md): where it
is not installed, as in the default environment (TensorFlow 2.21), the test is skipped. Run
it in an environment that has it (docs/compatibility.md#horovod says how).
"""

import importlib.util

import pytest
from helpers import horovod_jobs
from helpers.procs import TF_ENV

import sparktf

pytestmark = [pytest.mark.tf, pytest.mark.slow, pytest.mark.usefixtures("no_leaks")]


@pytest.mark.skipif(
    importlib.util.find_spec("horovod") is None,
    reason="Horovod is not installed (it builds against TensorFlow 2.16-2.18 only; "
    "docs/compatibility.md#horovod)",
)
def test_a_horovod_keras_program_learns_on_two_nodes_without_horovodrun(sc_local):
    cluster = sparktf.run(
        sc_local,
        horovod_jobs.keras_mnist,
        {"epochs": 2},
        num_executors=2,
        framework="horovod",
        env={**TF_ENV, "HOROVOD_GLOO_TIMEOUT_SECONDS": "77"},  # the user's value wins
    )
    chief = cluster.shutdown(timeout=300)
    worker = cluster.results["worker:0"]
    assert (chief["rank"], worker["rank"]) == (0, 1)  # ctx.rank
    assert chief["size"] == worker["size"] == 2
    # both nodes on this machine's loopback: one host, local ranks 0 and 1
    assert (chief["local_rank"], worker["local_rank"], chief["local_size"]) == (0, 1, 2)
    assert chief["sum"] == worker["sum"] == 3.0  # a real all-reduce between the two
    assert chief["env"]["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"
    assert chief["env"]["HOROVOD_GLOO_IFACE"] == worker["env"]["HOROVOD_GLOO_IFACE"] == "lo"
    assert chief["env"]["HOROVOD_GLOO_TIMEOUT_SECONDS"] == "77"
    assert chief["kernel_sum"] == pytest.approx(worker["kernel_sum"])  # one model, in sync
    assert chief["test_accuracy"] > 0.8


def test_horovod_with_a_parameter_server_is_refused_before_anything_starts(sc_local):
    """Checked on the driver, which needs no Horovod: no node starts."""
    with pytest.raises(sparktf.ConfigError, match="framework='horovod' trains on every node"):
        sparktf.run(
            sc_local,
            horovod_jobs.keras_mnist,
            {},
            num_executors=3,
            num_ps=1,
            framework="horovod",
        )


@pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="Horovod is not installed")
def test_a_failing_horovod_node_fails_the_job_and_stops_its_peer(sc_local):
    """The chief waits for ever in an all-reduce the failed worker never joins: sparktf fails
    the job with the worker's error and stops the chief (no_leaks checks its process)."""
    cluster = sparktf.run(
        sc_local,
        horovod_jobs.worker_fails_while_chief_allreduces,
        None,
        num_executors=2,
        framework="horovod",
        env=TF_ENV,
    )
    with pytest.raises(sparktf.NodeError, match="rank 1 fails on purpose") as info:
        cluster.shutdown(timeout=240)
    assert info.value.node == "worker:0"


#: A Horovod script as horovodrun runs one: it knows nothing of Spark or sparktf.
SCRIPT = """
import sys
import tensorflow as tf
import horovod.tensorflow as hvd

hvd.init()
total = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum)
print(f"rank {hvd.rank()} of {hvd.size()}, local rank {hvd.local_rank()}: sum {float(total)}")
sys.exit(0 if float(total) == 3.0 else 1)
"""


@pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="Horovod is not installed")
def test_a_horovod_script_runs_from_the_command_line_as_horovodrun_would(tmp_path, spark_pool):
    """``python -m sparktf run --framework horovod`` in place of ``horovodrun -np 2``."""
    import subprocess
    import sys

    spark_pool.stop()  # the command line starts its own SparkContext
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, "-m", "sparktf", "run", "--master", "local[2]"]
        + ["--conf", "spark.driver.host=127.0.0.1", "--num-executors", "2"]
        + ["--framework", "horovod", "--env", "TF_CPP_MIN_LOG_LEVEL=3", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "[chief:0] rank 0 of 2, local rank 0: sum 3.0" in out.stdout
    assert "[worker:0] rank 1 of 2, local rank 1: sum 3.0" in out.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("horovod") is not None, reason="Horovod is installed here"
)
def test_executors_without_horovod_name_their_python_and_how_to_point_them_at_a_venv(sc_local):
    """A new user's trial: Horovod in a venv, the executors on another Python; the error said
    to build Horovod again. It names the executor's Python and PYSPARK_PYTHON."""
    # The node fails at once: run() itself may already raise (a fast machine), or shutdown().
    with pytest.raises(sparktf.NodeError) as err:
        cluster = sparktf.run(
            sc_local, horovod_jobs.keras_mnist, {}, num_executors=2, framework="horovod"
        )
        cluster.shutdown(timeout=120)
    text = str(err.value)
    assert "cannot import horovod" in text and "PYSPARK_PYTHON" in text, text
