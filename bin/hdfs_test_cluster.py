"""A real HDFS on loopback for tests, benchmarks and trials: ``bin/hdfs-test-cluster.sh``.

    bin/hdfs-test-cluster.sh start    # prints `export ...` lines: eval "$(... start)"
    bin/hdfs-test-cluster.sh status   # exit 0 and the URLs while it runs, 1 otherwise
    bin/hdfs-test-cluster.sh env      # the `export ...` lines of the running cluster
    bin/hdfs-test-cluster.sh stop     # stops both daemons by their PIDs, removes its files

One Apache Hadoop **2.7.3** NameNode and one DataNode (end-of-life Hadoop, driven here by
pyspark 4's Hadoop 3.5 client; the RPC and WebHDFS protocols are compatible), every address on
127.0.0.1, WebHDFS on, permissions checked, replication 1. Nothing is installed: the jars come
from registry packages and are cached under ``$SPARKTF_HDFS_CACHE`` (default
``~/.cache/sparktf/hadoop-2.7.3``) on first use:

- Hadoop's NameNode/DataNode and the jars they need, from the pyspark 2.4.8 sdist on PyPI;
- jersey 1 for WebHDFS, from Debian's packages (``apt-get download``, unpacked, not installed);
- ``libhdfs.so`` for pyarrow's ``HadoopFileSystem``, built with gcc from Apache's libhdfs C
  sources in the pydoop 2.0.0 sdist, against the JDK's libjvm.

State (configuration, name and data directories, logs, PIDs) is in ``$SPARKTF_HDFS_DIR``
(default ``/tmp/sparktf-hdfs-$UID``). YARN is not part of it and cannot run here.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

HADOOP_JARS = [
    "hadoop-common-2.7.3", "hadoop-hdfs-2.7.3", "hadoop-auth-2.7.3", "hadoop-annotations-2.7.3",
    "commons-cli-1.2", "commons-collections-3.2.2", "commons-configuration-1.6",
    "commons-io-2.4", "commons-lang-2.6", "commons-logging-1.1.3", "commons-codec-1.10",
    "commons-math3-3.4.1", "commons-lang3-3.5", "guava-14.0.1", "protobuf-java-2.5.0",
    "htrace-core-3.1.0-incubating", "jetty-6.1.26", "jetty-util-6.1.26",
    "javax.servlet-api-3.1.0", "log4j-1.2.17", "slf4j-api-1.7.16", "slf4j-log4j12-1.7.16",
    "netty-all-4.1.47.Final", "xmlenc-0.52", "xercesImpl-2.9.1", "jackson-core-asl-1.9.13",
    "jackson-mapper-asl-1.9.13", "apacheds-i18n-2.0.0-M15", "apacheds-kerberos-codec-2.0.0-M15",
    "api-asn1-api-1.0.0-M20", "api-util-1.0.0-M20", "jsr305-1.3.9", "httpclient-4.5.6",
    "httpcore-4.4.10", "jaxb-api-2.2.2", "activation-1.1.1",
]
JERSEY_DEBS = ["libjersey1-core-java", "libjersey1-server-java", "libjersey1-servlet-java",
               "libjsr311-api-java"]
JERSEY_JARS = ["jersey1-core", "jersey1-server", "jersey1-servlet", "jsr311-api"]
LIBHDFS_SOURCES = ["hdfs.c", "jni_helper.c", "exception.c", "common/htable.c",
                   "os/posix/mutexes.c", "os/posix/thread.c", "os/posix/thread_local_storage.c"]
JVM_OPTS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
READY_TIMEOUT = 90.0


def cache_dir() -> str:
    return os.environ.get("SPARKTF_HDFS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "sparktf", "hadoop-2.7.3")


def state_dir() -> str:
    return os.environ.get("SPARKTF_HDFS_DIR") or os.path.join(
        tempfile.gettempdir(), f"sparktf-hdfs-{os.getuid()}")


def log(msg: str) -> None:
    print(f"hdfs-test-cluster: {msg}", file=sys.stderr, flush=True)


def java_home() -> str:
    home = os.environ.get("JAVA_HOME")
    if not home:
        java = shutil.which("java")
        if not java:
            sys.exit("hdfs-test-cluster: no java on PATH and no JAVA_HOME: install Java 17")
        home = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    return home


# ---------------------------------------------------------------------------- fetching
def _pip_download(spec: str, dest: str) -> str:
    """An sdist from PyPI into ``dest`` (in a throwaway venv: old setup.py files need old
    setuptools to even be downloaded as source)."""
    found = glob.glob(os.path.join(dest, spec.replace("==", "-") + ".tar.gz"))
    if found:
        return found[0]
    venv = os.path.join(dest, "venv")
    if not os.path.exists(os.path.join(venv, "bin", "pip")):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "wheel",
                        "setuptools<70"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    subprocess.run([os.path.join(venv, "bin", "pip"), "download", "-q", "--no-deps",
                    "--no-binary", ":all:", "--no-build-isolation", "-d", dest, spec],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return glob.glob(os.path.join(dest, spec.replace("==", "-") + ".tar.gz"))[0]


def fetch(cache: str) -> None:
    """Everything the cluster and the libhdfs client need, into ``cache`` (once)."""
    lib, native = os.path.join(cache, "lib"), os.path.join(cache, "native")
    if os.path.exists(os.path.join(cache, "COMPLETE")):
        return
    log(f"fetching Hadoop 2.7.3 into {cache} (once; about 230 MB downloaded, 32 MB kept)")
    os.makedirs(lib, exist_ok=True)
    os.makedirs(native, exist_ok=True)
    work = tempfile.mkdtemp(prefix="sparktf-hdfs-fetch-")
    try:
        sdist = _pip_download("pyspark==2.4.8", work)
        with tarfile.open(sdist) as tar:
            for name in HADOOP_JARS:
                member = f"pyspark-2.4.8/deps/jars/{name}.jar"
                with tar.extractfile(member) as src, open(os.path.join(lib, name + ".jar"),
                                                          "wb") as dst:
                    shutil.copyfileobj(src, dst)
        os.unlink(sdist)
        debs = os.path.join(work, "debs")
        os.makedirs(debs)
        get = ["apt-get", "download", *JERSEY_DEBS]
        if subprocess.run(get, cwd=debs, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
            subprocess.run(get, cwd=debs, check=True, capture_output=True)
        for deb in glob.glob(os.path.join(debs, "*.deb")):
            subprocess.run(["dpkg-deb", "-x", deb, os.path.join(work, "x")], check=True)
        for stem in JERSEY_JARS:
            jars = sorted(p for p in glob.glob(os.path.join(work, "x", "usr", "share", "java",
                                                            stem + "*.jar"))
                          if not os.path.islink(p))
            if not jars:
                sys.exit(f"hdfs-test-cluster: no {stem} jar in Debian's {JERSEY_DEBS}")
            shutil.copy(jars[0], lib)
        build_libhdfs(_pip_download("pydoop==2.0.0", work), native)
        open(os.path.join(cache, "COMPLETE"), "w").close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_libhdfs(sdist: str, native: str) -> None:
    """Apache's libhdfs (C over JNI) from the pydoop sdist, for pyarrow's HadoopFileSystem."""
    src = tempfile.mkdtemp(prefix="libhdfs-")
    try:
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/src/libhdfs/" in m.name]
            tar.extractall(src, members=members, filter="data")
        root = glob.glob(os.path.join(src, "*", "src", "libhdfs"))[0]
        jdk = java_home()
        inc = os.path.join(jdk, "include")
        server = os.path.join(jdk, "lib", "server")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o",
                        os.path.join(native, "libhdfs.so"),
                        "-I.", "-Iinclude", "-Iinclude/hdfs", "-Ios", "-Ios/posix",
                        f"-I{inc}", f"-I{os.path.join(inc, 'linux')}", *LIBHDFS_SOURCES,
                        f"-L{server}", "-ljvm", f"-Wl,-rpath,{server}", "-lpthread"],
                       cwd=root, check=True)
    finally:
        shutil.rmtree(src, ignore_errors=True)


# ----------------------------------------------------------------------------- running
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _site(props: dict) -> str:
    body = "".join(f"  <property><name>{k}</name><value>{v}</value></property>\n"
                   for k, v in props.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


def write_conf(state: str) -> dict:
    ports = {name: free_port() for name in ("rpc", "http", "dn", "dn_http", "dn_ipc", "snn")}
    conf = os.path.join(state, "conf")
    for app in ("hdfs", "datanode", "secondary", "static"):  # the jar has no webapps/
        os.makedirs(os.path.join(conf, "webapps", app), exist_ok=True)
    url = f"hdfs://127.0.0.1:{ports['rpc']}"
    with open(os.path.join(conf, "core-site.xml"), "w") as f:
        f.write(_site({"fs.defaultFS": url, "hadoop.tmp.dir": os.path.join(state, "tmp")}))
    with open(os.path.join(conf, "hdfs-site.xml"), "w") as f:
        f.write(_site({
            "dfs.replication": 1,
            "dfs.namenode.name.dir": "file://" + os.path.join(state, "name"),
            "dfs.datanode.data.dir": "file://" + os.path.join(state, "data"),
            "dfs.namenode.rpc-address": f"127.0.0.1:{ports['rpc']}",
            "dfs.namenode.http-address": f"127.0.0.1:{ports['http']}",
            "dfs.namenode.secondary.http-address": f"127.0.0.1:{ports['snn']}",
            "dfs.datanode.address": f"127.0.0.1:{ports['dn']}",
            "dfs.datanode.http.address": f"127.0.0.1:{ports['dn_http']}",
            "dfs.datanode.ipc.address": f"127.0.0.1:{ports['dn_ipc']}",
            "dfs.datanode.hostname": "127.0.0.1",
            "dfs.namenode.datanode.registration.ip-hostname-check": "false",
            "dfs.namenode.safemode.extension": 0,
            "dfs.permissions.enabled": "true",
            "dfs.webhdfs.enabled": "true",
        }))
    with open(os.path.join(conf, "log4j.properties"), "w") as f:
        f.write("log4j.rootLogger=INFO,console\nlog4j.appender.console="
                "org.apache.log4j.ConsoleAppender\nlog4j.appender.console.layout="
                "org.apache.log4j.PatternLayout\nlog4j.appender.console.layout."
                "ConversionPattern=%d %p %c{1}: %m%n\n")
    return {"url": url, "webhdfs": f"http://127.0.0.1:{ports['http']}", "conf": conf}


def classpath(conf: str) -> str:
    """Explicit jar paths (libhdfs does not expand wildcards)."""
    return ":".join([conf] + sorted(glob.glob(os.path.join(cache_dir(), "lib", "*.jar"))))


def _java(conf: str, cls: str, *args: str) -> list:
    return [os.path.join(java_home(), "bin", "java"), *JVM_OPTS,
            "-Dhadoop.log.dir=" + os.path.dirname(conf), "-cp", classpath(conf), cls, *args]


def env_lines(state: str) -> list[str]:
    with open(os.path.join(state, "urls")) as f:
        url, webhdfs = f.read().split()
    conf = os.path.join(state, "conf")
    return [f"export SPARKTF_TEST_HDFS={url}", f"export SPARKTF_WEBHDFS_URL={webhdfs}",
            f"export HADOOP_CONF_DIR={conf}", f"export CLASSPATH={classpath(conf)}",
            f"export ARROW_LIBHDFS_DIR={os.path.join(cache_dir(), 'native')}",
            f"export JAVA_HOME={java_home()}"]


def _ours(pid: int, state: str) -> bool:
    """Whether ``pid`` is still one of this cluster's JVMs (a PID can be reused)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return state.encode() in f.read()
    except OSError:
        return False


def running(state: str) -> list[int]:
    pids = []
    for name in ("namenode", "datanode"):
        try:
            with open(os.path.join(state, name + ".pid")) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            continue
        if _ours(pid, state):
            pids.append(pid)
    return pids


def start(state: str) -> int:
    if running(state):
        log(f"already running in {state}; stop it first: bin/hdfs-test-cluster.sh stop")
        return 1
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state, mode=0o700)
    fetch(cache_dir())
    info = write_conf(state)
    conf = info["conf"]
    with open(os.path.join(state, "format.log"), "w") as out:
        formatted = subprocess.run(
            _java(conf, "org.apache.hadoop.hdfs.server.namenode.NameNode", "-format",
                  "-nonInteractive"), stdout=out, stderr=subprocess.STDOUT, timeout=60)
    if formatted.returncode != 0:
        tail = open(os.path.join(state, "format.log"), errors="replace").read()[-2000:]
        shutil.rmtree(state, ignore_errors=True)
        log(f"formatting the NameNode failed:\n{tail}")
        return 1
    with open(os.path.join(state, "urls"), "w") as f:
        f.write(f"{info['url']} {info['webhdfs']}\n")
    daemons = []
    for name, cls in (("namenode", "org.apache.hadoop.hdfs.server.namenode.NameNode"),
                      ("datanode", "org.apache.hadoop.hdfs.server.datanode.DataNode")):
        with open(os.path.join(state, name + ".log"), "w") as out:
            proc = subprocess.Popen(_java(conf, cls), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        daemons.append(proc)
        with open(os.path.join(state, name + ".pid"), "w") as f:
            f.write(str(proc.pid))
    deadline = time.monotonic() + READY_TIMEOUT
    dn_log = os.path.join(state, "datanode.log")
    while time.monotonic() < deadline:
        with open(dn_log, errors="replace") as f:
            if "Successfully sent block report" in f.read():
                break
        if any(d.poll() is not None for d in daemons):  # (our children: no PID reuse)
            tail = open(dn_log, errors="replace").read()[-2000:]
            _stop_children(daemons, state)
            log(f"a daemon exited during start-up; the DataNode's last output:\n{tail}")
            return 1
        time.sleep(0.2)
    else:
        logs = {n: open(os.path.join(state, n + ".log"), errors="replace").read()[-1500:]
                for n in ("namenode", "datanode")}
        _stop_children(daemons, state)
        log(f"not ready after {READY_TIMEOUT:.0f}s; the logs' ends: {logs}")
        return 1
    print("\n".join(env_lines(state)))
    log(f"running: {info['url']} (WebHDFS {info['webhdfs']}); state in {state}")
    return 0


def _stop_children(daemons: list, state: str) -> None:
    """A failed start: stop the daemons it started (its own children), remove the state."""
    for d in daemons:
        if d.poll() is None:
            d.terminate()
    for d in daemons:
        try:
            d.wait(15)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
    shutil.rmtree(state, ignore_errors=True)


def stop(state: str) -> int:
    pids = running(state)
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while any(_ours(p, state) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if _ours(pid, state):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:  # reap them if they were our children (the pytest fixture's case)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    shutil.rmtree(state, ignore_errors=True)
    log(f"stopped ({len(pids)} daemons)" if pids else "was not running")
    return 0


def status(state: str) -> int:
    pids = running(state)
    if len(pids) == 2:
        print("\n".join(env_lines(state)))
        log(f"running, PIDs {pids}")
        return 0
    log("not running" if not pids else f"half running (PIDs {pids}): stop it")
    return 1


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("start", "stop", "status", "env"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    state = state_dir()
    if argv[0] == "env":
        return status(state)
    return {"start": start, "stop": stop, "status": status}[argv[0]](state)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
