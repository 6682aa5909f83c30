"""Delegation tokens that Spark renews, relayed by the driver to running TF processes
(sparktf.driver.credentials, the ``tokens`` message): the node keeps them in a file of its own
(sparktf.fs.tokens.install) that HADOOP_TOKEN_FILE_LOCATION names from then on, and its
WebHDFS backend remakes its client with them. The WebHDFS here is a real HTTP server on
loopback that answers what a NameNode answers and records each request's ``delegation``;
tests/kerberos/test_secure.py runs the whole relay on a real secure cluster."""

import json
import os
import stat
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers.hadoop_tokens import storage, text, token, vlong

from sparktf.common import messages
from sparktf.driver import credentials
from sparktf.fs import backends, paths, tokens

OLD = token(b"old-id", b"pw", "HDFS_DELEGATION_TOKEN", "127.0.0.1:8020")
NEW = token(b"new-id", b"pw", "HDFS_DELEGATION_TOKEN", "127.0.0.1:8020")


@pytest.fixture(autouse=True)
def _no_token_file_then_as_before(monkeypatch):
    """tokens.install and tokens.adopt set HADOOP_TOKEN_FILE_LOCATION themselves (as they must,
    in a node): start every test without it, and have monkeypatch restore it, or its absence,
    after. (``monkeypatch.delenv`` of an unset variable alone records nothing to undo: the
    first version of this file leaked a fake token file into every later test of the session.)"""
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", "-")
    monkeypatch.delenv("HADOOP_TOKEN_FILE_LOCATION")


def test_relayed_tokens_become_the_process_s_in_a_private_file(tmp_path, monkeypatch):
    container = tmp_path / "container_tokens"
    container.write_bytes(storage(OLD))
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(container))
    work = tmp_path / "node"
    work.mkdir(mode=0o700)
    before = tokens.source()
    path = tokens.install(storage(NEW), str(work))
    assert os.environ["HADOOP_TOKEN_FILE_LOCATION"] == path == str(work / tokens.RELAYED)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert tokens.hdfs_delegation_token("127.0.0.1", 8020) == tokens.url_string(NEW)
    assert container.read_bytes() == storage(OLD)  # the container's own file is left alone
    assert tokens.source() != before
    again = tokens.source()
    tokens.install(storage(OLD), str(work))  # a second renewal replaces the first
    assert tokens.source() != again
    assert tokens.hdfs_delegation_token("127.0.0.1", 8020) == tokens.url_string(OLD)
    assert sorted(os.listdir(work)) == [tokens.RELAYED]  # nothing half-written left


def test_what_is_not_a_token_file_is_refused_and_nothing_changes(tmp_path, monkeypatch):
    with pytest.raises(paths.HadoopFSError, match="HDTS"):
        tokens.install(b"not tokens", str(tmp_path))
    assert os.listdir(tmp_path) == []
    assert "HADOOP_TOKEN_FILE_LOCATION" not in os.environ


