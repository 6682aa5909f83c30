"""The port reservation: nobody else can take a published port, but TensorFlow can bind it."""

import errno
import socket
import subprocess
import sys
import textwrap

import pytest

from sparktf.common.ports import PortReservation


def plain_bind(family, host, port):
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, port))


@pytest.mark.parametrize(
    "family, host",
    [
        (socket.AF_INET, "0.0.0.0"),
        (socket.AF_INET, "127.0.0.1"),
        (socket.AF_INET6, "::"),
    ],
)
def test_a_plain_bind_to_a_reserved_port_fails(family, host):
    with PortReservation() as r:
        with pytest.raises(OSError) as err:
            plain_bind(family, host, r.port)
        assert err.value.errno == errno.EADDRINUSE


def test_the_kernel_never_hands_out_a_reserved_port():
    with PortReservation() as r:
        seen = set()
        for _ in range(500):
            with socket.socket() as s:  # bind(0): what any other program asking for a port does
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("0.0.0.0", 0))
                seen.add(s.getsockname()[1])
        assert r.port not in seen


def test_two_reservations_never_share_a_port():
    held = [PortReservation() for _ in range(50)]
    try:
        assert len({r.port for r in held}) == 50
    finally:
        for r in held:
            r.release()


def test_release_frees_the_port():
    r = PortReservation()
    port = r.port
    r.release()
    plain_bind(socket.AF_INET, "0.0.0.0", port)


@pytest.mark.tf
def test_tensorflow_binds_the_port_while_it_is_reserved():
    """A real TF gRPC server takes the reserved port, with the placeholder still open."""
    with PortReservation() as r:
        code = textwrap.dedent(f"""
            import os, socket
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
            import tensorflow as tf
            spec = tf.train.ClusterSpec({{"worker": ["127.0.0.1:{r.port}"]}})
            server = tf.distribute.Server(spec, job_name="worker", task_index=0, start=True)
            socket.create_connection(("127.0.0.1", {r.port}), timeout=5).close()
            print("served", server.target, flush=True)
            os._exit(0)
        """)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert f"served grpc://127.0.0.1:{r.port}" in out.stdout
