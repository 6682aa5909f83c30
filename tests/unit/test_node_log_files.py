"""The nodes' log files on the driver (spark.sparktf.nodeLogDir, sparktf.driver.history) are
private to the user who runs the job: directories 0700 and owned by that user (a symlink or
another user's directory in their place is refused, naming it), files 0600 opened without
following a symlink, each file capped (spark.sparktf.nodeLogMaxBytes) and only the last jobs
kept (spark.sparktf.nodeLogKeepJobs). Real files, no Spark."""

import getpass
import os
import stat
import tempfile
import time

import pytest

from sparktf.common.settings import Settings
from sparktf.driver import history
from sparktf.driver.history import NodeLogs
from sparktf.errors import UnsafePathError

JOB = "sparktf-0123456789ab"


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_directories_are_0700_and_files_0600(tmp_path):
    logs = NodeLogs(str(tmp_path / "logs"), JOB)
    logs.write(0, "worker:0", "hello")
    logs.close()
    path = logs.path(0, "worker:0")
    assert open(path).read() == "hello\n"
    assert mode(path) == 0o600
    for d in (tmp_path / "logs", tmp_path / "logs" / JOB, os.path.dirname(path)):
        assert mode(d) == 0o700, d


def test_the_default_root_is_private_even_where_an_old_one_was_0755(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = tmp_path / f"sparktf-{getpass.getuser()}"
    (base / "logs").mkdir(parents=True, mode=0o755)
    os.chmod(base, 0o755)
    logs = NodeLogs(None, JOB)
    logs.write(0, "chief:0", "x")
    logs.close()
    assert logs.job_dir == str(base / "logs" / JOB)
    assert mode(base) == 0o700 and mode(base / "logs") == 0o700


def test_a_symlink_planted_as_the_default_root_is_refused_and_never_followed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    base = tmp_path / f"sparktf-{getpass.getuser()}"
    base.symlink_to(target)
    with pytest.raises(UnsafePathError) as err:
        NodeLogs(None, JOB)
    assert str(base) in str(err.value)
    assert "symlink" in str(err.value) and "spark.sparktf.nodeLogDir" in str(err.value)
    assert list(target.iterdir()) == [] and mode(target) == 0o755


def test_a_symlink_given_as_node_log_dir_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "logs").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafePathError, match="symlink"):
        NodeLogs(str(tmp_path / "logs"), JOB)
    assert list((tmp_path / "real").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_another_users_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = tmp_path / f"sparktf-{getpass.getuser()}"
    base.mkdir(mode=0o777)
    os.chown(base, 65534, 65534)  # nobody's
    with pytest.raises(UnsafePathError) as err:
        NodeLogs(None, JOB)
    assert str(base) in str(err.value) and "owned by uid 65534" in str(err.value)
    assert list(base.iterdir()) == []


def test_a_log_file_that_is_a_symlink_is_not_followed(tmp_path, caplog):
    logs = NodeLogs(str(tmp_path / "logs"), JOB)
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    os.makedirs(os.path.dirname(logs.path(0, "worker:0")))
    os.symlink(victim, logs.path(0, "worker:0"))
    logs.write(0, "worker:0", "appended?")
    logs.close()
    assert victim.read_text() == "mine\n"
    assert "cannot write the nodes' log files" in caplog.text


def test_a_file_past_its_cap_is_rotated_with_a_line_saying_so(tmp_path):
    logs = NodeLogs(str(tmp_path / "logs"), JOB, max_bytes=1000)
    for i in range(100):
        logs.write(0, "worker:0", f"line {i:03d} " + "x" * 40)
    logs.close()
    path = logs.path(0, "worker:0")
    current = open(path).read()
    older = open(path + ".1").read().splitlines()
    # nothing lost between the two files: the new one goes on where the older one stops
    assert int(current.splitlines()[1].split()[1]) == int(older[-1].split()[1]) + 1
    assert os.path.getsize(path) <= 1000 and os.path.getsize(path + ".1") <= 1000
    assert "spark.sparktf.nodeLogMaxBytes=1000" in current.splitlines()[0]
    assert "worker-0.log.1" in current.splitlines()[0]
    assert "line 099 " in current.splitlines()[-1]
    assert mode(path) == 0o600 and mode(path + ".1") == 0o600
    assert len(os.listdir(os.path.dirname(path))) == 2


def test_a_line_longer_than_half_the_cap_is_cut_saying_so(tmp_path):
    logs = NodeLogs(str(tmp_path / "logs"), JOB, max_bytes=4096)
    logs.write(0, "chief:0", "y" * 100_000)
    logs.write(0, "chief:0", "after")
    logs.close()
    lines = open(logs.path(0, "chief:0")).read().splitlines()
    assert lines[0].startswith("y" * 100) and lines[0].endswith("[sparktf: line cut, too long]")
    assert lines[1] == "after" and os.path.getsize(logs.path(0, "chief:0")) <= 4096


def test_only_the_last_jobs_are_kept(tmp_path):
    root = tmp_path / "logs"
    root.mkdir(mode=0o700)
    old = [f"sparktf-{i:012x}" for i in range(5)]
    for i, name in enumerate(old):
        (root / name / "attempt-0").mkdir(parents=True)
        os.utime(root / name, (time.time() - 1000 + i, time.time() - 1000 + i))
    outside = tmp_path / "outside"
    (outside / "keepme").mkdir(parents=True)
    (root / "sparktf-ffffffffffff").symlink_to(outside)  # never followed, never removed
    (root / "notes").mkdir()  # not a job's: left alone
    logs = NodeLogs(str(root), JOB, keep_jobs=3)
    logs.close()
    assert sorted(os.listdir(root)) == sorted(
        [old[3], old[4], JOB, "sparktf-ffffffffffff", "notes"]
    )
    assert (outside / "keepme").is_dir()


def test_the_cap_and_the_retention_are_settings():
    s = Settings.resolve({})
    assert s.node_log_max_bytes == 64 * 2**20 and s.node_log_keep_jobs == 20
    s = Settings.resolve(
        {"spark.sparktf.nodeLogMaxBytes": "4096", "spark.sparktf.nodeLogKeepJobs": "2"}
    )
    assert (s.node_log_max_bytes, s.node_log_keep_jobs) == (4096, 2)
    with pytest.raises(ValueError, match="spark.sparktf.nodeLogKeepJobs"):
        Settings.resolve({"spark.sparktf.nodeLogKeepJobs": "0"})
    assert history.DEFAULT_MAX_BYTES == 64 * 2**20
