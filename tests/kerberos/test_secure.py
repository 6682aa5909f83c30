"""sparktf on a Kerberized YARN and HDFS (``bin/yarn-test-cluster.sh start --kerberos``): HDFS
through sparktf.fs with and without a ticket, and the main job submitted with
``--principal``/``--keytab``, as docs/yarn.md's Kerberos section says.
"""

import os
import re
import sys
import time

import pytest
from helpers.procs import pid_alive, wait_until
from kerberos_harness import ROOT

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
    ticket = tmp_path / "ticket"
    secure_yarn.kinit(ticket)
    export = f"/user/{secure_yarn.user}/mnist_export"
    out = secure_yarn.submit(
        os.path.join(ROOT, "examples", "mnist.py"),
        "--export-dir",
        f"hdfs://{export}",
        extra=("--principal", secure_yarn.principal, "--keytab", secure_yarn.keytab),
        conf={"spark.executorEnv.PYTHONPATH": ROOT},
        cwd=tmp_path,
        env=secure_yarn.env(KRB5CCNAME=str(ticket)),
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
