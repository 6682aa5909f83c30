"""sparktf on a Kerberized YARN and HDFS (``bin/yarn-test-cluster.sh start --kerberos``): HDFS
through sparktf.fs with and without a ticket, and the main job submitted with
``--principal``/``--keytab``, as docs/yarn.md's Kerberos section says.
"""

import json
import os
import re
import sys
import time

import pytest
from helpers import nameservices
from helpers.procs import pid_alive, wait_until
from kerberos_harness import CLOCK_SKEW, ROOT, TOKEN_LIFETIME, hdfs_test_cluster

# timeout(600): the first test also starts the secure cluster (jars fetched the first time);
# the job's YARN containers take tens of seconds to start
pytestmark = [pytest.mark.kerberos, pytest.mark.slow, pytest.mark.timeout(600)]

#: Writes, reads and lists a file under argv[1] with sparktf.fs; prints what it saw, or the
#: HadoopFSError and how long it took.
FS_ROUND_TRIP = """
import sys, time
from sparktf import fs
root, started = sys.argv[1], time.monotonic()
try:
    fs.makedirs(root)
    fs.write_bytes(root + "/note.txt", b"secure " + fs.backend(root).name.encode())
    print("read", fs.read_bytes(root + "/note.txt").decode(), fs.listdir(root))
except fs.HadoopFSError as e:
    print(f"HadoopFSError after {time.monotonic() - started:.1f}s: {e}")
"""


def test_without_a_ticket_hdfs_is_refused_with_a_clear_error(secure_yarn, tmp_path):
    """No ticket (an empty credentials cache) and no tokens: sparktf.fs fails within seconds,
    its error naming kinit and spark-submit's --principal/--keytab, whichever backend."""
    for backend in ("libhdfs", "webhdfs"):
        out = secure_yarn.python(
            FS_ROUND_TRIP,
            f"hdfs:///user/{secure_yarn.user}/noticket",
            KRB5CCNAME=str(tmp_path / "no-ticket"),
            SPARKTF_HDFS_BACKEND=backend,
        )
        said = out.stdout + out.stderr[-3000:]
        m = re.search(r"HadoopFSError after ([\d.]+)s: (.*)", out.stdout)
        assert m, said
        assert float(m.group(1)) < 60, said
        assert "kinit" in m.group(2) and "--principal" in m.group(2), said


def test_an_expired_ticket_is_refused_within_seconds_naming_kinit(secure_yarn, tmp_path):
    """A ticket past its end (the tier's realm allows CLOCK_SKEW s of skew, not Kerberos's
    usual 300, so that it is refused seconds after its end): sparktf.fs fails within seconds,
    its error naming kinit, whichever backend; never a wait on Hadoop's retries."""
    backends = ["libhdfs"]
    try:
        import requests_kerberos  # noqa: F401

        backends.append("webhdfs")
    except ImportError:  # (WebHDFS with SPNEGO needs it: tested where it is installed)
        pass
    cache = tmp_path / "short"
    secure_yarn.kinit(cache, lifetime="5s")
    time.sleep(5 + CLOCK_SKEW + 2)
    for backend in backends:
        out = secure_yarn.python(
            FS_ROUND_TRIP,
            f"hdfs:///user/{secure_yarn.user}/expired",
            KRB5CCNAME=str(cache),
            SPARKTF_HDFS_BACKEND=backend,
        )
        said = f"{backend}: {out.stdout}{out.stderr[-3000:]}"
        m = re.search(r"HadoopFSError after ([\d.]+)s: (.*)", out.stdout)
        assert m, said
        assert float(m.group(1)) < 30, said
        assert "kinit" in m.group(2), said


@pytest.mark.parametrize("backend", ["libhdfs", "webhdfs"])
def test_with_a_ticket_sparktf_fs_reads_and_writes_as_the_principal(secure_yarn, tmp_path, backend):
    """kinit, then sparktf.fs: libhdfs with the login's ticket (no user name: a named user
    would be a SIMPLE user, refused), WebHDFS with SPNEGO; the files belong to the principal."""
    if backend == "webhdfs":
        pytest.importorskip(
            "requests_kerberos", reason="WebHDFS with SPNEGO: pip install requests-kerberos"
        )
    cache = tmp_path / "ticket"
    secure_yarn.kinit(cache)
    root = f"hdfs:///user/{secure_yarn.user}/{backend}"
    out = secure_yarn.python(
        FS_ROUND_TRIP, root, KRB5CCNAME=str(cache), SPARKTF_HDFS_BACKEND=backend
    )
    assert f"read secure {backend} ['note.txt']" in out.stdout, out.stdout + out.stderr[-3000:]
    rc, listing, err = secure_yarn.cli("hdfs", "dfs", "-ls", f"/user/{secure_yarn.user}/{backend}")
    assert rc == 0 and f" {secure_yarn.user} " in listing, listing + err


