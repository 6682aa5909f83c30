"""An HA nameservice and a ``viewfs://`` mount table over a running test HDFS, as a client's
Hadoop configuration names them (tests/hadoop/test_nameservices.py, and with Kerberos
tests/kerberos/test_secure.py), and the client that reads and writes through both.

The configuration (a copy of the cluster's, in the test's own HADOOP_CONF_DIR) names
nameservice ``ns1`` of two NameNodes: ``nn2``, listed first, on a port nothing listens on (a
NameNode down), and ``nn1``, the cluster's real one; and a mount table ``cluster`` whose
``/data`` is ``hdfs://ns1/<dir>``."""

import shutil
import socket
import textwrap
import urllib.parse
import uuid
import xml.etree.ElementTree as ET

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


def add(path, props):
    tree = ET.parse(path)
    for name, value in props.items():
        prop = ET.SubElement(tree.getroot(), "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    tree.write(path)


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ha_conf(cluster_conf, hdfs_url, webhdfs_url, conf, under=""):
    """Copy ``cluster_conf`` to ``conf`` with nameservice ns1 (a NameNode down first, then the
    one at ``hdfs_url`` / ``webhdfs_url``) and mount table ``cluster``; the mount's target
    directory, ``UNDER/t/ns-...`` (``under``: a directory the client may write in)."""
    shutil.copytree(cluster_conf, conf)
    rpc = urllib.parse.urlsplit(hdfs_url).netloc
    http = urllib.parse.urlsplit(webhdfs_url).netloc
    down = f"127.0.0.1:{closed_port()}"
    add(
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
    top = f"{under}/t/ns-{uuid.uuid4().hex[:8]}"
    add(conf / "core-site.xml", {"fs.viewfs.mounttable.cluster.link./data": f"hdfs://ns1{top}"})
    return top


def check(result):
    """What CLIENT printed (RESULT=, as json), as both backends must have done it."""
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
