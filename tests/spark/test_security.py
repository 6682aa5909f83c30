"""The control channel of a running job: only this job's nodes get in; the secret stays secret."""

import json
import socket
import struct
import threading
import time

import pytest
from helpers import jobs, mitm
from helpers.procs import wait_until

import sparktf
from sparktf.common import protocol
from sparktf.errors import SparkTFError

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_rogue_clients_are_rejected_while_a_real_job_runs(sc_local, tmp_path):
    done = tmp_path / "done"
    cluster = sparktf.run(sc_local, jobs.wait_for_file, {"file": str(done)}, num_executors=2)
    # (private: the control server's address and the job's secret are not public, on purpose)
    host, port = cluster._runner._current.server.address
    assert host == sc_local.getConf().get("spark.driver.host") == "127.0.0.1"  # not 0.0.0.0
    for payload in (
        b"",
        b"\x00" * 64,
        b"GET / HTTP/1.1\r\n\r\n" * 3,
        struct.pack("!Q", 2**62) + b"x" * 56,
    ):
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
    assert result["log_dir"] is None and cluster._runner._current.server.rejected == 4


def test_the_secret_is_not_in_tf_config_the_environment_or_the_logs(sc_local, capfd):
    cluster = sparktf.run(sc_local, jobs.describe_env, {}, num_executors=2)
    secret = cluster._runner._current.launch.secret
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
        self.threads = [
            threading.Thread(target=self._dribble, daemon=True),
            threading.Thread(target=self._flood, daemon=True),
        ]
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
            except TimeoutError:
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


def test_a_flood_and_a_dribbler_while_a_real_job_starts_and_finishes(
    sc_local, monkeypatch, tmp_path
):
    import sparktf.driver.builder as runner

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


def _files_holding(secret, roots, since):
    """Every file under ``roots`` changed since ``since`` (epoch seconds) that holds
    ``secret`` (raw, or as hex)."""
    import os

    forms = (secret, secret.hex().encode())
    found = []
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                    if (
                        not os.path.isfile(path)
                        or os.path.islink(path)
                        or st.st_mtime < since
                        or st.st_size > 1 << 30
                    ):
                        continue
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue  # gone meanwhile, or not ours to read
                if any(form in data for form in forms):
                    found.append(path)
    return found


def test_args_over_1_mib_never_put_the_job_secret_on_disk(sc_local, tmp_path):
    """PySpark broadcasts a task closure over spark.broadcast.UDFCompressionThreshold (1 MiB),
    and a broadcast is written to files on the driver and the executors: the secret must not
    be in what is written. The whole temporary directory (Spark's local dirs, the driver's
    pyspark temp dir, the nodes' work dirs) is scanned while the job runs and after."""
    import tempfile

    since = time.time() - 1
    done = tmp_path / "done"
    args = {"file": str(done), "weights": b"\x07" * (3 << 20)}  # 3 MiB of args
    roots = {tempfile.gettempdir(), sc_local._temp_dir}
    local = sc_local.getConf().get("spark.local.dir")
    roots |= set(local.split(",")) if local else set()
    cluster = sparktf.run(sc_local, jobs.wait_for_file, args, num_executors=2)
    secret = cluster._runner._current.launch.secret
    try:
        assert wait_until(
            lambda: all(
                n.liveness.connected for n in cluster._runner._current.state.nodes.values()
            ),
            60,
        )
        during = _files_holding(secret, roots, since)
    finally:
        done.touch()
        cluster.shutdown(timeout=60)
    after = _files_holding(secret, roots, since)
    assert during == [] and after == []


def test_a_frame_altered_on_the_wire_fails_the_job_with_a_security_error(
    sc_local, monkeypatch, tmp_path
):
    """A man in the middle between the nodes and the driver (the address the nodes are given
    is his) lets every handshake through and flips one bit of one frame: the driver refuses
    it and the job fails, naming the MAC, instead of acting on it."""
    import sparktf.driver.builder as runner

    proxies = []

    def alter(conn, direction, index, frame):
        return [mitm.flip(frame)] if (conn, direction, index) == (0, "c2s", 1) else [frame]

    class Intercepted(runner.ControlServer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            proxies.append(mitm.Mitm(self.address, tamper=alter))
            self.address = proxies[-1].address

    monkeypatch.setattr(runner, "ControlServer", Intercepted)
    done = tmp_path / "done"
    try:
        with pytest.raises(SparkTFError, match="failed its MAC") as info:
            cluster = sparktf.run(
                sc_local, jobs.wait_for_file, {"file": str(done), "timeout": 60}, num_executors=2
            )
            cluster.shutdown(timeout=60)
        # the refusal itself, typed (the runner's on_security_error), not a node's error
        assert isinstance(info.value, protocol.FrameRejected), repr(info.value)
        assert len(proxies) == 1  # no restart
    finally:
        done.touch()
        for p in proxies:
            p.close()


def test_a_sustained_flood_does_not_lock_real_nodes_out(sc_local, monkeypatch, tmp_path):
    """Hundreds of silent connections a second, for ten seconds and until the job has ended,
    from the moment the control server exists: the job's nodes start, run and finish."""
    import sparktf.driver.builder as runner

    floods = []

    class Flooded(runner.ControlServer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            floods.append((self, mitm.Flood(self.address, rate=300, seconds=60.0)))

    monkeypatch.setattr(runner, "ControlServer", Flooded)
    done = tmp_path / "done"
    try:
        cluster = sparktf.run(sc_local, jobs.wait_for_file, {"file": str(done)}, num_executors=2)
        [(server, flood)] = floods
        assert flood.thread.is_alive()  # the nodes started under the flood
        assert wait_until(lambda: time.monotonic() - flood.start >= 10, timeout=30)
        done.touch()
        assert cluster.shutdown(timeout=60) == {"log_dir": None}
        assert flood.thread.is_alive()  # and finished under it
    finally:
        done.touch()
        for _, f in floods:
            f.stop()
    assert flood.opened >= 2000  # hundreds a second for over ten seconds
    assert server.gate.evicted + server.gate.turned_away + server.gate.timed_out >= 500
    assert server.gate.wrong_secret == 0
