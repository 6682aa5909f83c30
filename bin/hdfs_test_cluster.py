"""A real HDFS on loopback for tests, benchmarks and trials: ``bin/hdfs-test-cluster.sh``.

    bin/hdfs-test-cluster.sh start    # prints `export ...` lines: eval "$(... start)"
    bin/hdfs-test-cluster.sh status   # exit 0 and the URLs while it runs, 1 otherwise
    bin/hdfs-test-cluster.sh env      # the `export ...` lines of the running cluster
    bin/hdfs-test-cluster.sh stop     # stops both daemons by their PIDs, removes its files

One Apache Hadoop **3.5.0** NameNode and one DataNode (the release of the Hadoop client that
pyspark 4.3 ships), every address on 127.0.0.1, WebHDFS on, permissions checked, replication
1. Nothing is installed: the jars come from Maven Central (``bin/hadoop/pom.xml``, through
``mvn dependency:copy-dependencies``) and are cached under ``$SPARKTF_HADOOP_CACHE`` (default
``~/.cache/sparktf/hadoop-3.5.0``) on first use, with ``libhdfs.so`` for pyarrow's
``HadoopFileSystem``, built with gcc from Apache's libhdfs C sources in the pydoop 2.0.0 sdist
(PyPI) against the JDK's libjvm.

State (configuration, name and data directories, logs, PIDs) is in ``$SPARKTF_HDFS_DIR``
(default ``/tmp/sparktf-hdfs-$UID``). ``bin/yarn-test-cluster.sh`` runs the same HDFS with a
ResourceManager and a NodeManager beside it, from the same jars (its module imports this one).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

HADOOP_VERSION = "3.5.0"
POM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hadoop", "pom.xml")
LIBHDFS_SOURCES = [
    "hdfs.c",
    "jni_helper.c",
    "exception.c",
    "common/htable.c",
    "os/posix/mutexes.c",
    "os/posix/thread.c",
    "os/posix/thread_local_storage.c",
]
JVM_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true"]
# What Hadoop's own launch scripts open on Java 17 (hadoop-functions.sh)
ADD_OPENS = [
    f"--add-opens=java.base/{p}=ALL-UNNAMED"
    for p in (
        "java.lang",
        "java.lang.reflect",
        "java.io",
        "java.net",
        "java.nio",
        "java.util",
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "sun.nio.ch",
        "sun.nio.cs",
        "sun.security.action",
        "sun.util.calendar",
    )
]
READY_TIMEOUT = 120.0
NAMENODE = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE = "org.apache.hadoop.hdfs.server.datanode.DataNode"
PREFIX = "hdfs-test-cluster"
#: Settings added to each site file (file name -> {key: value}): a secure cluster's
#: (bin/yarn_kerberos.py, ``bin/yarn-test-cluster.sh start --kerberos``)
EXTRA_SITE: dict[str, dict] = {}


def cache_dir() -> str:
    return (
        os.environ.get("SPARKTF_HADOOP_CACHE")
        or os.environ.get("SPARKTF_HDFS_CACHE")
        or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
            "sparktf",
            f"hadoop-{HADOOP_VERSION}",
        )
    )


def state_dir() -> str:
    return os.environ.get("SPARKTF_HDFS_DIR") or os.path.join(
        tempfile.gettempdir(), f"sparktf-hdfs-{os.getuid()}"
    )


def log(msg: str) -> None:
    print(f"{PREFIX}: {msg}", file=sys.stderr, flush=True)


def java_home() -> str:
    home = os.environ.get("JAVA_HOME")
    if not home:
        java = shutil.which("java")
        if not java:
            sys.exit(f"{PREFIX}: no java on PATH and no JAVA_HOME: install Java 17")
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
        subprocess.run(
            [os.path.join(venv, "bin", "pip"), "install", "-q", "wheel", "setuptools<70"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    subprocess.run(
        [
            os.path.join(venv, "bin", "pip"),
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--no-build-isolation",
            "-d",
            dest,
            spec,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return glob.glob(os.path.join(dest, spec.replace("==", "-") + ".tar.gz"))[0]


def fetch(cache: str) -> None:
    """Hadoop's jars (Maven Central) and libhdfs.so (built here), into ``cache`` (once)."""
    lib, native = os.path.join(cache, "lib"), os.path.join(cache, "native")
    if os.path.exists(os.path.join(cache, "COMPLETE")):
        return
    mvn = shutil.which("mvn")
    if not mvn:
        sys.exit(
            f"{PREFIX}: no mvn on PATH: install Maven 3.8+ (apt-get install maven); "
            f"it fetches Hadoop {HADOOP_VERSION}'s jars from Maven Central"
        )
    log(
        f"fetching Hadoop {HADOOP_VERSION}'s jars from Maven Central into {cache} "
        "(once; about 100 MB)"
    )
    os.makedirs(cache, exist_ok=True)
    partial = lib + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    got = subprocess.run(
        [
            mvn,
            "-B",
            "-q",
            "-f",
            POM,
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={partial}",
        ],
        capture_output=True,
        text=True,
    )
    if got.returncode != 0:
        said = (got.stdout + got.stderr).splitlines()
        errors = [line for line in said if "[ERROR]" in line] or said
        sys.exit(
            f"{PREFIX}: Maven could not fetch Hadoop {HADOOP_VERSION} ({POM}):\n"
            + "\n".join(errors[-20:])
        )
    shutil.rmtree(lib, ignore_errors=True)
    os.rename(partial, lib)
    os.makedirs(native, exist_ok=True)
    work = tempfile.mkdtemp(prefix="sparktf-hadoop-fetch-")
    try:
        build_libhdfs(_pip_download("pydoop==2.0.0", work), native)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    open(os.path.join(cache, "COMPLETE"), "w").close()


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
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-O2",
                "-o",
                os.path.join(native, "libhdfs.so"),
                "-I.",
                "-Iinclude",
                "-Iinclude/hdfs",
                "-Ios",
                "-Ios/posix",
                f"-I{inc}",
                f"-I{os.path.join(inc, 'linux')}",
                *LIBHDFS_SOURCES,
                f"-L{server}",
                "-ljvm",
                f"-Wl,-rpath,{server}",
                "-lpthread",
            ],
            cwd=root,
            check=True,
        )
    finally:
        shutil.rmtree(src, ignore_errors=True)


