"""sparktf.fs's path rules, without HDFS: which paths are Hadoop paths, and absolute_path as
TensorFlowOnSpark's ctx.absolute_path resolves them."""

import os

import pytest

from sparktf import fs


@pytest.mark.parametrize(
    "path,hadoop",
    [
        ("hdfs://nn:8020/x", True),
        ("hdfs:///x", True),
        ("viewfs://c/x", True),
        ("webhdfs://nn:9870/x", True),
        ("/tmp/x", False),
        ("x", False),
        ("file:///x", False),
        ("s3a://b/x", False),
        (None, False),
    ],
)
def test_which_paths_are_hadoop_paths(path, hadoop):
    assert fs.is_hadoop(path) is hadoop


@pytest.mark.parametrize(
    "path,default,expected",
    [
        ("hdfs://other:1/data", "hdfs://nn:8020", "hdfs://other:1/data"),
        ("/data/mnist", "hdfs://nn:8020", "hdfs://nn:8020/data/mnist"),
        ("mnist/model", "hdfs://nn:8020/", "hdfs://nn:8020/user/alice/mnist/model"),
        ("file:///tmp/x", "hdfs://nn:8020", "file:///tmp/x"),
    ],
)
def test_absolute_path_resolves_against_the_default_fs_and_home(path, default, expected):
    assert fs.absolute_path(path, default=default, user="alice") == expected


def test_with_a_local_default_fs_paths_stay_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for default in ("file:///", ""):
        assert fs.absolute_path("model", default=default) == f"file://{tmp_path}/model"
        assert fs.absolute_path("/abs/m", default=default) == "file:///abs/m"


def test_a_relative_local_path_goes_under_the_drivers_working_dir(tmp_path, monkeypatch):
    """As TensorFlowOnSpark's ctx.absolute_path: on a node (whose working directory is Spark's
    executor directory) a relative local path resolves where the driver runs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARKTF_WORKING_DIR", "/home/me/job")
    assert fs.working_dir() == "/home/me/job"
    assert fs.absolute_path("model/../m2", default="file://") == "file:///home/me/job/m2"
    monkeypatch.delenv("SPARKTF_WORKING_DIR")
    assert fs.absolute_path("m", default="file://") == f"file://{tmp_path}/m"


def test_the_default_fs_comes_from_the_driver_or_hadoop_conf(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARKTF_DEFAULT_FS", raising=False)
    (tmp_path / "core-site.xml").write_text(
        "<configuration><property><name>fs.defaultFS</name><value>hdfs://conf:9000</value>"
        "</property></configuration>"
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert fs.default_fs() == "hdfs://conf:9000"
    assert fs.absolute_path("/d", user="u") == "hdfs://conf:9000/d"
    monkeypatch.setenv("SPARKTF_DEFAULT_FS", "hdfs://driver:8020")
    assert fs.absolute_path("d", user="u") == "hdfs://driver:8020/user/u/d"


def test_a_hostless_path_without_a_default_fs_says_what_to_set(monkeypatch):
    monkeypatch.delenv("SPARKTF_DEFAULT_FS", raising=False)
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    with pytest.raises(fs.HadoopFSError, match="no NameNode in the path.*HADOOP_CONF_DIR"):
        fs.exists("hdfs:///data")


def test_bad_arguments_are_clear(tmp_path):
    with pytest.raises(fs.HadoopFSError, match="non-empty str"):
        fs.absolute_path(3)
    with pytest.raises(ValueError, match="'rb' and 'wb'"):
        with fs.open(str(tmp_path / "x"), "r"):
            pass
    with pytest.raises(ValueError, match="direction"):
        fs.SyncedDir("/tmp/x", direction="sideways")


def test_local_paths_work_the_same_way(tmp_path):
    target = str(tmp_path / "d" / "f.bin")
    fs.write_bytes(target, b"abc")
    assert fs.read_bytes(target) == b"abc" and fs.listdir(str(tmp_path / "d")) == ["f.bin"]
    with fs.export_dir(str(tmp_path / "model")) as local:
        open(os.path.join(local, "saved_model.pb"), "w").write("m")
    assert fs.list_files(str(tmp_path)) == [
        str(tmp_path / "d" / "f.bin"),
        str(tmp_path / "model" / "saved_model.pb"),
    ]
    with fs.SyncedDir(str(tmp_path / "ck")) as local:
        assert local == str(tmp_path / "ck")


def test_every_call_takes_path_objects(tmp_path):
    """pathlib paths work wherever a str does (they are local paths)."""
    d = tmp_path / "d"
    fs.makedirs(d)
    fs.write_bytes(d / "f.bin", b"abc")
    with fs.open(d / "g.bin", "wb") as f:
        f.write(b"g")
    assert fs.exists(d / "f.bin") and fs.isdir(d) and fs.read_bytes(d / "f.bin") == b"abc"
    assert fs.listdir(d) == ["f.bin", "g.bin"]
    assert fs.list_files(d) == [str(d / "f.bin"), str(d / "g.bin")]
    fs.rename(d / "g.bin", d / "h.bin")
    fs.upload(d / "h.bin", tmp_path / "up.bin")
    fs.download(tmp_path / "up.bin", tmp_path / "down.bin")
    assert fs.read_bytes(tmp_path / "down.bin") == b"g"
    fs.delete(tmp_path / "down.bin")
    with fs.export_dir(tmp_path / "model") as local:
        open(os.path.join(local, "saved_model.pb"), "w").write("m")
    assert fs.exists(tmp_path / "model" / "saved_model.pb")
    with fs.SyncedDir(tmp_path / "ck") as local:
        assert local == str(tmp_path / "ck")
    assert fs.absolute_path(d, default="file:///") == f"file://{d}"


@pytest.mark.parametrize(
    "call",
    [
        lambda: fs.exists(None),
        lambda: fs.isdir(3),
        lambda: fs.listdir(b"/tmp"),
        lambda: fs.makedirs(""),
        lambda: fs.read_bytes(None),
        lambda: fs.write_bytes(None, b""),
        lambda: fs.delete(None),
        lambda: fs.rename(None, "/tmp/x"),
        lambda: fs.list_files(1.5),
        lambda: fs.upload(None, "/tmp/x"),
        lambda: fs.download("/tmp", None),
        lambda: fs.SyncedDir(None),
    ],
)
def test_a_path_of_the_wrong_type_is_named(call):
    with pytest.raises(TypeError, match=r"must be a non-empty str or os\.PathLike"):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda p: fs.write_bytes(p, b"abc"),
        lambda p: fs.exists(p),
        lambda p: fs.read_bytes(p),
        lambda p: fs.makedirs(p),
        lambda p: fs.listdir(p),
    ],
)
@pytest.mark.parametrize("url", ["s3://bucket/x.bin", "gs://bucket/x.bin", "s3a://bucket/x"])
def test_a_url_of_another_filesystem_is_refused_not_taken_as_a_local_path(
    tmp_path, monkeypatch, call, url
):
    """fs.write_bytes("s3://bucket/x") wrote ./s3:/bucket/x on the local disk, and
    fs.exists() of it said False: a URL sparktf.fs cannot reach is now an error that says
    which schemes it reads."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(fs.HadoopFSError, match=r"hdfs://, viewfs://, webhdfs:// or local"):
        call(url)
    assert not os.listdir(tmp_path)


