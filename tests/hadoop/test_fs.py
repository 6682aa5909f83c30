"""sparktf.fs against the running test HDFS (Hadoop 3.5.0 on loopback, see conftest's
hdfs_cluster), through each backend: libhdfs (pyarrow's HadoopFileSystem, with the libhdfs.so
that bin/hdfs-test-cluster.sh builds) and WebHDFS (the hdfs package)."""

import os
import subprocess
import time
import uuid

import pytest

from sparktf import fs

pytestmark = [pytest.mark.hadoop, pytest.mark.timeout(300)]


@pytest.fixture(params=["libhdfs", "webhdfs"])
def backend(request, hdfs, monkeypatch):
    monkeypatch.setenv("SPARKTF_HDFS_BACKEND", request.param)
    if request.param == "libhdfs":
        for k, v in hdfs.libhdfs_env.items():
            monkeypatch.setenv(k, v)
    # (private: sparktf.fs caches a backend per file system and user, with no public reset)
    fs._BACKENDS.clear()
    yield request.param
    fs._BACKENDS.clear()


@pytest.fixture
def root(hdfs, backend):
    path = hdfs.path("t", f"{backend}-{uuid.uuid4().hex[:8]}")
    fs.makedirs(path)
    yield path
    fs._BACKENDS.clear()  # (a test may have cached one for another user)
    fs.delete(path, recursive=True)


def _names_with_tmp(path):
    return [n for n in fs.listdir(path) if "._sparktf_tmp_" in n]


def test_files_round_trip_through_the_backend_asked_for(root, backend):
    fs.write_bytes(root + "/a/b.bin", b"\x00hello" * 1000)
    assert fs.backend(root).name == backend
    assert fs.read_bytes(root + "/a/b.bin") == b"\x00hello" * 1000
    assert fs.listdir(root) == ["a"] and fs.isdir(root + "/a")
    assert fs.exists(root + "/a/b.bin") and not fs.isdir(root + "/a/b.bin")
    with fs.open(root + "/a/b.bin") as f:
        assert f.read(6) == b"\x00hello"
    fs.write_bytes(root + "/a/b.bin", b"new")  # replaces
    assert fs.read_bytes(root + "/a/b.bin") == b"new"
    fs.rename(root + "/a/b.bin", root + "/a/c.bin")
    assert fs.listdir(root + "/a") == ["c.bin"]
    fs.delete(root + "/a", recursive=True)
    assert not fs.exists(root + "/a")
    assert _names_with_tmp(root) == []


def test_a_write_that_fails_leaves_nothing_behind(root):
    with pytest.raises(RuntimeError):
        with fs.open(root + "/half.bin", "wb") as f:
            f.write(b"partial")
            raise RuntimeError("the writer died")
    assert fs.listdir(root) == []


@pytest.mark.tf
def test_directories_upload_and_download_whole(root, tmp_path):
    src = tmp_path / "model"
    (src / "variables").mkdir(parents=True)
    (src / "saved_model.pb").write_bytes(b"pb" * 5000)
    (src / "variables" / "variables.index").write_bytes(b"idx")
    fs.upload(str(src), root + "/export")
    assert fs.listdir(root + "/export") == ["saved_model.pb", "variables"]
    (src / "saved_model.pb").write_bytes(b"v2")
    fs.upload(str(src), root + "/export")  # replaces the whole directory at once
    assert fs.read_bytes(root + "/export/saved_model.pb") == b"v2"
    assert _names_with_tmp(root) == []
    fs.download(root + "/export", str(tmp_path / "back"))
    assert (tmp_path / "back" / "variables" / "variables.index").read_bytes() == b"idx"
    assert fs.list_files(root) == [
        root + "/export/saved_model.pb",
        root + "/export/variables/variables.index",
    ]


@pytest.mark.tf
def test_an_export_that_fails_writes_nothing(root):
    with pytest.raises(ValueError):
        with fs.export_dir(root + "/model") as local:
            open(os.path.join(local, "saved_model.pb"), "wb").write(b"half")
            raise ValueError("model.save failed")
    assert not fs.exists(root + "/model")
    with fs.export_dir(root + "/model") as local:
        open(os.path.join(local, "saved_model.pb"), "wb").write(b"whole")
    assert fs.read_bytes(root + "/model/saved_model.pb") == b"whole"


