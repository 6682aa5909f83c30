"""A real Spark Connect server for tests, started from the pip-installed pyspark's
SparkConnectServer class on loopback, and stopped by its PID (spark-submit execs the JVM)."""

import contextlib
import os
import socket
import subprocess
import sys
import time


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def connect_server(log, master="local[3]", conf=(), env=None):
    """Yield the ``sc://`` URL of a Connect server on ``master`` with ``conf`` (pairs) added,
    its output in ``log`` (a path); stop it on exit."""
    import pyspark

    port = _free_port()
    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, **(env or {}))
    settings = {
        "spark.driver.host": "127.0.0.1",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        **dict(conf),
    }
    confs = [arg for k, v in settings.items() for arg in ("--conf", f"{k}={v}")]
    server_class = "org.apache.spark.sql.connect.service.SparkConnectServer"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [spark_submit, "--class", server_class, "--master", master, *confs],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 120
        while b"Spark Connect server started" not in open(log, "rb").read():
            assert server.poll() is None, open(log).read()[-3000:]
            assert time.monotonic() < deadline, open(log).read()[-3000:]
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
