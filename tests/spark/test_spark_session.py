"""sparktf.spark_session, the start-up call of a script, in a fresh driver as a script has
one: a real local Spark whose executors' Python daemon is sparktf's (TensorFlow imported before
the workers fork), the script's own module shipped, the warm-up started, Spark's INFO lines
off; and a setting the user gave spark-submit is kept, not overridden."""

import json
import os
import subprocess
import sys

import pytest
from helpers.procs import user_env as _env

pytestmark = [pytest.mark.slow, pytest.mark.tf]


SCRIPT = """
import json, sys, threading
import sparktf

spark = sparktf.spark_session(
    "spark-session-test",
    conf={"spark.master": "local[2]", "spark.driver.host": "127.0.0.1"},
    py_files=[sys.argv[1]],
    preload="tensorflow",
    log_level=None if sys.argv[2:] == ["quiet=no"] else "WARN",
)
warming = [t for t in threading.enumerate() if t.name.startswith("sparktf-warm-up-")]
import shipped_helper  # the driver imports it too


def probe(_rows):
    import os, sys
    import shipped_helper

    yield os.getppid(), "tensorflow" in sys.modules, shipped_helper.VALUE


rows = spark.sparkContext.parallelize(range(2), 2).mapPartitions(probe).collect()
for thread in warming:
    thread.join(300)
conf = spark.sparkContext.getConf()
print(json.dumps({
    "daemon": conf.get("spark.python.daemon.module"),
    "preload": conf.get("spark.executorEnv.SPARKTF_PRELOAD"),
    "tensorflow": [r[1] for r in rows],
    "values": [r[2] for r in rows] + [shipped_helper.VALUE],
    "warming": len(warming),
}))
spark.stop()
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spark_session")
    (folder / "shipped_helper.py").write_text("VALUE = 41 + 1\n")
    (folder / "start.py").write_text(SCRIPT)
    return folder


def _last_json(out):
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stdout + out.stderr


def test_a_script_starts_with_sparktfs_daemon_its_module_shipped_and_a_warm_up(script):
    out = subprocess.run(
        [sys.executable, str(script / "start.py"), str(script / "shipped_helper.py")],
        cwd="/",  # the module reaches the driver through addPyFile, not the working directory
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    seen, console = _last_json(out)
    assert seen["daemon"] == "sparktf.daemon" and seen["preload"] == "tensorflow"
    assert seen["tensorflow"] == [True, True]  # imported by the daemon before the fork
    assert seen["values"] == [42, 42, 42]
    assert seen["warming"] == 1
    assert not [line for line in console.splitlines() if " INFO " in line], console[-2000:]


def test_a_daemon_the_user_gave_spark_submit_is_kept(script):
    import pyspark

    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    out = subprocess.run(
        [
            spark_submit,
            "--conf",
            "spark.python.daemon.module=pyspark.daemon",
            str(script / "start.py"),
            str(script / "shipped_helper.py"),
            "quiet=no",  # log_level=None: nothing starts the JVM before the settings are read
        ],
        cwd=str(script),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    seen, _ = _last_json(out)
    assert seen["daemon"] == "pyspark.daemon"
    assert seen["tensorflow"] == [False, False]  # Spark's own daemon imports nothing ahead
    assert seen["values"] == [42, 42, 42]


CONNECT_SCRIPT = """
import json, sys, threading
import sparktf

spark = sparktf.spark_session("over-connect", py_files=[sys.argv[1]])
warming = [t for t in threading.enumerate() if t.name.startswith("sparktf-warm-up-")]


def probe(batches):
    import pyarrow as pa
    import shipped_helper

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"value": [shipped_helper.VALUE]})


rows = spark.range(0, 2, 1, 2).mapInArrow(probe, "value long").collect()
for thread in warming:
    thread.join(300)
print(json.dumps({"connect": type(spark).__module__, "values": [r.value for r in rows],
                  "warming": len(warming)}))
spark.stop()
"""


def test_a_script_over_spark_connect_ships_its_module_as_an_artifact_and_warms_up(
    script, connect_url
):
    (script / "over_connect.py").write_text(CONNECT_SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script / "over_connect.py"), str(script / "shipped_helper.py")],
        cwd="/",
        env=dict(_env(), SPARK_REMOTE=connect_url),
        capture_output=True,
        text=True,
        timeout=300,
    )
    seen, _ = _last_json(out)
    assert seen["connect"].startswith("pyspark.sql.connect.")
    assert seen["values"] == [42, 42]
    assert seen["warming"] == 1