def test_a_synced_dir_mirrors_up_resumes_and_follows_down(root):
    remote = root + "/ckpt"
    with fs.SyncedDir(remote) as local:
        for name in ("ckpt-1.index", "ckpt-1.data", "checkpoint"):
            open(os.path.join(local, name), "w").write(name)
        os.makedirs(os.path.join(local, "logs"))
        open(os.path.join(local, "logs", "events"), "w").write("e")
    assert fs.listdir(remote) == ["checkpoint", "ckpt-1.data", "ckpt-1.index", "logs"]
    # A second run starts from what is there, and old files removed locally go there too.
    with fs.SyncedDir(remote) as local:
        assert sorted(os.listdir(local)) == ["checkpoint", "ckpt-1.data", "ckpt-1.index", "logs"]
        os.unlink(os.path.join(local, "ckpt-1.data"))
        open(os.path.join(local, "ckpt-2.data"), "w").write("2")
    assert fs.listdir(remote) == ["checkpoint", "ckpt-1.index", "ckpt-2.data", "logs"]
    # A follower sees new files within its interval.
    with fs.SyncedDir(remote, direction="down", interval=0.2) as follower:
        fs.write_bytes(remote + "/ckpt-3.data", b"3")
        deadline = time.monotonic() + 10
        while not os.path.exists(os.path.join(follower, "ckpt-3.data")):
            assert time.monotonic() < deadline, "the follower never fetched ckpt-3.data"
            time.sleep(0.1)


def test_a_synced_dir_pushes_every_interval_while_open(root):
    remote = root + "/logs"
    with fs.SyncedDir(remote, interval=0.2, download_first=False) as local:
        open(os.path.join(local, "events.1"), "w").write("x")
        deadline = time.monotonic() + 10
        while not fs.exists(remote + "/events.1"):
            assert time.monotonic() < deadline, "events.1 never reached HDFS while open"
            time.sleep(0.1)


# --------------------------------------------------------------------------- bad input
def test_a_missing_file_names_the_path_and_the_cause(root):
    t = time.monotonic()
    with pytest.raises(fs.HadoopFSError, match=r"/nothing\.bin: open no such file"):
        fs.read_bytes(root + "/nothing.bin")
    with pytest.raises(fs.HadoopFSError, match=r"/nothing: list failed: no such file"):
        fs.listdir(root + "/nothing")
    with pytest.raises(fs.HadoopFSError, match=r"/nothing: download failed: no such file"):
        fs.download(root + "/nothing", "/tmp/unused-sparktf")
    assert time.monotonic() - t < 5


def test_a_namenode_that_is_down_is_an_error_within_seconds(backend):
    with __import__("socket").socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.monotonic()
    with pytest.raises(fs.HadoopFSError) as err:
        fs.exists(f"hdfs://127.0.0.1:{port}/data/part-0")
    assert time.monotonic() - t < 15
    msg = str(err.value)
    assert f"hdfs://127.0.0.1:{port}/data/part-0: cannot reach HDFS" in msg
    assert "refused" in msg.lower() or "did not answer" in msg.lower(), msg


def test_an_unreachable_webhdfs_port_names_the_url(hdfs, monkeypatch):
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SPARKTF_HDFS_BACKEND", "webhdfs")
    monkeypatch.setenv("SPARKTF_WEBHDFS_URL", f"http://127.0.0.1:{port}")
    fs._BACKENDS.clear()
    t = time.monotonic()
    with pytest.raises(fs.HadoopFSError, match=rf"webhdfs at http://127\.0\.0\.1:{port}"):
        fs.exists(hdfs.path("x"))
    assert time.monotonic() - t < 15
    fs._BACKENDS.clear()


def test_a_permission_error_names_the_path(root, monkeypatch):
    locked = root + "/locked"
    fs.makedirs(locked)
    fs.write_bytes(locked + "/secret", b"s")
    # Taken away from everyone but its owner (this process's user, who started HDFS); set
    # over WebHDFS, since pyarrow's HadoopFileSystem has no chmod.
    import hdfs as hdfs_pkg

    # (private: sparktf.fs has no public splitter; the path part is what the daemon's API takes)
    hdfs_pkg.InsecureClient(
        os.environ["SPARKTF_WEBHDFS_URL"], user=fs.hadoop_user()
    ).set_permission(fs._split(locked)[3], "700")
    monkeypatch.setenv("HADOOP_USER_NAME", "nobody")
    fs._BACKENDS.clear()
    with pytest.raises(fs.HadoopFSError, match=r"/locked/secret: .*permission denied"):
        fs.read_bytes(locked + "/secret")
    with pytest.raises(fs.HadoopFSError, match=r"permission denied"):
        fs.write_bytes(locked + "/mine", b"m")
    monkeypatch.delenv("HADOOP_USER_NAME")
    fs._BACKENDS.clear()