# ---------------------------------------------------------------------- configuration
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_site(conf: str, name: str, props: dict) -> None:
    props = {**props, **EXTRA_SITE.get(name, {})}
    body = "".join(
        f"  <property><name>{k}</name><value>{v}</value></property>\n" for k, v in props.items()
    )
    with open(os.path.join(conf, name), "w") as f:
        f.write(f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n')


def write_hdfs_conf(state: str) -> dict:
    """core-site.xml, hdfs-site.xml and log4j.properties in STATE/conf; the URLs."""
    ports = {name: free_port() for name in ("rpc", "http", "dn", "dn_http", "dn_ipc", "snn")}
    conf = os.path.join(state, "conf")
    for app in ("hdfs", "datanode", "secondary", "journal"):  # hadoop-hdfs.jar has no webapps/
        os.makedirs(os.path.join(conf, "webapps", app), exist_ok=True)
    url = f"hdfs://127.0.0.1:{ports['rpc']}"
    write_site(
        conf, "core-site.xml", {"fs.defaultFS": url, "hadoop.tmp.dir": os.path.join(state, "tmp")}
    )
    write_site(
        conf,
        "hdfs-site.xml",
        {
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
            # a fresh, tiny cluster: no 30 s safe-mode wait, no refusal when the disk is fuller
            # than a production NameNode would like
            "dfs.namenode.safemode.extension": 0,
            "dfs.namenode.resource.du.reserved": 0,
            "dfs.permissions.enabled": "true",
            "dfs.webhdfs.enabled": "true",
        },
    )
    write_log4j(conf)
    return {"url": url, "webhdfs": f"http://127.0.0.1:{ports['http']}", "conf": conf}


def write_log4j(conf: str) -> None:
    """The daemons' log4j.properties in ``conf`` (console, INFO; YARN's memory checks)."""
    with open(os.path.join(conf, "log4j.properties"), "w") as f:
        f.write(
            "hadoop.root.logger=INFO,console\nlog4j.rootLogger=${hadoop.root.logger}\n"
            "log4j.appender.console=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.console.target=System.err\nlog4j.appender.console.layout="
            "org.apache.log4j.PatternLayout\nlog4j.appender.console.layout."
            "ConversionPattern=%d %p %c{1}: %m%n\n"
            "log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR\n"
            # what YARN's memory check measures (one line per container per check)
            "log4j.logger.org.apache.hadoop.yarn.server.nodemanager.containermanager."
            "monitor.ContainersMonitorImpl=DEBUG\n"
        )


def classpath(conf: str) -> str:
    """Explicit jar paths (libhdfs does not expand wildcards)."""
    return ":".join([conf] + sorted(glob.glob(os.path.join(cache_dir(), "lib", "*.jar"))))


def java_cmd(conf: str, cls: str, *args: str, heap: str = "256m") -> list:
    return [
        os.path.join(java_home(), "bin", "java"),
        f"-Xmx{heap}",
        *JVM_OPTS,
        *ADD_OPENS,
        "-Dhadoop.log.dir=" + os.path.dirname(conf),
        "-cp",
        classpath(conf),
        cls,
        *args,
    ]


def daemon_env(conf: str) -> dict:
    return dict(
        os.environ,
        JAVA_HOME=java_home(),
        HADOOP_CONF_DIR=conf,
        HADOOP_LOG_DIR=os.path.dirname(conf),
    )


# ----------------------------------------------------------------------------- running
def _ours(pid: int, state: str) -> bool:
    """Whether ``pid`` is still one of this cluster's processes (a PID can be reused)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return state.encode() in f.read()
    except OSError:
        return False


def pid_files(state: str) -> dict:
    pids = {}
    for path in glob.glob(os.path.join(state, "*.pid")):
        try:
            with open(path) as f:
                pids[os.path.basename(path)[:-4]] = int(f.read())
        except (OSError, ValueError):
            continue
    return pids


def running(state: str) -> list[int]:
    return [pid for pid in pid_files(state).values() if _ours(pid, state)]


def format_namenode(state: str, conf: str) -> bool:
    with open(os.path.join(state, "format.log"), "w") as out:
        formatted = subprocess.run(
            java_cmd(conf, NAMENODE, "-format", "-nonInteractive"),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=120,
            env=daemon_env(conf),
        )
    if formatted.returncode != 0:
        log("formatting the NameNode failed:\n" + tail(state, "format"))
    return formatted.returncode == 0


def launch(
    state: str, conf: str, name: str, cls: str, heap: str = "256m", env: dict | None = None
) -> subprocess.Popen:
    """One daemon in its own session, output to STATE/NAME.log, PID in STATE/NAME.pid."""
    with open(os.path.join(state, name + ".log"), "w") as out:
        proc = subprocess.Popen(
            java_cmd(conf, cls, heap=heap),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env or daemon_env(conf),
        )
    with open(os.path.join(state, name + ".pid"), "w") as f:
        f.write(str(proc.pid))
    return proc


def tail(state: str, name: str, chars: int = 2000) -> str:
    try:
        with open(os.path.join(state, name + ".log"), errors="replace") as f:
            return f.read()[-chars:]
    except OSError:
        return "(no log)"


def http_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def hdfs_ready(info: dict) -> bool:
    """The NameNode is out of safe mode with one live DataNode that has reported its blocks."""
    try:
        beans = http_json(
            info["webhdfs"] + "/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState"
        )["beans"]
        system = http_json(info["webhdfs"] + "/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo")[
            "beans"
        ]
    except (OSError, ValueError, KeyError):
        return False
    return (
        bool(beans and system)
        and beans[0].get("NumLiveDataNodes") == 1
        and system[0].get("Safemode") == ""
    )


def wait_ready(state: str, procs: dict, ready, timeout: float = READY_TIMEOUT) -> bool:
    """Until ``ready()``; False (and every daemon stopped, the state removed) if a daemon
    exits or time runs out, with the logs' ends on stderr."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        dead = [n for n, p in procs.items() if p.poll() is not None]  # our children: no reuse
        if dead:
            log(
                f"{', '.join(dead)} exited during start-up; its last output:\n"
                + "\n".join(tail(state, n) for n in dead)
            )
            stop_children(procs, state)
            return False
        time.sleep(0.3)
    log(
        f"not ready after {timeout:.0f}s; the logs' ends:\n"
        + "\n".join(f"--- {n}\n{tail(state, n, 1500)}" for n in procs)
    )
    stop_children(procs, state)
    return False


def stop_children(procs: dict, state: str) -> None:
    """A failed start: stop the daemons it started (its own children), remove the state."""
    for p in procs.values():
        if p.poll() is None:
            p.terminate()
    for p in procs.values():
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    stop_strays(state)
    shutil.rmtree(state, ignore_errors=True)


def in_container(pid: int, state: str) -> bool:
    """Whether ``pid`` was started in a container of this cluster's NodeManager (or by such
    a process): its working directory is under STATE/nm, or its environment names it (YARN
    sets LOCAL_DIRS, PWD, ... there; children inherit them)."""
    nm = os.path.join(state, "nm") + os.sep
    try:
        if os.readlink(f"/proc/{pid}/cwd").startswith(nm):
            return True
        with open(f"/proc/{pid}/environ", "rb") as f:
            return nm.encode() in f.read()
    except OSError:
        return False


def stop_strays(state: str) -> list[int]:
    """Any process left from a YARN container of this cluster (its NodeManager did not stop
    it), killed by PID; their PIDs."""
    strays = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and in_container(int(entry), state):
            try:
                os.kill(int(entry), signal.SIGKILL)
                strays.append(int(entry))
            except OSError:
                pass
    return strays


def stop_pids(state: str, order: list[str]) -> int:
    """Every daemon of ``state`` by PID (those named in ``order`` first, in that order), TERM
    then KILL after 20 s, then strays; removes the state. The number of daemons stopped."""
    pids = pid_files(state)
    names = [n for n in order if n in pids] + sorted(n for n in pids if n not in order)
    stopped = 0
    for name in names:
        pid = pids[name]
        if not _ours(pid, state):
            continue
        stopped += 1
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while _ours(pid, state) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.1)
        if _ours(pid, state):
            log(f"{name} (PID {pid}) still running 20 s after SIGTERM: SIGKILL")
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
    strays = stop_strays(state)
    if strays:
        log(f"killed {len(strays)} leftover processes of the cluster: PIDs {strays}")
    shutil.rmtree(state, ignore_errors=True)
    return stopped


