"""sparktf.daemon (Spark's Python worker daemon with modules preloaded) and sparktf.warm_up's
checks, without Spark: the daemon runs as Spark starts it, ``python -m sparktf.daemon``, and
must tell its port alone on stdout whatever its imports print."""

import os
import select
import struct
import subprocess
import sys
import textwrap

import pytest

import sparktf
from sparktf import daemon
from sparktf.driver import warmup


@pytest.mark.parametrize(
    "value, names",
    [
        (None, ("tensorflow",)),
        ("", ()),
        ("tensorflow,tf_keras", ("tensorflow", "tf_keras")),
        (" tensorflow , tf_keras,,tensorflow ", ("tensorflow", "tf_keras")),
        ("numpy pandas", ("numpy", "pandas")),
    ],
)
def test_preload_names_come_from_the_environment(value, names):
    env = {} if value is None else {"SPARKTF_PRELOAD": value}
    assert daemon.preload_names(env) == names


def _start(tmp_path, preload):
    """``python -m sparktf.daemon`` with a module that writes to stdout while it is imported."""
    (tmp_path / "noisy_import.py").write_text(
        textwrap.dedent("""
        import os
        print("noise from print")
        os.write(1, b"noise on fd 1\\n")
    """)
    )
    env = dict(
        os.environ,
        SPARKTF_PRELOAD=preload,
        SPARKTF_DAEMON_VERBOSE="1",
        PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "sparktf.daemon"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def test_the_daemon_tells_its_port_alone_on_stdout_and_starts_despite_a_failed_preload(tmp_path):
    proc = _start(tmp_path, "noisy_import,sparktf_no_such_module,colorsys")
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "the daemon told no port within 60 s"
        (port,) = struct.unpack("!i", proc.stdout.read(4))  # what Spark reads: an int, no more
        assert 0 < port < 65536
        assert proc.poll() is None  # serving
    finally:
        proc.stdin.close()  # how Spark stops it: its stdin ends
        rest = proc.stdout.read()
        proc.wait(30)
    err = proc.stderr.read().decode()
    assert rest == b""  # the import's output went to stderr, not into Spark's protocol
    assert "noise from print" in err and "noise on fd 1" in err
    assert "sparktf.daemon: could not preload sparktf_no_such_module (ModuleNotFoundError" in err
    assert "preloaded colorsys" in err  # the modules after a failure still load


def test_preload_reports_each_module():
    outcome = daemon.preload(["json", "sparktf_no_such_module"])
    assert outcome["json"] == ""
    assert outcome["sparktf_no_such_module"].startswith("ModuleNotFoundError")


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"dataframes": "yes"}, "dataframes must be True or False, not 'yes' (str)"),
        ({"rdds": 1}, "rdds must be True or False, not 1 (int)"),
        ({"dataframes": False}, "nothing to warm up"),
    ],
)
def test_warm_up_checks_its_flags_before_anything(kwargs, says):
    with pytest.raises(sparktf.ConfigError) as err:
        sparktf.warm_up(object(), **kwargs)
    assert says in str(err.value)


def test_warm_up_wants_a_session_or_context():
    with pytest.raises(sparktf.ConfigError) as err:
        sparktf.warm_up("local[2]")
    assert "must be a SparkSession or a SparkContext, not str" in str(err.value)


class _Conf(dict):
    def get(self, key, default=None):
        return super().get(key, default)


@pytest.mark.parametrize(
    "conf, env",
    [
        ({}, {"SPARK_SIMPLIFIED_TRACEBACK": "1"}),  # Spark's defaults
        ({"spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false"}, {}),
        (
            {"spark.sql.execution.pyspark.udf.hideTraceback.enabled": "true"},
            {"SPARK_SIMPLIFIED_TRACEBACK": "1", "SPARK_HIDE_TRACEBACK": "1"},
        ),
    ],
)
def test_the_dataframe_daemons_environment_follows_the_sql_settings(conf, env):
    # (private helper, tested directly: the DataFrame daemons' environment from the SQL settings)
    assert warmup._sql_worker_env(_Conf(conf)) == env


@pytest.mark.parametrize("memory, preloads", [(None, True), ("8192", True), ("2048", False)])
def test_a_small_pyspark_memory_cap_turns_the_preload_off(memory, preloads, capsys):
    env = {"SPARKTF_PRELOAD": "tensorflow,tf_keras"}
    if memory:
        env["PYSPARK_EXECUTOR_MEMORY_MB"] = memory
    names = daemon.names_to_preload(env)
    assert names == (("tensorflow", "tf_keras") if preloads else ())
    if not preloads:
        assert (
            "spark.executor.pyspark.memory gives each Python worker 2048 MB"
            in capsys.readouterr().err
        )
