"""sparktf.fs on a Kerberos cluster, without one: who libhdfs connects as, which WebHDFS client
is made, and what a refused connection tells the user (tests/kerberos runs them on a real KDC)."""

import sys

import pytest
from helpers.hadoop_tokens import storage, token

from sparktf.fs import backends, paths

SECURE = """<?xml version="1.0"?><configuration>
<property><name>hadoop.security.authentication</name><value>{}</value></property>
</configuration>"""


@pytest.fixture
def hadoop_conf(tmp_path, monkeypatch):
    """Writes a core-site.xml with hadoop.security.authentication=VALUE; HADOOP_CONF_DIR names it."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    monkeypatch.delenv("HADOOP_TOKEN_FILE_LOCATION", raising=False)
    monkeypatch.setenv("HADOOP_USER_NAME", "alice")

    def write(value):
        (tmp_path / "core-site.xml").write_text(SECURE.format(value))

    return write


@pytest.mark.parametrize("auth", ["kerberos", "KERBEROS"])
def test_with_kerberos_libhdfs_is_given_no_user(hadoop_conf, auth):
    """A named user is a SIMPLE user to Hadoop, with neither ticket nor tokens: a secure
    NameNode refuses it. No user: libhdfs takes the login (ticket cache or tokens)."""
    hadoop_conf(auth)
    assert paths.uses_kerberos()
    assert paths.libhdfs_user() is None


def test_without_kerberos_libhdfs_connects_as_the_hadoop_user(hadoop_conf):
    hadoop_conf("simple")
    assert not paths.uses_kerberos()
    assert paths.libhdfs_user() == "alice"


def test_an_hdfs_delegation_token_in_a_container_means_kerberos(hadoop_conf, monkeypatch, tmp_path):
    """A YARN container of a secure cluster has an HDFS token, maybe no core-site.xml saying
    so."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "none"))
    path = tmp_path / "container_tokens"
    path.write_bytes(storage(token(b"i", b"p", "HDFS_DELEGATION_TOKEN", "127.0.0.1:8020")))
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    assert paths.uses_kerberos()
    assert paths.libhdfs_user() is None


def test_a_container_of_a_simple_cluster_has_tokens_too_and_is_no_kerberos(
    hadoop_conf, monkeypatch, tmp_path
):
    """Every YARN container gets HADOOP_TOKEN_FILE_LOCATION (its AM-RM token at least): on a
    cluster without Kerberos that is no reason to drop the user (seen on the test YARN:
    WebHDFS went as the anonymous dr.who and was refused writing)."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "none"))
    path = tmp_path / "container_tokens"
    path.write_bytes(storage(token(b"i", b"p", "YARN_AM_RM_TOKEN", "127.0.0.1:8030")))
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    assert not paths.uses_kerberos()
    assert paths.libhdfs_user() == "alice"


def test_a_cluster_whose_conf_says_simple_ignores_an_hdfs_token_it_was_handed(
    hadoop_conf, monkeypatch, tmp_path
):
    """A spark-submit run where HADOOP_TOKEN_FILE_LOCATION is set (a launcher in a YARN
    container of its own, an Oozie action) ships those tokens to its containers, an HDFS one
    among them, on a cluster without Kerberos. Taken as Kerberos, WebHDFS then went with the
    token and no user, and a NameNode without security made that the anonymous dr.who, refused
    writing (seen: the YARN recipe in cluster mode, "Permission denied: user=dr.who"). The
    Hadoop configuration, where there is one, decides; a token counts only without it."""
    hadoop_conf("simple")
    path = tmp_path / "container_tokens"
    path.write_bytes(storage(token(b"i", b"p", "HDFS_DELEGATION_TOKEN", "127.0.0.1:8020")))
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    assert not paths.uses_kerberos()
    assert paths.libhdfs_user() == "alice"
    (tmp_path / "core-site.xml").write_text("<configuration></configuration>")  # the default
    assert not paths.uses_kerberos()


def test_with_kerberos_webhdfs_speaks_spnego_or_says_what_to_install(hadoop_conf, monkeypatch):
    hadoop_conf("kerberos")
    try:
        from hdfs.ext.kerberos import KerberosClient
    except ImportError:
        KerberosClient = None
    if KerberosClient is not None:
        client = backends.webhdfs_client("http://127.0.0.1:9")
        assert isinstance(client, KerberosClient)
    # without requests-kerberos: a clear error naming it, not the insecure client
    monkeypatch.setitem(sys.modules, "hdfs.ext.kerberos", None)
    with pytest.raises(paths.HadoopFSError, match="pip install requests-kerberos"):
        backends.webhdfs_client("http://127.0.0.1:9")


def test_without_kerberos_webhdfs_is_the_insecure_client_as_the_user(hadoop_conf):
    import hdfs

    hadoop_conf("simple")
    client = backends.webhdfs_client("http://127.0.0.1:9")
    assert type(client) is hdfs.InsecureClient
    assert client._session.params["user.name"] == "alice"  # (where hdfs 2.7 keeps it)


def test_a_refused_connection_on_kerberos_names_kinit_and_principal(hadoop_conf, monkeypatch):
    """Nothing listens: the error says what sparktf tried and, on a Kerberos cluster, how to
    get a ticket or tokens."""
    hadoop_conf("kerberos")
    monkeypatch.setenv("SPARKTF_HDFS_BACKEND", "webhdfs")
    monkeypatch.setenv("SPARKTF_WEBHDFS_URL", "http://127.0.0.1:9")
    monkeypatch.setitem(sys.modules, "hdfs.ext.kerberos", None)
    monkeypatch.setattr(backends, "_BACKENDS", {})
    with pytest.raises(paths.HadoopFSError) as err:
        backends.backend("hdfs://127.0.0.1:9/x")
    text = str(err.value)
    assert "kinit" in text and "--principal" in text and "--keytab" in text
    hadoop_conf("simple")
    assert "kinit" not in paths.kerberos_hint()
