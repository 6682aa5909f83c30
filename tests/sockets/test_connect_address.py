"""A Spark Connect URL with no server behind it fails at once, naming the URL, instead of
pyspark's client retrying in silence for minutes (seen: over 60 s without a word from
``python -m sparktf run`` with a wrong SPARK_REMOTE). A real closed port on loopback."""

import os
import socket
import subprocess
import sys
import time

import pytest

import sparktf
from sparktf.driver.sparkside import check_connect_server, connect_address

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once it is closed


@pytest.mark.parametrize(
    "url, address",
    [
        ("sc://127.0.0.1:15003", ("127.0.0.1", 15003)),
        ("sc://connect.example", ("connect.example", 15002)),
        ("sc://h:1/;token=abc;use_ssl=true", ("h", 1)),
    ],
)
def test_a_connect_url_gives_its_host_and_port(url, address):
    assert connect_address(url) == address


@pytest.mark.parametrize("url", ["http://h:1", "sc://", "127.0.0.1:15002", "sc://h:99999"])
def test_a_url_that_is_not_spark_connects_is_named(url):
    with pytest.raises(sparktf.ConfigError, match="Spark Connect URL"):
        connect_address(url)


def test_no_server_at_the_url_is_a_clear_error_at_once():
    url = f"sc://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(sparktf.ConfigError, match=f"no Spark Connect server answers at {url}"):
        check_connect_server(url)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("how", ["--remote", "SPARK_REMOTE"])
def test_the_command_line_says_so_in_one_line(tmp_path, how):
    url = f"sc://127.0.0.1:{_closed_port()}"
    script = tmp_path / "train.py"
    script.write_text("print('never')\n")
    env = dict(os.environ, PYTHONPATH=ROOT, SPARK_LOCAL_IP="127.0.0.1")
    args = [sys.executable, "-m", "sparktf", "run"]
    if how == "--remote":
        args += ["--remote", url]
    else:
        env["SPARK_REMOTE"] = url
    out = subprocess.run([*args, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr[-2000:]
    assert f"sparktf: error: ConfigError: no Spark Connect server answers at {url}" in out.stderr
