"""What a node's TensorFlow listeners bind (docs/guides/security.md, "Listeners"): TensorBoard
binds the node's own address, and TF's gRPC server cannot be told to: it listens on every
interface whatever the cluster spec says (``ServerDef`` has a port and no address). Real TF
server and TensorBoard processes; imports TensorFlow in a child process (a few seconds)."""

import json
import os
import subprocess
import sys
import textwrap

import psutil
import pytest
from helpers.procs import TF_ENV, wait_until

from sparktf.node import tensorboard

pytest.importorskip("tensorflow")

TF_SERVER = textwrap.dedent(
    """\
    import json, socket
    import psutil
    import tensorflow as tf
    from tensorflow.core.protobuf import tensorflow_server_pb2

    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    spec = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{port}"]})
    server = tf.distribute.Server(spec, job_name="worker", task_index=0, protocol="grpc")
    listening = [
        c.laddr.ip for c in psutil.Process().net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    ]
    fields = [f.name for f in tensorflow_server_pb2.ServerDef.DESCRIPTOR.fields]
    print(json.dumps({"listening": listening, "fields": fields}))
    """
)


def test_tfs_grpc_server_listens_on_every_interface_whatever_the_spec_says():
    """Evidence for the security guide: the spec names 127.0.0.1, TF binds the wildcard, and
    ServerDef has no field for an address. If this fails, TF learnt to bind one address:
    make sparktf use it and update docs/guides/security.md."""
    out = subprocess.run(
        [sys.executable, "-c", TF_SERVER],
        env={**os.environ, **TF_ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["listening"] and set(seen["listening"]) <= {"0.0.0.0", "::"}, seen
    assert "port" in seen["fields"] and not {"host", "address"} & set(seen["fields"])


def test_tensorboard_binds_the_nodes_address_only(tmp_path):
    proc, reservation = tensorboard.start(
        str(tmp_path / "logs"), "127.0.0.1", str(tmp_path / "out")
    )
    try:
        port = reservation.port
        reservation.release()
        assert wait_until(lambda: tensorboard._answers("127.0.0.1", port), timeout=120), (
            tmp_path / "out"
        ).read_text()
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        addresses = {
            c.laddr.ip
            for p in tree
            for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        }
        # its own port on the node's address; its fast loader's data server on loopback
        assert addresses and addresses <= {"127.0.0.1", "::1"}, addresses
    finally:
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        proc.kill()
        proc.wait()
        for child in children:
            try:
                child.kill()
            except psutil.Error:
                pass