# ------------------------------------------------------- an export whose last step fails
def _model_files(root):
    return {
        os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
        for d, _, files in os.walk(root)
        for f in files
    }


def _export(path, content):
    with fs.export_dir(path) as local:
        os.makedirs(os.path.join(local, "variables"))
        open(os.path.join(local, "saved_model.pb"), "wb").write(content)
        open(os.path.join(local, "variables", "variables.index"), "wb").write(content * 2)


def _failing(real, fails):
    """``os.rename``/``os.replace`` raising for the calls ``fails(src, dst)`` picks. Faked: no
    local filesystem condition fails one rename and not its neighbour in the same folder (and
    the tests run as root, whom permissions do not stop)."""

    def rename(src, dst, *args, **kwargs):
        if fails(str(src), str(dst)):
            raise OSError(5, "Input/output error (injected)")
        return real(src, dst, *args, **kwargs)

    return rename


def test_an_export_whose_final_rename_fails_keeps_the_old_model(tmp_path, monkeypatch):
    """export_dir removed the old model, then renamed the new one in: when that rename failed,
    both were gone. The old one is now renamed aside, the new one in, and only then is the old
    one removed; a failing rename puts the old one back."""
    path = str(tmp_path / "model")
    _export(path, b"old")
    before = _model_files(path)
    tried = []  # the first rename to the path (the new export's) fails; the next ones work

    def first_one_in(src, dst):
        tried.append(dst == path)
        return dst == path and tried.count(True) == 1

    for name in ("rename", "replace"):
        monkeypatch.setattr(os, name, _failing(getattr(os, name), first_one_in))
    with pytest.raises(OSError, match="injected"):
        _export(path, b"new")
    monkeypatch.undo()
    assert _model_files(path) == before
    assert os.listdir(tmp_path) == ["model"]  # nothing of the failed export left beside it
    _export(path, b"new")  # and the next export goes through
    assert _model_files(path)["saved_model.pb"] == b"new"
    assert os.listdir(tmp_path) == ["model"]


