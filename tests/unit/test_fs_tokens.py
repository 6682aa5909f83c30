"""Delegation tokens a secure YARN hands its containers (HADOOP_TOKEN_FILE_LOCATION), read for
WebHDFS: Hadoop's token storage file as Hadoop's Credentials.writeTokenStorageToStream writes
it (the WRITABLE format), built here byte for byte from Hadoop's WritableUtils rules."""

import base64

import pytest
from helpers.hadoop_tokens import storage, token, vlong

from sparktf.fs import backends, paths, tokens


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 70000, 2**40, -1, -112, -113, -200])
def test_hadoop_variable_length_ints_are_read_as_hadoop_writes_them(value):
    data = vlong(value) + b"rest"
    assert tokens._vint(data, 0) == (value, len(data) - 4)


def test_the_hdfs_token_of_the_namenode_is_found_and_url_encoded(tmp_path, monkeypatch):
    ident = bytes(range(200))  # (a length over 127: a multi-byte vint)
    mine = token(ident, b"p" * 20, "HDFS_DELEGATION_TOKEN", "127.0.0.1:8020")
    other = token(b"x", b"y", "HDFS_DELEGATION_TOKEN", "10.0.0.9:8020")
    rm = token(b"r", b"s", "RM_DELEGATION_TOKEN", "127.0.0.1:8032")
    path = tmp_path / "container_tokens"
    path.write_bytes(storage(rm, other, mine))
    assert [k for k, _, _ in tokens.read_tokens(path.read_bytes())] == [
        "RM_DELEGATION_TOKEN",
        "HDFS_DELEGATION_TOKEN",
        "HDFS_DELEGATION_TOKEN",
    ]
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    encoded = tokens.hdfs_delegation_token("127.0.0.1", 8020)
    assert "=" not in encoded and "+" not in encoded and "/" not in encoded
    assert base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)) == mine
    assert tokens.hdfs_delegation_token("127.0.0.1", 9000) is None  # two HDFS tokens, neither


def test_an_ha_nameservices_token_is_found_by_its_logical_service(tmp_path, monkeypatch):
    """A secure HA cluster's HDFS token names the nameservice (``ha-hdfs:ns1``), not a
    NameNode's address: hdfs://ns1/ paths take it."""
    ha = token(b"i", b"p", "HDFS_DELEGATION_TOKEN", "ha-hdfs:ns1")
    other = token(b"x", b"y", "HDFS_DELEGATION_TOKEN", "ha-hdfs:ns2")
    path = tmp_path / "container_tokens"
    path.write_bytes(storage(other, ha))
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    encoded = tokens.hdfs_delegation_token("ns1", None)
    assert base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)) == ha


def test_a_container_with_an_hdfs_token_reaches_webhdfs_with_it(tmp_path, monkeypatch):
    """No ticket in a container: WebHDFS takes the token as its delegation parameter."""
    path = tmp_path / "container_tokens"
    raw = token(b"id", b"pw", "HDFS_DELEGATION_TOKEN", "127.0.0.1:8020")
    path.write_bytes(storage(raw))
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    client = backends.webhdfs_client("http://127.0.0.1:9870", ("127.0.0.1", 8020))
    assert client._session.params["delegation"] == tokens.url_string(raw)
    assert "user.name" not in client._session.params


def test_a_token_file_sparktf_cannot_read_says_to_use_libhdfs(tmp_path, monkeypatch):
    path = tmp_path / "container_tokens"
    path.write_bytes(b"HDTS\x01protobuf")
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    with pytest.raises(paths.HadoopFSError, match="version 1.*SPARKTF_HDFS_BACKEND=libhdfs"):
        tokens.hdfs_delegation_token("127.0.0.1", 8020)
