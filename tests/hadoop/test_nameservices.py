"""sparktf.fs on the paths real clusters carry: an HA nameservice (``hdfs://ns1/...``, whose
NameNodes the client fails over between) and a ``viewfs://`` mount table, through each
backend, against the running test HDFS (the configuration and the client:
tests/helpers/nameservices.py; with Kerberos: tests/kerberos/test_secure.py). Each backend
runs in its own Python process (libhdfs's JVM reads its configuration once, from
CLASSPATH)."""

import json
import os
import subprocess
import sys

import pytest
from helpers import nameservices

pytestmark = [pytest.mark.hadoop, pytest.mark.timeout(300)]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def ha_conf(hdfs_cluster, tmp_path_factory):
    conf = tmp_path_factory.mktemp("ha") / "conf"
    top = nameservices.ha_conf(
        hdfs_cluster.env["HADOOP_CONF_DIR"], hdfs_cluster.url, hdfs_cluster.webhdfs, conf
    )
    return conf, top


@pytest.mark.parametrize("backend", ["libhdfs", "webhdfs"])
def test_an_ha_nameservice_and_a_viewfs_mount_table_are_read_and_written(
    hdfs_cluster, ha_conf, backend
):
    conf, top = ha_conf
    env = dict(os.environ, HADOOP_CONF_DIR=str(conf), SPARKTF_HDFS_BACKEND=backend)
    for k in ("SPARKTF_DEFAULT_FS", "SPARKTF_WEBHDFS_URL", "SPARKTF_NAMENODE_HTTP"):
        env.pop(k, None)
    if backend == "libhdfs":
        sys.path.insert(0, os.path.join(ROOT, "bin"))
        import hdfs_test_cluster  # what bin/hdfs-test-cluster.sh puts on CLASSPATH

        env.update(hdfs_cluster.libhdfs_env, CLASSPATH=hdfs_test_cluster.classpath(str(conf)))
    base = f"hdfs://ns1{top}/{backend}"
    view = f"viewfs://cluster/data/{backend}"
    out = subprocess.run(
        [sys.executable, "-c", nameservices.CLIENT, base, view],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    nameservices.check(json.loads(out.stdout.split("RESULT=", 1)[1]))