def _reap(pid: int) -> None:
    """Collect ``pid`` if it was our child (the pytest fixture's case)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# -------------------------------------------------------------------------- commands
def env_lines(state: str) -> list[str]:
    with open(os.path.join(state, "urls")) as f:
        url, webhdfs = f.read().split()[:2]
    conf = os.path.join(state, "conf")
    return [
        f"export SPARKTF_TEST_HDFS={url}",
        f"export SPARKTF_WEBHDFS_URL={webhdfs}",
        f"export HADOOP_CONF_DIR={conf}",
        f"export CLASSPATH={classpath(conf)}",
        f"export ARROW_LIBHDFS_DIR={os.path.join(cache_dir(), 'native')}",
        f"export JAVA_HOME={java_home()}",
    ]


def start_hdfs(state: str, prepare=None) -> tuple[dict, dict] | None:
    """Fetch, configure, format and start a NameNode and a DataNode in ``state`` (a fresh
    directory); (info, processes) once HDFS is ready, None (nothing left) if it failed.
    ``prepare()``, if given, runs first in the fresh directory (a KDC: bin/yarn_kerberos.py)
    and returns the daemons it started, stopped with the others if the start fails."""
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state, mode=0o700)
    fetch(cache_dir())
    procs = prepare() if prepare else {}
    info = write_hdfs_conf(state)
    conf = info["conf"]
    if not format_namenode(state, conf):
        stop_children(procs, state)
        return None
    with open(os.path.join(state, "urls"), "w") as f:
        f.write(f"{info['url']} {info['webhdfs']}\n")
    procs["namenode"] = launch(state, conf, "namenode", NAMENODE)
    procs["datanode"] = launch(state, conf, "datanode", DATANODE)
    if not wait_ready(state, procs, lambda: hdfs_ready(info)):
        return None
    return info, procs


def start(state: str) -> int:
    if running(state):
        log(f"already running in {state}; stop it first: bin/hdfs-test-cluster.sh stop")
        return 1
    started = start_hdfs(state)
    if started is None:
        return 1
    info, _ = started
    print("\n".join(env_lines(state)))
    log(f"running: {info['url']} (WebHDFS {info['webhdfs']}); state in {state}")
    return 0


def stop(state: str) -> int:
    stopped = stop_pids(state, ["datanode", "namenode"])
    log(f"stopped ({stopped} daemons)" if stopped else "was not running")
    return 0


def status(state: str) -> int:
    pids = running(state)
    if pids and len(pids) == len(pid_files(state)):
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
