"""The kerberos tier's harness: the secure YARN and HDFS of ``bin/yarn-test-cluster.sh start
--kerberos`` (an MIT KDC beside Hadoop 3.5.0's daemons on loopback), and ways to reach it as a
user with or without a Kerberos ticket.

Everything that logs in runs in a child process (spark-submit, or Python with libhdfs): a JVM
started inside pytest keeps its first login for good.
"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "yarn"))
from yarn_harness import ROOT, YarnCluster  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bin"))
import hdfs_test_cluster  # noqa: E402
import yarn_kerberos  # noqa: E402

#: The delegation tokens' maximum lifetime (s) on the tier's cluster (renew interval 30 s): a job
#: of the tier that runs longer outlives the tokens it started with, and the tokens Spark
#: obtains since must reach the TF processes (sparktf.driver.credentials) and sparktf.predict's
#: tasks (sparktf.fs.tokens.adopt)
TOKEN_LIFETIME = 60
#: The tier's realm allows this clock skew (s): an expired ticket is refused this long after
#: its end (Kerberos's usual 300 s would make the test wait five minutes)
CLOCK_SKEW = 10


def missing():
    """Why the tier cannot run on this machine (None when it can)."""
    if not shutil.which("java"):
        return "no java on PATH (Hadoop's daemons need Java 17)"
    cached = os.path.exists(os.path.join(hdfs_test_cluster.cache_dir(), "COMPLETE"))
    if not cached and not shutil.which("mvn"):
        return "no mvn on PATH and no cached Hadoop jars (Maven fetches Hadoop 3.5.0)"
    return yarn_kerberos.missing()


class SecureCluster(YarnCluster):
    """The running secure cluster: YarnCluster's addresses, and ``krb5_config``,
    ``principal`` and ``keytab`` (the user's), as ``start --kerberos`` printed them."""

    __test__ = False
    DAEMONS = YarnCluster.DAEMONS | {"kdc"}

    def __init__(self, state, stdout):
        super().__init__(state, stdout)
        said = dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)
        self.krb5_config = said["KRB5_CONFIG"]
        self.principal = said["PRINCIPAL"]
        self.keytab = said["KEYTAB"]
        self.user = self.principal.split("@")[0]

    def env(self, **extra):
        """A client's environment: this realm's krb5.conf for MIT's tools and GSSAPI
        (KRB5_CONFIG) and for the JVMs (spark-submit's, libhdfs's: Java reads only its
        system property), and what libhdfs needs (CLASSPATH, ARROW_LIBHDFS_DIR, JAVA_HOME)."""
        java_krb5 = f"-Djava.security.krb5.conf={self.krb5_config}"
        libhdfs = dict(
            line[len("export ") :].split("=", 1)
            for line in hdfs_test_cluster.env_lines(self.state)
            if line.startswith("export ")
        )
        for key in ("SPARKTF_TEST_HDFS", "SPARKTF_WEBHDFS_URL", "HADOOP_CONF_DIR"):
            libhdfs.pop(key)
        return super().env(
            **dict(
                libhdfs,
                KRB5_CONFIG=self.krb5_config,
                SPARK_SUBMIT_OPTS=java_krb5,
                LIBHDFS_OPTS=java_krb5,
                PYTHONPATH=ROOT,
                **extra,
            )
        )

    def containers(self):
        """The NodeManager's live containers, as the ResourceManager counts them (a secure
        NodeManager's own REST API answers an anonymous caller with HTTP 500)."""
        node = self.rest("/nodes")["nodes"]["node"][0]
        return [
            {"id": f"(container {i + 1} of {node['numContainers']})"}
            for i in range(node["numContainers"])
        ]

    def kinit(self, cache, lifetime=None):
        """The user's ticket, from the keytab, in the credentials cache file ``cache``
        (``lifetime``: kinit's ``-l``, such as ``"5s"``)."""
        subprocess.run(
            ["kinit", *(("-l", lifetime) if lifetime else ()), "-kt", self.keytab]
            + ["-c", str(cache), self.principal],
            env=self.env(),
            check=True,
            capture_output=True,
            timeout=60,
        )

    def submit_as_principal(self, tmp_path, script, *args, extra=()):
        """``spark-submit --principal P --keytab K SCRIPT ARGS`` from ``tmp_path``, the
        driver's own ticket in a cache there (kinit, for its sparktf.fs calls), this checkout
        on the executors' PYTHONPATH: the CompletedProcess."""
        ticket = tmp_path / "ticket"
        self.kinit(ticket)
        return self.submit(
            script,
            *args,
            extra=("--principal", self.principal, "--keytab", self.keytab, *extra),
            conf={"spark.executorEnv.PYTHONPATH": ROOT},
            cwd=tmp_path,
            env=self.env(KRB5CCNAME=str(ticket)),
        )

    def python(self, code, *args, timeout=180, **env):
        """``python3 -c code args`` as a client of this cluster: CompletedProcess."""
        return subprocess.run(
            [sys.executable, "-c", code, *map(str, args)],
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )
