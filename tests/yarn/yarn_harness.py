"""The YARN tier's harness: one real YARN for the session (Apache Hadoop 3.5.0 ResourceManager,
NodeManager, NameNode and DataNode on loopback, started by bin/yarn-test-cluster.sh), and
helpers to submit to it, ask its REST API and read its aggregated logs.

The NodeManager runs on this machine, so unless a test says otherwise its executors (and, in
cluster mode, its driver) use this venv's Python (``spark.pyspark.python`` =
``sys.executable``) rather than an archive shipped with ``spark.archives``; the recipe test
of test_recipe.py ships the archive as docs/yarn.md says.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest
from helpers.procs import pid_alive, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bin", "yarn-test-cluster.sh")
sys.path.insert(0, os.path.join(ROOT, "bin"))  # hdfs_test_cluster: what the script counts


def pyspark_home():
    import pyspark

    return os.path.dirname(pyspark.__file__)


def spark_submit():
    return os.path.join(pyspark_home(), "bin", "spark-submit")


def base_conf():
    """What every YARN test submits with (beside the cluster's HADOOP_CONF_DIR): Spark's jars
    from the local pyspark instead of an upload per application, this venv's Python, loopback,
    one executor core and one task slot each, no dynamic allocation, one attempt."""
    return {
        "spark.yarn.jars": f"local:{pyspark_home()}/jars/*",
        "spark.pyspark.python": sys.executable,
        "spark.driver.host": "127.0.0.1",
        # loopback in the containers too (the ApplicationMaster and executors otherwise bind
        # the machine's external address)
        "spark.yarn.appMasterEnv.SPARK_LOCAL_IP": "127.0.0.1",
        "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1",
        "spark.executorEnv.TF_CPP_MIN_LOG_LEVEL": "3",
        "spark.executor.instances": "2",
        "spark.executor.cores": "1",
        "spark.executor.memory": "1g",
        "spark.executor.memoryOverhead": "2g",
        "spark.dynamicAllocation.enabled": "false",
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.yarn.maxAppAttempts": "1",
        "spark.ui.showConsoleProgress": "false",
        # Spark 4.3's UI can fail the SparkContext's start in YARN client mode: the
        # ApplicationMaster's web filter is added while the UI's handlers start
        # (ConcurrentModificationException in jetty's ServletHandler.initialize); docs/yarn.md
        "spark.ui.enabled": "false",
    }


class YarnCluster:
    """The running test YARN: ``conf_dir`` (HADOOP_CONF_DIR), ``rm`` (the ResourceManager's
    web address), ``hdfs`` (hdfs://127.0.0.1:PORT), ``webhdfs``, ``pids`` (the daemons)."""

    __test__ = False
    #: the daemons ``start`` runs (their PID files)
    DAEMONS = {"namenode", "datanode", "resourcemanager", "nodemanager"}

    def __init__(self, state, stdout):
        self.state = state
        lines = stdout.strip().splitlines()
        self.conf_dir = lines[-1].split("=", 1)[1]
        self.rm = re.search(r"ResourceManager: (http://\S+)", stdout).group(1)
        m = re.search(r"HDFS: (hdfs://\S+) \(WebHDFS (http://\S+)\)", stdout)
        self.hdfs, self.webhdfs = m.group(1), m.group(2)
        self.pids = {
            f[:-4]: int(open(os.path.join(state, f)).read())
            for f in os.listdir(state)
            if f.endswith(".pid")
        }

    # -------------------------------------------------------------------- environment
    def env(self, **extra):
        """A client's environment; ``extra`` adds to it or replaces (HADOOP_CONF_DIR too)."""
        env = dict(
            os.environ,
            HADOOP_CONF_DIR=self.conf_dir,
            YARN_CONF_DIR=self.conf_dir,
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            SPARKTF_YARN_DIR=self.state,
        )
        env.update(extra)
        return env

    def hadoop_conf(self):
        """What a client needs of the cluster's configuration (fs.defaultFS, the
        ResourceManager's addresses), for a SparkConf as spark.hadoop.* (a JVM started before
        this fixture did not see HADOOP_CONF_DIR)."""
        import xml.etree.ElementTree as ET

        props = {}
        for name in ("core-site.xml", "yarn-site.xml"):
            for prop in ET.parse(os.path.join(self.conf_dir, name)).getroot():
                key = prop.findtext("name")
                if key == "fs.defaultFS" or key.startswith("yarn.resourcemanager."):
                    props[f"spark.hadoop.{key}"] = prop.findtext("value")
        return props

    # ---------------------------------------------------------------------- commands
    def submit_cmd(self, script, *args, deploy_mode="client", conf=None, extra=()):
        merged = dict(base_conf(), **(conf or {}))
        cmd = [spark_submit(), "--master", "yarn", "--deploy-mode", deploy_mode]
        for k, v in merged.items():
            if v is not None:
                cmd += ["--conf", f"{k}={v}"]
        return cmd + list(extra) + [str(script), *map(str, args)]

    def submit(
        self,
        script,
        *args,
        deploy_mode="client",
        conf=None,
        extra=(),
        cwd=None,
        timeout=420,
        env=None,
    ):
        """spark-submit to this YARN; the CompletedProcess, whatever its exit code."""
        return subprocess.run(
            self.submit_cmd(script, *args, deploy_mode=deploy_mode, conf=conf, extra=extra),
            cwd=cwd,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def cli(self, *args, timeout=120):
        """bin/yarn-test-cluster.sh yarn|hdfs ARGS: (exit code, stdout, stderr)."""
        out = subprocess.run(
            [SCRIPT, *args], env=self.env(), capture_output=True, text=True, timeout=timeout
        )
        return out.returncode, out.stdout, out.stderr

    def logs(self, app_id, timeout=90):
        """The application's aggregated container logs (`yarn logs -applicationId`), once
        the NodeManager has uploaded them to HDFS."""
        text = ""

        def aggregated():
            nonlocal text
            if self.app(app_id).get("logAggregationStatus") not in (
                "SUCCEEDED",
                "FAILED",
                "TIME_OUT",
            ):
                return False
            rc, text, _ = self.cli("yarn", "logs", "-applicationId", app_id)
            return rc == 0 and "LogType:" in text

        assert wait_until(aggregated, timeout=timeout, interval=1.0), (
            f"no aggregated logs for {app_id}: {self.app(app_id)}"
        )
        return text

    # ---------------------------------------------------------------------- REST API
    def rest(self, path, method="GET", body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.rm + "/ws/v1/cluster" + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def apps(self, states=None):
        q = f"?states={states}" if states else ""
        return (self.rest("/apps" + q).get("apps") or {}).get("app", [])

    def app(self, app_id):
        return self.rest(f"/apps/{app_id}")["app"]

    def kill(self, app_id):
        """PUT /ws/v1/cluster/apps/ID/state {"state": "KILLED"}, as `yarn application -kill`."""
        return self.rest(f"/apps/{app_id}/state", "PUT", {"state": "KILLED"})

    def running_apps(self):
        return self.apps("NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING")

    def containers(self):
        """The NodeManager's live containers (its own REST API)."""
        node = self.rest("/nodes")["nodes"]["node"][0]
        url = f"http://{node['nodeHTTPAddress']}/ws/v1/node/containers"
        with urllib.request.urlopen(url, timeout=10) as r:
            found = json.load(r).get("containers") or {}
        return found.get("container", [])

    def container_processes(self):
        """Live processes started in this cluster's containers, or by them (the cluster
        script's own test: working directory or environment in the NodeManager's dirs)."""
        import hdfs_test_cluster

        return [
            p
            for p in psutil.process_iter(["pid"])
            if hdfs_test_cluster.in_container(p.pid, self.state) and pid_alive(p.pid)
        ]

    def container_jvm(self, container_id):
        """The executor JVM of a live container, found as an operator would: the PID the
        NodeManager recorded for the container (``nmPrivate/APP/CONTAINER/CONTAINER.pid``, its
        launch shell) and the ``java`` process under it."""
        import glob

        [pid_file] = glob.glob(
            os.path.join(
                self.state, "nm", "local", "nmPrivate", "*", container_id, f"{container_id}.pid"
            )
        )
        shell = psutil.Process(int(open(pid_file).read().strip()))
        for proc in [shell] + shell.children(recursive=True):
            if proc.name() == "java" and "CoarseGrainedExecutorBackend" in " ".join(proc.cmdline()):
                return proc
        raise AssertionError(f"no executor JVM under {container_id}'s PID {shell.pid}")

    def describe_leftovers(self):
        """What wait_idle waited for, for an assertion's message."""
        procs = []
        for p in self.container_processes():
            try:
                procs.append((p.pid, p.name(), p.ppid(), " ".join(p.cmdline())[:300]))
            except psutil.Error:
                pass
        return {
            "apps": [a["id"] for a in self.running_apps()],
            "containers": [c["id"] for c in self.containers()],
            "processes": procs,
        }

    def wait_idle(self, timeout=60):
        """No application running, no container, no container process left."""
        return wait_until(
            lambda: (
                not self.running_apps() and not self.containers() and not self.container_processes()
            ),
            timeout=timeout,
            interval=0.5,
        )


def app_id_of(text):
    m = re.search(r"application_\d+_\d+", text)
    assert m, text[-3000:]
    return m.group(0)


def session_cluster(tmp_path_factory, args=("start",), cls=YarnCluster, **settings):
    """The generator behind conftest's session fixture ``yarn``: the session's YARN, started
    once (the first start on a machine downloads the jars) and stopped at the end; no daemon
    or container may outlive it. ``args`` and ``cls``: another kind of cluster (the secure
    one of tests/kerberos: ``start --kerberos``); ``settings``: environment variables the
    start reads (``SPARKTF_TOKEN_LIFETIME``)."""
    state = str(tmp_path_factory.mktemp("yarn") / "state")
    env = dict(os.environ, SPARKTF_YARN_DIR=state, **settings)
    started = time.monotonic()
    out = subprocess.run([SCRIPT, *args], env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        pytest.fail(f"the test YARN did not start:\n{out.stdout}\n{out.stderr[-4000:]}")
    print(
        f"\n[yarn] {' '.join(args)}: started in {time.monotonic() - started:.1f}s", file=sys.stderr
    )
    cluster = cls(state, out.stdout)
    assert out.stdout.strip().splitlines()[-1] == f"HADOOP_CONF_DIR={cluster.conf_dir}"
    assert set(cluster.pids) == cls.DAEMONS
    try:
        yield cluster
    finally:
        for app in cluster.running_apps() if all(map(pid_alive, cluster.pids.values())) else []:
            cluster.kill(app["id"])
        stop = subprocess.run(
            [SCRIPT, "stop"], env=env, capture_output=True, text=True, timeout=180
        )
        assert stop.returncode == 0, stop.stderr
        pids = list(cluster.pids.values())
        assert wait_until(lambda: not any(pid_alive(p) for p in pids), timeout=30), (
            "a daemon of the test YARN outlived bin/yarn-test-cluster.sh stop"
        )
        assert "leftover processes" not in stop.stderr, stop.stderr
        assert not cluster.container_processes()


def kill_tree(pid):
    """SIGKILL a process we started and everything under it (a test's own cleanup)."""
    try:
        procs = [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