@pytest.mark.parametrize("backend", ["libhdfs", "webhdfs"])
def test_an_ha_nameservice_and_a_viewfs_mount_table_with_a_ticket(secure_yarn, tmp_path, backend):
    """tests/hadoop/test_nameservices.py's client on the secure cluster, kinit'd: nameservice
    ns1 (a NameNode down listed first, then the cluster's) and a mount table over it, read and
    written through libhdfs (Hadoop's client, failing over, with the login's ticket) and
    WebHDFS (each NameNode's HTTP address in turn, SPNEGO)."""
    if backend == "webhdfs":
        pytest.importorskip(
            "requests_kerberos", reason="WebHDFS with SPNEGO: pip install requests-kerberos"
        )
    cache = tmp_path / "ticket"
    secure_yarn.kinit(cache)
    conf = tmp_path / "conf"
    top = nameservices.ha_conf(  # (under the principal's home: HDFS's root is the superuser's)
        secure_yarn.conf_dir,
        secure_yarn.hdfs,
        secure_yarn.webhdfs,
        conf,
        under=f"/user/{secure_yarn.user}",
    )
    env = {"HADOOP_CONF_DIR": str(conf), "KRB5CCNAME": str(cache)}
    if backend == "libhdfs":
        env["CLASSPATH"] = hdfs_test_cluster.classpath(str(conf))
    out = secure_yarn.python(
        nameservices.CLIENT,
        f"hdfs://ns1{top}/{backend}",
        f"viewfs://cluster/data/{backend}",
        SPARKTF_HDFS_BACKEND=backend,
        **env,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    nameservices.check(json.loads(out.stdout.split("RESULT=", 1)[1]))
    rc, listing, err = secure_yarn.cli("hdfs", "dfs", "-ls", f"{top}/{backend}/sub")
    assert rc == 0 and listing.count(f" {secure_yarn.user} ") == 2, listing + err


#: A driver program: its SparkContext (spark-submit gave it --principal/--keytab), then
#: FS_ROUND_TRIP's sparktf.fs calls from the driver's Python.
KEYTAB_DRIVER = (
    "from pyspark import SparkContext\n"
    "sc = SparkContext()\n"
    "import os\n"
    "print('cache before', os.environ.get('KRB5CCNAME'))\n" + FS_ROUND_TRIP + "\n"
    "cache = os.environ['KRB5CCNAME']\n"
    "print('cache after', cache, oct(os.stat(cache.removeprefix('FILE:')).st_mode & 0o777))\n"
    "sc.stop()\n"
)


@pytest.mark.parametrize("backend", ["libhdfs", "webhdfs"])
def test_a_driver_with_only_its_keytab_reaches_hdfs_as_the_principal(
    secure_yarn, tmp_path, backend
):
    """spark-submit --principal P --keytab K, and no ticket (an empty credentials cache): Spark
    logs in its JVM from the keytab; the driver's Python, whose sparktf.fs calls (checking a
    model for predict or TFEstimator, writing an export) have a client of their own, logs in
    from the same keytab into a cache of its own (0600), and reads and writes as P."""
    if backend == "webhdfs":
        pytest.importorskip(
            "requests_kerberos", reason="WebHDFS with SPNEGO: pip install requests-kerberos"
        )
    import subprocess

    from yarn_harness import spark_submit

    script = tmp_path / "driver.py"
    script.write_text(KEYTAB_DRIVER)
    root = f"hdfs:///user/{secure_yarn.user}/keytab-{backend}"
    cmd = [spark_submit(), "--master", "local[1]", "--conf", "spark.ui.enabled=false"]
    cmd += ["--principal", secure_yarn.principal, "--keytab", secure_yarn.keytab]
    out = subprocess.run(
        [*cmd, str(script), root],
        env=secure_yarn.env(
            KRB5CCNAME=str(tmp_path / "no-ticket"),
            SPARKTF_HDFS_BACKEND=backend,
        ),
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    said = out.stdout[-3000:] + out.stderr[-3000:]
    assert f"read secure {backend} ['note.txt']" in out.stdout, said
    after = re.search(r"^cache after FILE:(\S+) (0o\d+)$", out.stdout, re.M)
    assert after and after.group(2) == "0o600", said
    assert not os.path.exists(after.group(1)), "the driver's own cache outlived it"
    rc, listing, err = secure_yarn.cli("hdfs", "dfs", "-ls", root.removeprefix("hdfs://"))
    assert rc == 0 and f" {secure_yarn.user} " in listing, listing + err


#: A job that outlives its delegation tokens (spark-submit ... OUTLIVE ROOT UNTIL): its one node
#: writes a file to ROOT on HDFS, waits until UNTIL, when the tokens its container started with
#: are dead, then reads the file back and saves a model to ROOT; sparktf.predict then scores with it on the executors, whose own container
#: tokens are dead too.
OUTLIVE = """
import os, sys, time
import sparktf

root, until = sys.argv[1], float(sys.argv[2])


def main_fn(args, ctx):
    import os, time
    from sparktf import fs
    root, until = args
    fs.write_bytes(root + "/written-before", b"with the container's tokens")
    while time.time() < until:
        time.sleep(1)
    assert fs.read_bytes(root + "/written-before") == b"with the container's tokens"
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np, tf_keras as keras
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(1,))])
    model.set_weights([np.array([[2.0]], "float32"), np.array([0.0], "float32")])
    with fs.export_dir(root + "/model") as local:
        model.save(local)
    return os.environ["HADOOP_TOKEN_FILE_LOCATION"]


spark = sparktf.spark_session("sparktf-outlive")
cluster = sparktf.run(spark.sparkContext, main_fn, (root, until), num_executors=1)
print("the node's tokens:", cluster.shutdown())
print("after the tokens' end:", round(time.time() - until, 1), "s")
df = spark.createDataFrame([(i, [float(i)]) for i in range(8)], "id long, x array<float>")
scored = sparktf.predict(df, root + "/model", ["x"], "y").collect()
print("scored:", sorted((r.id, round(r.y)) for r in scored))
"""


@pytest.mark.tf
def test_a_job_that_outlives_its_tokens_still_writes_and_reads_hdfs(secure_yarn, tmp_path):
    """The tier's tokens die TOKEN_LIFETIME s after they are issued; Spark, given
    ``--principal``/``--keytab``, obtains new ones for its JVMs. The chief's TF process
    writes a SavedModel to HDFS after its container's tokens died (WebHDFS with the tokens the
    driver relayed: sparktf.driver.credentials), and sparktf.predict reads it on the
    executors (their Python workers adopt the tokens the driver shipped with the call).
    Without the relay the export failed, and without the shipped tokens predict
    did: "InvalidToken: Token has expired"."""
    script = tmp_path / "outlive.py"
    script.write_text(OUTLIVE)
    root = f"hdfs:///user/{secure_yarn.user}/outlive"
    # the node saves past the lifetime of every token issued before the submission
    until = time.time() + TOKEN_LIFETIME + 15
    out = secure_yarn.submit_as_principal(tmp_path, script, root, until)
    said = out.stdout[-4000:] + out.stderr[-6000:]
    assert out.returncode == 0, said
    assert re.search(r"^the node's tokens: .*/hadoop\.tokens$", out.stdout, re.M), said
    assert "scored: " + str([(i, 2 * i) for i in range(8)]) in out.stdout, said
    rc, listing, err = secure_yarn.cli(
        "hdfs", "dfs", "-ls", root.removeprefix("hdfs://") + "/model"
    )
    assert rc == 0 and "saved_model.pb" in listing, listing + err
    assert secure_yarn.wait_idle(), secure_yarn.describe_leftovers()


@pytest.mark.tf
def test_main_job_with_principal_and_keytab_reaches_95_percent(secure_yarn, tmp_path):
    """`spark-submit --master yarn --deploy-mode client --principal P --keytab K
    examples/mnist.py --export-dir hdfs:///user/P/mnist_export`: Spark logs in from the
    keytab and hands its executors delegation tokens; the chief's TF process writes the
    SavedModel to HDFS with them (WebHDFS, no keytab or ticket in a container) and
    sparktf.predict reads it back on the executors; the driver's own sparktf.fs calls use
    the user's ticket (kinit). The application runs as the principal's user; test_accuracy
    >= 0.95, as tests/yarn's."""
    started_ms = int(time.time() * 1000)
    export = f"/user/{secure_yarn.user}/mnist_export"
    out = secure_yarn.submit_as_principal(
        tmp_path, os.path.join(ROOT, "examples", "mnist.py"), "--export-dir", f"hdfs://{export}"
    )
    said = out.stdout[-4000:] + out.stderr[-4000:]
    assert out.returncode == 0, said
    assert "[chief:0] chief:0: training epochs 1..12" in out.stdout, said
    assert "sparktf.predict on the executors scored 1000 held-out images" in out.stdout, said
    found = re.findall(r"^test_accuracy=(0\.\d+|1\.0+)$", out.stdout, re.M)
    assert found and float(found[-1]) >= 0.95, said
    print(f"\n[kerberos] test_accuracy={found[-1]}", file=sys.stderr)

    def mine():
        return [
            a
            for a in secure_yarn.apps()
            if a["startedTime"] >= started_ms and a["name"] == "sparktf-mnist"
        ]

    # (the ApplicationMaster may unregister after spark-submit returned: UNDEFINED until then)
    assert wait_until(
        lambda: [a["finalStatus"] for a in mine()] not in ([], ["UNDEFINED"]), timeout=60
    )
    [app] = mine()
    assert app["finalStatus"] == "SUCCEEDED" and app["user"] == secure_yarn.user, app
    rc, listing, err = secure_yarn.cli("hdfs", "dfs", "-ls", export)
    assert rc == 0 and re.search(rf" {secure_yarn.user} .*/saved_model\.pb$", listing, re.M), (
        listing + err
    )
    assert secure_yarn.wait_idle(), secure_yarn.describe_leftovers()
    # every daemon outlived the application (a secure NodeManager that aggregates logs
    # without Hadoop's native library exits as the application ends)
    assert all(map(pid_alive, secure_yarn.pids.values())), secure_yarn.pids


@pytest.mark.tf
def test_the_ml_pipeline_fits_saves_and_scores_on_secure_hdfs(secure_yarn, tmp_path):
    """examples/mnist_ml.py with its SavedModels and its PipelineModel on secure HDFS:
    TFEstimator trains on the cluster (the chief exports through WebHDFS with the container's
    tokens, or those the driver relayed), the pipeline is saved and loaded by Spark's JVM
    with the tokens Spark obtained, and the loaded TFModel scores on the executors (the
    driver's checks of the export with the user's ticket)."""
    home = f"/user/{secure_yarn.user}"
    out = secure_yarn.submit_as_principal(
        tmp_path,
        os.path.join(ROOT, "examples", "mnist_ml.py"),
        "--epochs",
        "2",
        "--export-dir",
        f"hdfs://{home}/ml_export",
        "--pipeline-dir",
        f"hdfs://{home}/ml_pipeline",
        extra=("--py-files", os.path.join(ROOT, "examples", "mnist_data.py")),
    )
    said = out.stdout[-4000:] + out.stderr[-4000:]
    assert out.returncode == 0, said
    assert f"the TFModel scores hdfs://{home}/ml_export/fit-" in out.stdout, said
    found = re.findall(r"^test_accuracy=(0\.\d+|1\.0+)$", out.stdout, re.M)
    assert found and float(found[-1]) > 0.85, said  # two epochs, as tests/e2e's
    rc, listing, err = secure_yarn.cli("hdfs", "dfs", "-ls", "-R", f"{home}/ml_export")
    assert rc == 0 and re.search(r"/ml_export/fit-[^/]+/saved_model\.pb$", listing, re.M), (
        listing + err
    )
    rc, listing, err = secure_yarn.cli("hdfs", "dfs", "-ls", f"{home}/ml_pipeline/stages")
    assert rc == 0 and listing.count(f" {secure_yarn.user} ") == 2, listing + err
    assert secure_yarn.wait_idle(), secure_yarn.describe_leftovers()
