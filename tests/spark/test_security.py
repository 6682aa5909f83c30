"""The control channel of a running job: only this job's nodes get in; the secret stays secret."""

import json
import socket
import struct
import threading
import time

import pytest

import jobs
import sparktf
from conftest import wait_until

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_rogue_clients_are_rejected_while_a_real_job_runs(sc_local, tmp_path):
    done = tmp_path / "done"
    cluster = sparktf.run(sc_local, jobs.wait_for_file, {"file": str(done)}, num_executors=2)
    host, port = cluster._runner.server.address
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
    assert result["log_dir"] is None and cluster._runner.server.rejected == 4


def test_the_secret_is_not_in_tf_config_the_environment_or_the_logs(sc_local, capfd):
    cluster = sparktf.run(sc_local, jobs.describe_env, {}, num_executors=2)
    secret = cluster._runner.attempt_launch.secret
    cluster.shutdown()
    out, err = capfd.readouterr()
    for node in cluster.results.values():
        dumped = json.dumps(node)
        for form in (secret.hex(), secret.hex().upper(), repr(secret)):
            assert form not in dumped
    for form in (secret.hex(), repr(secret)):
        assert form not in out and form not in err


class _Attack:
    """Against a control server as soon as it exists: one peer dribbling a byte every 0.7 s
    (greeted first, so it is one of the connections the server holds), then a flood of silent
    connections, more than the server lets wait; bounded in count and time, loopback only."""

    def __init__(self, address, flood=100, seconds=20.0):
        self.address, self.flood, self.seconds = address, flood, seconds
        self.dribbler_dropped_after = None
        self.sockets = []
        self.start = time.monotonic()
        self.dribbler = socket.create_connection(address, timeout=5)
        self.dribbler.recv(64)  # the server's greeting: its handshake clock runs
        self.threads = [threading.Thread(target=self._dribble, daemon=True),
                        threading.Thread(target=self._flood, daemon=True)]
        for t in self.threads:
            t.start()

    def _flood(self):
        for _ in range(self.flood):
            try:
                self.sockets.append(socket.create_connection(self.address, timeout=2))
            except OSError:
                pass

    def _dribble(self):
        s = self.dribbler
        s.settimeout(0.7)
        while time.monotonic() - self.start < self.seconds:
            try:
                s.sendall(b"\x01")
                if s.recv(4096) == b"":
                    break
            except socket.timeout:
                continue
            except OSError:
                break
        else:
            s.close()
            return
        self.dribbler_dropped_after = time.monotonic() - self.start
        s.close()

    def stop(self):
        for t in self.threads:
            t.join(self.seconds + 5)
        for s in self.sockets:
            s.close()


def test_a_flood_and_a_dribbler_while_a_real_job_starts_and_finishes(sc_local, monkeypatch,
                                                                   tmp_path):
    import sparktf.driver.runner as runner

    attacks = []

    class WatchedServer(runner.ControlServer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            attacks.append((self, _Attack(self.address)))

    monkeypatch.setattr(runner, "ControlServer", WatchedServer)
    done = tmp_path / "done"
    cluster = sparktf.run(sc_local, jobs.wait_for_file, {"file": str(done)}, num_executors=2)
    [(server, attack)] = attacks
    # the job started under the flood; it runs until the dribbler has been dropped
    assert wait_until(lambda: attack.dribbler_dropped_after is not None, timeout=20)
    done.touch()
    assert cluster.shutdown(timeout=60) == {"log_dir": None}
    attack.stop()
    # dropped by the handshake's one deadline (10 s) however it dribbled, or sooner, to make
    # room when the flood filled the unauthenticated slots (the oldest go first)
    assert attack.dribbler_dropped_after < 13
    assert server.rejected + server.turned_away >= 1
