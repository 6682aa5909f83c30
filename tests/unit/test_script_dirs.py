"""bin/run-on-yarn.sh uses a Hadoop conf directory only if another user cannot have written it:
the loopback cluster's own (``/tmp/sparktf-yarn-$UID/conf`` or under ``SPARKTF_YARN_DIR``) must
be this user's, not a symlink, and writable by nobody else; a ``HADOOP_CONF_DIR`` the user gives
must be this user's or root's and writable by nobody else. Each refusal names the directory
and what to do; nothing is submitted. The YARN conf templates turn on Spark's RPC encryption
with its authentication. Real script runs (spark-submit replaced by a stub that says it ran)."""

import glob
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bin", "run-on-yarn.sh")


@pytest.fixture
def spark_home(tmp_path):
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    stub = home / "bin" / "spark-submit"
    stub.write_text("#!/bin/sh\necho SUBMITTED \"$@\"\n")
    stub.chmod(0o755)
    return str(home)


def conf_dir(path, mode=0o700):
    path.mkdir(parents=True, mode=0o700, exist_ok=True)
    (path / "yarn-site.xml").write_text("<configuration/>\n")
    path.chmod(mode)
    return path


def run(spark_home, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "SPARK_CONF_DIR")}
    return subprocess.run(
        ["bash", SCRIPT, "examples/mnist.py"],
        env={**base, "SPARK_HOME": spark_home, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_its_own_conf_directory_is_used(tmp_path, spark_home):
    yarn = tmp_path / "yarn"
    conf_dir(yarn / "conf")
    yarn.chmod(0o700)
    out = run(spark_home, SPARKTF_YARN_DIR=str(yarn))
    assert out.returncode == 0 and "SUBMITTED" in out.stdout, out.stderr


def test_a_symlinked_conf_directory_is_refused(tmp_path, spark_home):
    yarn = tmp_path / "yarn"
    yarn.mkdir(mode=0o700)
    planted = conf_dir(tmp_path / "planted")
    (yarn / "conf").symlink_to(planted)
    out = run(spark_home, SPARKTF_YARN_DIR=str(yarn))
    assert out.returncode == 2 and "SUBMITTED" not in out.stdout
    assert f"{yarn}/conf is a symlink" in out.stderr and "yarn-test-cluster.sh" in out.stderr


def test_a_conf_directory_others_can_write_is_refused(tmp_path, spark_home):
    yarn = tmp_path / "yarn"
    conf_dir(yarn / "conf", mode=0o777)
    yarn.chmod(0o700)
    out = run(spark_home, SPARKTF_YARN_DIR=str(yarn))
    assert out.returncode == 2 and "SUBMITTED" not in out.stdout
    assert f"{yarn}/conf is writable by other users" in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_another_users_conf_directory_is_refused(tmp_path, spark_home):
    yarn = tmp_path / "yarn"
    conf_dir(yarn / "conf")
    yarn.chmod(0o755)
    os.chown(yarn, 65534, 65534)
    out = run(spark_home, SPARKTF_YARN_DIR=str(yarn))
    assert out.returncode == 2 and "SUBMITTED" not in out.stdout
    assert f"{yarn} is owned by uid 65534" in out.stderr


def test_a_given_hadoop_conf_dir_others_can_write_is_refused(tmp_path, spark_home):
    given = conf_dir(tmp_path / "hadoop-conf", mode=0o775)
    out = run(spark_home, HADOOP_CONF_DIR=str(given))
    assert out.returncode == 2 and "SUBMITTED" not in out.stdout
    assert f"{given} is writable by other users" in out.stderr


@pytest.mark.parametrize(
    "path", sorted(glob.glob(os.path.join(ROOT, "conf", "yarn*", "spark-defaults.conf")))
)
def test_yarn_templates_encrypt_spark_rpc_with_its_authentication(path):
    conf = {}
    for line in open(path):
        parts = line.split(None, 1)
        if parts and not parts[0].startswith("#") and len(parts) == 2:
            conf[parts[0]] = parts[1].strip()
    assert conf.get("spark.authenticate") == "true", path
    assert conf.get("spark.network.crypto.enabled") == "true", path


def test_stop_standalone_never_kills_what_a_planted_pid_file_names(tmp_path):
    """Another user's directory where the standalone cluster's state goes, with a pid file
    naming one of this user's processes: stop-standalone.sh refuses it and kills nothing."""
    state = tmp_path / "standalone"
    state.mkdir()
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        (state / "master.pid").write_text(f"{victim.pid}\n")
        state.chmod(0o777)  # as another user's would be: anyone may write in it
        out = subprocess.run(
            ["bash", os.path.join(ROOT, "bin", "stop-standalone.sh")],
            env={**os.environ, "SPARKTF_STANDALONE_DIR": str(state)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"{state} is writable by other users" in out.stderr
        assert victim.poll() is None  # still running
    finally:
        victim.kill()
        victim.wait()


def test_run_example_refuses_a_planted_standalone_state(tmp_path, spark_home):
    """A planted master-url would send the job (its code, its data) to someone else's master."""
    state = tmp_path / "standalone"
    state.mkdir()
    (state / "master-url").write_text("spark://attacker:7077\n")
    (state / "master.pid").write_text(f"{os.getpid()}\n")
    (state / "cores").write_text("2\n")
    state.chmod(0o777)
    out = subprocess.run(
        ["bash", os.path.join(ROOT, "bin", "run-example.sh"), "examples/mnist.py"],
        env={**os.environ, "SPARK_HOME": spark_home, "SPARKTF_STANDALONE_DIR": str(state)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "SUBMITTED" not in out.stdout, out.stdout
    assert f"{state} is writable by other users" in out.stderr
