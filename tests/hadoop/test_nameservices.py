"""sparktf.fs on the paths real clusters carry: an HA nameservice (``hdfs://ns1/...``, whose
NameNodes the client fails over between) and a ``viewfs://`` mount table, through each
backend, against the running test HDFS.

The client's Hadoop configuration (a copy of the test HDFS's, in the test's own
HADOOP_CONF_DIR) names nameservice ``ns1`` of two NameNodes: ``nn2``, listed first, on a
port nothing listens on (a NameNode down), and ``nn1``, the test HDFS's real one; and a mount
table ``cluster`` whose ``/data`` is ``hdfs://ns1/<dir>``. Each backend runs in its own Python
process (libhdfs's JVM reads its configuration once, from CLASSPATH)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import urllib.parse
import uuid
import xml.etree.ElementTree as ET

import pytest

pytestmark = [pytest.mark.hadoop, pytest.mark.timeout(300)]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLIENT = textwrap.dedent('''
    import json, sys
    from sparktf import fs

    base, view = sys.argv[1], sys.argv[2]
    fs.makedirs(base + "/sub")
    fs.write_bytes(base + "/sub/a.bin", b"written through the nameservice")
    out = {
        "read": fs.read_bytes(base + "/sub/a.bin").decode(),
        "listed": fs.listdir(base + "/sub"),
        "via_viewfs": fs.read_bytes(view + "/sub/a.bin").decode(),
        "viewfs_listed": fs.listdir(view + "/sub"),
    }
    fs.write_bytes(view + "/sub/b.bin", b"written through viewfs")
    out["written_via_viewfs"] = fs.read_bytes(base + "/sub/b.bin").decode()
    try:
        out["unmounted"] = fs.exists("viewfs://cluster/elsewhere/x")
    except fs.HadoopFSError as exc:
        out["unmounted"] = str(exc)
    print("RESULT=" + json.dumps(out))
''')


def _add(path, props):
    tree = ET.parse(path)
    for name, value in props.items():
        prop = ET.SubElement(tree.getroot(), "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    tree.write(path)


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ha_conf(hdfs_cluster, tmp_path_factory):
    conf = tmp_path_factory.mktemp("ha") / "conf"
    shutil.copytree(hdfs_cluster.env["HADOOP_CONF_DIR"], conf)
    rpc = urllib.parse.urlsplit(hdfs_cluster.url).netloc
    http = urllib.parse.urlsplit(hdfs_cluster.webhdfs).netloc
    down = f"127.0.0.1:{_closed_port()}"
    _add(
        conf / "hdfs-site.xml",
        {
            "dfs.nameservices": "ns1",
            "dfs.ha.namenodes.ns1": "nn2,nn1",  # the one that is down first
            "dfs.namenode.rpc-address.ns1.nn1": rpc,
            "dfs.namenode.http-address.ns1.nn1": http,
            "dfs.namenode.rpc-address.ns1.nn2": down,
            "dfs.namenode.http-address.ns1.nn2": down,
            "dfs.client.failover.proxy.provider.ns1": (
                "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"
            ),
            "dfs.client.failover.sleep.base.millis": "100",
        },
    )
    top = f"/t/ns-{uuid.uuid4().hex[:8]}"
    _add(conf / "core-site.xml", {"fs.viewfs.mounttable.cluster.link./data": f"hdfs://ns1{top}"})
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
        [sys.executable, "-c", CLIENT, base, view],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT=", 1)[1])
    assert result["read"] == "written through the nameservice"
    assert result["listed"] == ["a.bin"]
    assert result["via_viewfs"] == "written through the nameservice"
    assert result["viewfs_listed"] == ["a.bin"]
    assert result["written_via_viewfs"] == "written through viewfs"
    # a path no mount point holds: not there (Hadoop's own client, libhdfs), or an error
    # that names it and the mount table (WebHDFS, resolving the table itself); not a hang
    unmounted = result["unmounted"]
    assert unmounted is False or (
        "viewfs://cluster/elsewhere/x" in unmounted and "fs.viewfs.mounttable" in unmounted
    ), result