def test_an_old_model_that_cannot_be_put_back_is_named_where_it_was_kept(tmp_path, monkeypatch):
    path = str(tmp_path / "model")
    _export(path, b"old")
    before = _model_files(path)
    for name in ("rename", "replace"):  # the new model's rename in, and the old one's back
        monkeypatch.setattr(os, name, _failing(getattr(os, name), lambda src, dst: dst == path))
    with pytest.raises(fs.HadoopFSError, match="what was there is kept at") as err:
        _export(path, b"new")
    monkeypatch.undo()
    kept = str(err.value).split("kept at ")[1].split()[0].rstrip(";,.:")
    assert os.path.dirname(kept) == str(tmp_path) and _model_files(kept) == before
    assert not os.path.exists(path)


def test_stat_gives_kind_size_and_time_or_none(tmp_path):
    fs.write_bytes(tmp_path / "f.bin", b"abcd")
    kind, size, mtime = fs.stat(tmp_path / "f.bin")
    assert (kind, size, mtime) == ("file", 4, os.stat(tmp_path / "f.bin").st_mtime_ns)
    assert fs.stat(str(tmp_path))[0] == "dir"
    assert fs.stat(tmp_path / "none") is None
    assert fs.stat(tmp_path / "f.bin" / "under-a-file") is None


def _conf(tmp_path, name, props):
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props)
    (tmp_path / name).write_text(f"<configuration>{body}</configuration>")


def test_a_viewfs_path_resolves_through_its_mount_table_longest_link_first(tmp_path, monkeypatch):
    from sparktf.fs.paths import viewfs_target

    _conf(
        tmp_path,
        "core-site.xml",
        [
            ("fs.viewfs.mounttable.c.link./data", "hdfs://ns1/warehouse"),
            ("fs.viewfs.mounttable.c.link./data/hot", "hdfs://ns2/ssd/"),
            ("fs.viewfs.mounttable.c.link./user", "hdfs://nn:8020/user"),
            ("fs.viewfs.mounttable.other.linkFallback", "hdfs://nn3/"),
        ],
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert viewfs_target("viewfs://c/data/x/y") == "hdfs://ns1/warehouse/x/y"
    assert viewfs_target("viewfs://c/data") == "hdfs://ns1/warehouse"
    assert viewfs_target("viewfs://c/data/hot/z") == "hdfs://ns2/ssd/z"
    assert viewfs_target("viewfs://other/a/b") == "hdfs://nn3/a/b"
    # /data is no prefix of /datahot (whole components only), and c has no fallback
    with pytest.raises(fs.HadoopFSError, match=r"viewfs://c/datahot/z.*fs\.viewfs\.mounttable"):
        viewfs_target("viewfs://c/datahot/z")


def test_a_mount_table_kept_in_its_own_file_is_read_through_xinclude(tmp_path, monkeypatch):
    from sparktf.fs.paths import viewfs_target

    _conf(tmp_path, "mount-table.xml", [("fs.viewfs.mounttable.c.link./d", "hdfs://ns1/d")])
    (tmp_path / "core-site.xml").write_text(
        '<configuration xmlns:xi="http://www.w3.org/2001/XInclude">'
        '<xi:include href="mount-table.xml"/></configuration>'
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert viewfs_target("viewfs://c/d/f") == "hdfs://ns1/d/f"


def test_a_nameservices_webhdfs_addresses_come_from_hdfs_site(tmp_path, monkeypatch):
    from sparktf.fs.paths import nameservice_http

    _conf(
        tmp_path,
        "hdfs-site.xml",
        [
            ("dfs.nameservices", "ns1,solo,bare"),
            ("dfs.ha.namenodes.ns1", "nn1, nn2"),
            ("dfs.namenode.http-address.ns1.nn1", "a:9870"),
            ("dfs.namenode.http-address.ns1.nn2", "b:9870"),
            ("dfs.namenode.http-address.solo", "c:9870"),
        ],
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert nameservice_http("ns1") == ["a:9870", "b:9870"]
    assert nameservice_http("solo") == ["c:9870"]
    assert nameservice_http("namenode.example.com") is None  # a host, not a nameservice
    with pytest.raises(fs.HadoopFSError, match=r"dfs\.namenode\.http-address\.bare"):
        nameservice_http("bare")