def test_the_test_cluster_script_reports_its_state(hdfs):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "bin", "hdfs-test-cluster.sh")
    env = dict(os.environ, SPARKTF_HDFS_DIR=os.path.dirname(hdfs.env["HADOOP_CONF_DIR"]))
    out = subprocess.run([script, "status"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and f"export SPARKTF_TEST_HDFS={hdfs.url}" in out.stdout
    again = subprocess.run([script, "start"], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "already running" in again.stderr
    other = dict(os.environ, SPARKTF_HDFS_DIR=os.path.join(env["SPARKTF_HDFS_DIR"], "none"))
    assert (
        subprocess.run([script, "status"], env=other, capture_output=True, timeout=60).returncode
        == 1
    )


def _export(path, content, fingerprint=None):
    """A stand-in SavedModel (the files its identity reads; no TensorFlow here) put at
    ``path`` by fs.export_dir."""
    with fs.export_dir(path) as local:
        os.makedirs(os.path.join(local, "variables"))
        open(os.path.join(local, "saved_model.pb"), "wb").write(content)
        open(os.path.join(local, "variables", "variables.index"), "wb").write(content * 2)
        if fingerprint is not None:
            open(os.path.join(local, "fingerprint.pb"), "wb").write(fingerprint)


@pytest.mark.tf
def test_an_export_whose_final_rename_fails_keeps_the_old_model(root, backend, monkeypatch):
    """export_dir deleted the old model on HDFS before renaming the new one in: a rename that
    failed lost both. The old one is renamed aside first and put back when the new one cannot
    go in."""
    model = root + "/model"
    _export(model, b"old")
    cls = type(fs.backend(model))
    real, target, tried = cls.rename, fs._split(model)[3], []

    def rename(self, src, dst):
        # Faked: nothing on a NameNode fails this one rename and not the one before it in the
        # same directory (the old model's rename aside) - a failover or a quota would in life.
        if dst == target:
            tried.append(src)
            if len(tried) == 1:
                raise OSError("injected: the NameNode failed over")
        return real(self, src, dst)

    monkeypatch.setattr(cls, "rename", rename)
    with pytest.raises(fs.HadoopFSError, match="injected"):
        _export(model, b"new")
    monkeypatch.undo()
    assert len(tried) == 2  # the new one's rename in, then the old one's back
    assert fs.read_bytes(model + "/saved_model.pb") == b"old"
    assert fs.read_bytes(model + "/variables/variables.index") == b"oldold"
    assert fs.listdir(root) == ["model"]  # no temporary copy left beside it
    _export(model, b"new")
    assert fs.read_bytes(model + "/saved_model.pb") == b"new" and fs.listdir(root) == ["model"]


@pytest.mark.tf
def test_stat_and_the_export_identity_tell_a_new_export_on_hdfs(root, backend):
    """What sparktf.predict keys its models by, on HDFS: the same export keeps its identity;
    another fingerprint (other weights, the same file sizes) is another export at once; the
    same bytes exported again are another export once the clock moved (libhdfs gives whole
    seconds; WebHDFS milliseconds)."""
    from sparktf.batch_prediction import export_identity

    model = root + "/model"
    assert fs.stat(model) is None and export_identity(model) is None
    _export(model, b"graph", fingerprint=b"fp-1")
    kind, size, mtime = fs.stat(model + "/saved_model.pb")
    assert (kind, size) == ("file", 5) and mtime > 0
    assert fs.stat(model)[0] == "dir"
    first = export_identity(model)
    assert first is not None and export_identity(model) == first
    _export(model, b"graph", fingerprint=b"fp-2")
    second = export_identity(model)
    assert second != first
    time.sleep(1.1)  # past the granularity of libhdfs's modification times
    _export(model, b"graph", fingerprint=b"fp-2")
    assert export_identity(model) not in (first, second)