def test_a_symlink_planted_as_the_tokens_file_is_replaced_not_followed(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    work = tmp_path / "node"
    work.mkdir()
    (work / tokens.RELAYED).symlink_to(victim)
    tokens.install(storage(NEW), str(work))
    assert victim.read_bytes() == b"keep"
    assert not (work / tokens.RELAYED).is_symlink()


class _NameNode(BaseHTTPRequestHandler):
    """WebHDFS's GETFILESTATUS, recording the delegation token each request carries."""

    seen: list = []

    def do_GET(self):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        type(self).seen.append(query.get("delegation", [None])[0])
        body = json.dumps(
            {"FileStatus": {"type": "DIRECTORY", "length": 0, "modificationTime": 0}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def webhdfs():
    _NameNode.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NameNode)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_webhdfs_takes_the_relayed_tokens_at_its_next_call(tmp_path, monkeypatch, webhdfs):
    """Before the relay, a node's WebHDFS client kept the token it was made with until the
    process ended: past the token's lifetime every call failed ("token is expired")."""
    container = tmp_path / "container_tokens"
    container.write_bytes(storage(OLD))
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(container))
    fs = backends._WebHDFS(webhdfs, ("127.0.0.1", 8020))
    assert fs.info("/data") == ("dir", 0)
    assert set(_NameNode.seen) == {tokens.url_string(OLD)}
    work = tmp_path / "node"
    work.mkdir()
    tokens.install(storage(NEW), str(work))
    assert fs.info("/data") == ("dir", 0)
    assert _NameNode.seen[-1] == tokens.url_string(NEW)


def test_the_tokens_message_is_in_the_catalogue():
    message = messages.make("tokens", data=storage(NEW))
    assert messages.CATALOGUE["tokens"].receiver == "node"
    assert message["data"] == storage(NEW)


class _NoJVM:
    """A context whose JVM is not this process's (Spark Connect's): nothing to relay."""


def test_without_the_driver_s_jvm_the_relay_reads_nothing_and_stops_looking():
    relay = credentials.TokenRelay(_NoJVM(), poll_secs=0)
    assert relay.poll(0.0) is None and relay.tokens is None
    assert relay._off  # (no read again: the monitor polls every tick)


def _hdfs_token(ident_id, issue_ms, max_ms):
    """An HDFS delegation token whose identifier is as Hadoop writes it: version 0, owner,
    renewer, real user, issue and maximum dates, sequence number, master key id."""
    ident = b"\x00" + text(b"sparktf") + text(b"yarn") + text(b"")
    ident += vlong(issue_ms) + vlong(max_ms) + vlong(ident_id) + vlong(1)
    return token(ident, b"pw", "HDFS_DELEGATION_TOKEN", "127.0.0.1:8020")


def test_the_maximum_date_is_read_from_each_hdfs_token():
    rm = token(b"r", b"s", "RM_DELEGATION_TOKEN", "127.0.0.1:8032")
    data = storage(rm, _hdfs_token(7, 1_700_000_000_000, 1_700_000_060_000))
    assert tokens.max_dates(data) == [1_700_000_060_000]


def test_an_executor_adopts_the_shipped_tokens_only_once_its_own_are_dead(tmp_path, monkeypatch):
    """sparktf.predict's scoring on a YARN container older than its tokens' maximum lifetime:
    the tokens the driver shipped with the call; before that, the container's own (the
    shipped ones may be older than they look)."""
    monkeypatch.setattr(tokens, "_adopted", None)
    container = tmp_path / "container_tokens"
    container.write_bytes(storage(_hdfs_token(1, 1_000, 61_000)))
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(container))
    shipped = storage(_hdfs_token(2, 50_000, 500_000))
    assert not tokens.adopt(shipped, now_ms=60_000)
    assert os.environ["HADOOP_TOKEN_FILE_LOCATION"] == str(container)
    assert tokens.adopt(shipped, now_ms=61_001)
    path = os.environ["HADOOP_TOKEN_FILE_LOCATION"]
    assert path != str(container) and os.path.dirname(os.path.dirname(path)) == str(tmp_path)
    assert open(path, "rb").read() == shipped
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert tokens.adopt(shipped, now_ms=61_002)  # once: no second directory
    assert len([p for p in os.listdir(tmp_path) if p.startswith("sparktf-tokens-")]) == 1
    assert not tokens.adopt(None) and not tokens.adopt(b"")


def test_the_tokens_go_sealed_under_the_job_s_secret(tmp_path):
    """Delegation tokens are bearer credentials; the control channel's frames are MAC'd, not
    encrypted: the ``tokens`` message's bytes show nothing of them, and only a holder of the
    same secret opens them."""
    from sparktf.common import protocol

    secret, data = protocol.new_secret(), storage(NEW)
    sealed = protocol.seal_payload(secret, messages.TOKENS_PURPOSE, data)
    assert b"new-id" not in sealed and b"HDFS_DELEGATION_TOKEN" not in sealed
    assert protocol.open_payload(secret, messages.TOKENS_PURPOSE, sealed) == data
    assert protocol.seal_payload(secret, messages.TOKENS_PURPOSE, data) != sealed  # fresh nonce
    with pytest.raises(protocol.FrameRejected, match="another job's secret"):
        protocol.open_payload(protocol.new_secret(), messages.TOKENS_PURPOSE, sealed)
    altered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(protocol.FrameRejected, match="altered"):
        protocol.open_payload(secret, messages.TOKENS_PURPOSE, altered)
