"""The multihost tier's harness: one multi-host test YARN for the session
(``bin/yarn-test-cluster.sh start --hosts 3``: a master on the bridge's address in the root
namespace, three worker hosts in network namespaces), spark-submit from the edge node (this
machine's root namespace, on the bridge's address), and the hosts' fault verbs.
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bin", "yarn-test-cluster.sh")
sys.path.insert(0, os.path.join(ROOT, "bin"))
HOSTS = 3


def pyspark_home():
    import pyspark

    return os.path.dirname(pyspark.__file__)


class Hosts:
    """The running multi-host YARN: ``master`` (the bridge's address: the edge node's),
    ``workers`` ({name: address}), ``conf_dir``, ``spark_conf``, ``state``."""

    __test__ = False

    def __init__(self, state, stdout):
        self.state = state
        self.stdout = stdout
        with open(os.path.join(state, "net.json")) as f:
            self.net = json.load(f)
        self.master = self.net["master"]["address"]
        self.workers = {h["name"]: h["address"] for h in self.net["hosts"]}
        self.conf_dir = re.search(r"^HADOOP_CONF_DIR=(\S+)$", stdout, re.M).group(1)
        self.spark_conf = re.search(r"^SPARK_CONF_DIR=(\S+)$", stdout, re.M).group(1)
        self.rm = re.search(r"ResourceManager: (http://\S+)", stdout).group(1)

    def env(self, **extra):
        """The edge node's environment: this worktree's sparktf and tests' helpers on the
        driver's path, the driver on the bridge's address."""
        return dict(
            os.environ,
            HADOOP_CONF_DIR=self.conf_dir,
            YARN_CONF_DIR=self.conf_dir,
            SPARK_CONF_DIR=self.spark_conf,
            SPARK_LOCAL_IP=self.master,
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
            SPARKTF_YARN_DIR=self.state,
            **extra,
        )

    def conf(self, **extra):
        """--conf flags: Spark's jars and this Python from this machine, this worktree's
        sparktf on the executors."""
        conf = {
            "spark.yarn.jars": f"local:{pyspark_home()}/jars/*",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": ROOT,
            "spark.executorEnv.TF_CPP_MIN_LOG_LEVEL": "3",
            **extra,
        }
        return [a for k, v in conf.items() for a in ("--conf", f"{k}={v}")]

    def submit(self, script, *args, conf=None, timeout=540, cwd=None):
        cmd = [os.path.join(pyspark_home(), "bin", "spark-submit"), "--master", "yarn"]
        cmd += self.conf(**(conf or {})) + [str(script), *map(str, args)]
        return subprocess.run(
            cmd, env=self.env(), capture_output=True, text=True, timeout=timeout, cwd=cwd
        )

    def verb(self, *args):
        out = subprocess.run(
            [SCRIPT, *args], env=self.env(), capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        return out

    def host_processes(self, name):
        """PIDs of every process in the worker host's namespace."""
        import yarn_hosts

        return yarn_hosts.netns_pids(yarn_hosts.host_of(self.net, name)["ns"])


def session_hosts(tmp_path_factory):
    """The generator behind the session fixture ``hosts``: started once, stopped at the end
    (also when a test fails); no namespace, link or bridge of it may outlive it."""
    import yarn_hosts

    why = yarn_hosts.usable()
    if why:
        pytest.skip(f"the multihost tier {why}")
    reuse = os.environ.get("SPARKTF_TEST_HOSTS")
    if reuse:  # the inner loop: a cluster already started, its start's output in this file
        stdout = open(reuse).read()
        yield Hosts(re.search(r"state in (\S+);", stdout).group(1), stdout)
        return
    state = str(tmp_path_factory.mktemp("multihost") / "state")
    env = dict(os.environ, SPARKTF_YARN_DIR=state)
    started = time.monotonic()
    out = subprocess.run(
        [SCRIPT, "start", "--hosts", str(HOSTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        pytest.fail(f"the multi-host YARN did not start:\n{out.stdout}\n{out.stderr[-4000:]}")
    print(
        f"\n[multihost] {HOSTS} hosts started in {time.monotonic() - started:.1f}s", file=sys.stderr
    )
    hosts = Hosts(state, out.stdout)
    try:
        yield hosts
    finally:
        stop = subprocess.run(
            [SCRIPT, "stop"], env=env, capture_output=True, text=True, timeout=300
        )
        assert stop.returncode == 0, stop.stderr
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        tag = hosts.net["tag"]
        assert tag not in links and tag not in namespaces.stdout, (links, namespaces.stdout)
        assert not os.path.exists(state)
