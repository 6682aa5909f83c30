"""The control channel of a running job: only this job's nodes get in; the secret stays secret."""

import json
import socket
import struct

import pytest

import jobs
import sparktf

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_rogue_clients_are_rejected_while_a_real_job_runs(sc_local, tmp_path):
    done = tmp_path / "done"
    cluster = sparktf.run(sc_local, jobs.wait_for_file, {"file": str(done)}, num_executors=2)
    host, port = cluster._server.address
    assert host == sc_local.getConf().get("spark.driver.host") == "127.0.0.1"  # not 0.0.0.0
    for payload in (b"", b"\x00" * 64, b"GET / HTTP/1.1\r\n\r\n" * 3,
                    struct.pack("!Q", 2**62) + b"x" * 56):
        rogue = socket.create_connection((host, port))
        rogue.sendall(payload)
        rogue.settimeout(15)  # the silent one is dropped by the 10 s handshake timeout
        try:
            while rogue.recv(4096):  # the server's challenge, then it hangs up
                pass
        except ConnectionResetError:
            pass
        rogue.close()
    done.touch()
    result = cluster.shutdown(timeout=60)  # the job was not harmed
    assert result["log_dir"] is None and cluster._server.rejected == 4


def test_the_secret_is_not_in_tf_config_the_environment_or_the_logs(sc_local, capfd):
    cluster = sparktf.run(sc_local, jobs.describe_env, {}, num_executors=2)
    secret = cluster._launch.secret
    cluster.shutdown()
    out, err = capfd.readouterr()
    for node in cluster.results.values():
        dumped = json.dumps(node)
        for form in (secret.hex(), secret.hex().upper(), repr(secret)):
            assert form not in dumped
    for form in (secret.hex(), repr(secret)):
        assert form not in out and form not in err
