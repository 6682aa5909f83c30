"""A real YARN (and HDFS) on loopback for tests, trials and docs/yarn.md: ``bin/yarn-test-cluster.sh``.

    bin/yarn-test-cluster.sh start      # ... ResourceManager: http://127.0.0.1:PORT ... and,
                                        # last, HADOOP_CONF_DIR=DIR:  export "$(... start | tail -1)"
    bin/yarn-test-cluster.sh status     # exit 0 and the addresses while it runs, 1 otherwise
    bin/yarn-test-cluster.sh stop       # every daemon by its PID (and any container left), files removed
    bin/yarn-test-cluster.sh yarn ARGS  # Hadoop's `yarn` CLI: yarn logs -applicationId ID,
                                        #   yarn application -list|-kill ID|-status ID
    bin/yarn-test-cluster.sh hdfs ARGS  # Hadoop's `hdfs dfs ...` (FsShell), e.g. hdfs dfs -ls /
    bin/yarn-test-cluster.sh start --kerberos  # a KDC and secure HDFS and YARN: also prints
                                        # KRB5_CONFIG=, PRINCIPAL=, KEYTAB= (bin/yarn_kerberos.py)
    bin/yarn-test-cluster.sh start --hosts N   # (root) a master and N worker hosts, each a
                                        # network namespace on a bridge: bin/yarn_hosts.py
    bin/yarn-test-cluster.sh partition|heal|crash HOST, firewall HOST LO-HI|off,
    cut HOST OTHER|off

Apache Hadoop **3.5.0** (the release of the client that pyspark 4.3's wheel ships): a
ResourceManager, a NodeManager, a NameNode and a DataNode, each its own JVM (``java -cp ...
org.apache.hadoop.yarn.server.resourcemanager.ResourceManager`` and so on), every address on
127.0.0.1. The jars are those of bin/hdfs-test-cluster.sh: fetched once from Maven Central
(``bin/hadoop/pom.xml``) into ``$SPARKTF_HADOOP_CACHE`` (default ``~/.cache/sparktf/hadoop-3.5.0``).

The NodeManager offers ``$SPARKTF_YARN_MEMORY_MB`` (default 12288) MB and
``$SPARKTF_YARN_VCORES`` (default 16: the scheduler counts vcores beside GPUs, and conf/yarn asks 4 an executor) vcores: an ApplicationMaster and 2-3 executors of a few GB
each. YARN's physical memory check is on (a container over its size is killed, as on a real
cluster), the virtual memory check off (as most clusters have it: a JVM's and TensorFlow's
address space is far larger than what they use). Finished applications' logs are aggregated to
HDFS (``hdfs:///tmp/logs``), where ``yarn logs`` reads them. State (configuration, name, data
and NodeManager directories, logs, PIDs) is in ``$SPARKTF_YARN_DIR`` (default
``/tmp/sparktf-yarn-$UID``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hdfs_test_cluster as hadoop
import yarn_hosts
import yarn_kerberos

hadoop.PREFIX = "yarn-test-cluster"

RESOURCEMANAGER = "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager"
NODEMANAGER = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"
CLI = {
    "logs": "org.apache.hadoop.yarn.client.cli.LogsCLI",
    "application": "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
    "node": "org.apache.hadoop.yarn.client.cli.NodeCLI",
    "dfs": "org.apache.hadoop.fs.FsShell",
    "fsck": "org.apache.hadoop.hdfs.tools.DFSck",
}
STOP_ORDER = ["nodemanager", "resourcemanager", "datanode", "namenode", "kdc"]


def state_dir() -> str:
    return os.environ.get("SPARKTF_YARN_DIR") or os.path.join(
        tempfile.gettempdir(), f"sparktf-yarn-{os.getuid()}"
    )


def log(msg: str) -> None:
    print(f"yarn-test-cluster: {msg}", file=sys.stderr, flush=True)


def common_yarn_props(state: str, memory: int, vcores: int) -> dict:
    """yarn-site.xml's settings other than the daemons' addresses (every host's the same)."""
    nm = os.path.join(state, "nm")
    return {
        "yarn.nodemanager.resource.memory-mb": memory,
        "yarn.nodemanager.resource.cpu-vcores": vcores,
        "yarn.scheduler.minimum-allocation-mb": 256,
        "yarn.scheduler.maximum-allocation-mb": memory,
        "yarn.scheduler.maximum-allocation-vcores": vcores,
        # a container's processes (JVM + Python workers + TF process) over its size: killed
        "yarn.nodemanager.pmem-check-enabled": "true",
        "yarn.nodemanager.vmem-check-enabled": "false",
        # Hadoop 3.5's monitor skips its own check when "strict" (cgroups) enforcement is on,
        # which it is by default even without cgroups: nothing was ever killed for memory
        "yarn.nodemanager.resource.memory.enforced": "false",
        "yarn.nodemanager.container-monitor.interval-ms": 1000,
        "yarn.nodemanager.local-dirs": os.path.join(nm, "local"),
        "yarn.nodemanager.log-dirs": os.path.join(nm, "logs"),
        # a shared developer disk may be fuller than YARN's default 90 %: not "unhealthy"
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": 99.9,
        "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb": 512,
        "yarn.log-aggregation-enable": "true",
        "yarn.nodemanager.remote-app-log-dir": "/tmp/logs",
        "yarn.log-aggregation.retain-seconds": 86400,
        "yarn.nodemanager.env-whitelist": "JAVA_HOME,HADOOP_COMMON_HOME,HADOOP_HDFS_HOME,HADOOP_CONF_DIR,"
        "HADOOP_YARN_HOME,PATH,LANG,TZ",
        # a killed container's processes get SIGTERM, then SIGKILL this much later
        "yarn.nodemanager.sleep-delay-before-sigkill.ms": 250,
        "yarn.resourcemanager.nodemanager-connect-retries": 10,
        "yarn.nodemanager.resourcemanager.minimum.version": "NONE",
    }


CAPACITY = {
    "yarn.scheduler.capacity.root.queues": "default",
    "yarn.scheduler.capacity.root.default.capacity": 100,
    "yarn.scheduler.capacity.root.default.maximum-capacity": 100,
    # the default 0.1 leaves ApplicationMasters 1.2 GB of 12: a cluster-mode driver
    # (1 GB + overhead) would wait forever as ACCEPTED
    "yarn.scheduler.capacity.maximum-am-resource-percent": 0.5,
    "yarn.scheduler.capacity.root.default.acl_submit_applications": "*",
    "yarn.scheduler.capacity.root.default.acl_administer_queue": "*",
}


#: The stand-in nvidia-smi (the test machines have no GPU): the NodeManager's GPU plugin runs
#: it for its inventory (``-x -q``), executors' discovery scripts for theirs.
STANDIN_SMI = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "tests",
    "helpers",
    "standin",
    "nvidia-smi",
)


def gpu_props(state: str, conf: str, gpus: int) -> dict:
    """YARN's GPU scheduling: the resource type ``yarn.io/gpu`` (resource-types.xml), the
    NodeManager's GPU plugin pointed at a stand-in ``nvidia-smi`` listing ``gpus`` GPUs (in
    STATE/gpu/bin, which executors put first on their PATH), and a scheduler that counts them
    (DominantResourceCalculator). As on a cluster with the DefaultContainerExecutor, YARN
    counts GPUs but does not isolate them: every container sees every GPU."""
    if gpus <= 0:
        return {}
    bindir = os.path.join(state, "gpu", "bin")
    os.makedirs(bindir, exist_ok=True)
    smi = os.path.join(bindir, "nvidia-smi")
    with open(smi, "w") as f:
        f.write(f'#!/bin/sh\nSTANDIN_GPUS={gpus} exec python3 {STANDIN_SMI} "$@"\n')
    os.chmod(smi, 0o755)
    hadoop.write_site(conf, "resource-types.xml", {"yarn.resource-types": "yarn.io/gpu"})
    return {
        "yarn.nodemanager.resource-plugins": "yarn.io/gpu",
        "yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices": "auto",
        "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables": smi,
    }


def write_yarn_conf(state: str, conf: str) -> dict:
    """yarn-site.xml and capacity-scheduler.xml beside the HDFS files; the addresses.
    ``$SPARKTF_YARN_GPUS`` (default 2; 0: none) stand-in GPUs are offered (:func:`gpu_props`)."""
    ports = {
        n: hadoop.free_port()
        for n in ("rm", "sched", "tracker", "admin", "web", "nm", "nm_web", "localizer")
    }
    memory = int(os.environ.get("SPARKTF_YARN_MEMORY_MB", "12288"))
    vcores = int(os.environ.get("SPARKTF_YARN_VCORES", "16"))
    gpus = gpu_props(state, conf, int(os.environ.get("SPARKTF_YARN_GPUS", "2")))
    hadoop.write_site(
        conf,
        "yarn-site.xml",
        {
            "yarn.resourcemanager.hostname": "127.0.0.1",
            "yarn.resourcemanager.address": f"127.0.0.1:{ports['rm']}",
            "yarn.resourcemanager.scheduler.address": f"127.0.0.1:{ports['sched']}",
            "yarn.resourcemanager.resource-tracker.address": f"127.0.0.1:{ports['tracker']}",
            "yarn.resourcemanager.admin.address": f"127.0.0.1:{ports['admin']}",
            "yarn.resourcemanager.webapp.address": f"127.0.0.1:{ports['web']}",
            "yarn.nodemanager.hostname": "127.0.0.1",
            "yarn.nodemanager.address": f"127.0.0.1:{ports['nm']}",
            "yarn.nodemanager.webapp.address": f"127.0.0.1:{ports['nm_web']}",
            "yarn.nodemanager.localizer.address": f"127.0.0.1:{ports['localizer']}",
            **common_yarn_props(state, memory, vcores),
            **gpus,
        },
    )
    calculator = "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator"
    hadoop.write_site(
        conf,
        "capacity-scheduler.xml",
        {
            **CAPACITY,
            **({"yarn.scheduler.capacity.resource-calculator": calculator} if gpus else {}),
        },
    )
    os.makedirs(os.path.join(conf, "webapps", "nodemanager"), exist_ok=True)
    return {"rm_web": f"http://127.0.0.1:{ports['web']}", "rm": f"127.0.0.1:{ports['rm']}"}


def yarn_ready(rm_web: str) -> bool:
    """The NodeManager is registered and RUNNING with its resources."""
    try:
        nodes = hadoop.http_json(rm_web + "/ws/v1/cluster/nodes")["nodes"] or {}
    except (OSError, ValueError, KeyError):
        return False
    return any(n.get("state") == "RUNNING" for n in nodes.get("node", []))


def make_hdfs_dirs(conf: str, env: dict | None = None) -> str | None:
    """Log aggregation's root (and /user) on HDFS, world-writable as on a real cluster (the
    NodeManager writes there as the application's user); why not, if it failed."""
    for args in (
        ("-mkdir", "-p", "/tmp/logs", "/user"),
        ("-chmod", "1777", "/tmp", "/tmp/logs", "/user"),
    ):
        out = subprocess.run(
            hadoop.java_cmd(conf, CLI["dfs"], *args),
            capture_output=True,
            text=True,
            env=env or hadoop.daemon_env(conf),
            timeout=120,
        )
        if out.returncode:
            return f"could not create /tmp/logs on HDFS:\n{out.stderr[-2000:]}"
    return None


def launch_program(state: str, argv: list[str], name: str, env: dict) -> subprocess.Popen:
    """A daemon that is not a JVM (the KDC), as hadoop.launch starts the others: its own
    session, output to STATE/NAME.log, PID in STATE/NAME.pid."""
    with open(os.path.join(state, name + ".log"), "w") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    with open(os.path.join(state, name + ".pid"), "w") as f:
        f.write(str(proc.pid))
    return proc


def secure(state: str) -> bool:
    """Whether the cluster in ``state`` was started with --kerberos (its KDC's files are there)."""
    return os.path.exists(os.path.join(yarn_kerberos.kdir(state), "krb5.conf"))


def use_kerberos(state: str) -> None:
    """Every site file written from now on is a secure cluster's, every JVM started finds
    the KDC."""
    hadoop.EXTRA_SITE.update(yarn_kerberos.site_props(state))
    hadoop.JVM_OPTS.extend(yarn_kerberos.jvm_opts(state))


def start_kdc(state: str) -> dict:
    """``start --kerberos``'s first step, in the fresh state directory: the KDC, principals
    and keytabs."""
    kdc = yarn_kerberos.start_kdc(
        state, lambda argv, name: launch_program(state, argv, name, yarn_kerberos.env(state))
    )
    use_kerberos(state)
    return {"kdc": kdc}


def superuser_env(state: str, conf: str) -> dict:
    """The environment of Hadoop's CLI as HDFS's superuser (hdfs/localhost's ticket)."""
    d = yarn_kerberos.kdir(state)
    cache = os.path.join(d, "hdfs.ccache")
    yarn_kerberos.kinit(state, "hdfs/localhost", os.path.join(d, "service.keytab"), cache)
    return dict(hadoop.daemon_env(conf), KRB5CCNAME=cache)


def start(state: str, kerberos: bool = False) -> int:
    if hadoop.running(state):
        log(f"already running in {state}; stop it first: bin/yarn-test-cluster.sh stop")
        return 1
    if kerberos and yarn_kerberos.missing():
        log(f"--kerberos: {yarn_kerberos.missing()}")
        return 1
    try:
        started = hadoop.start_hdfs(state, prepare=(lambda: start_kdc(state)) if kerberos else None)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:  # (the KDC's steps)
        log(f"start failed: {e}")
        hadoop.stop_pids(state, STOP_ORDER)
        return 1
    if started is None:
        return 1
    info, procs = started
    conf = info["conf"]
    addresses = write_yarn_conf(state, conf)
    with open(os.path.join(state, "urls"), "a") as f:
        f.write(f"{addresses['rm_web']}\n")
    try:
        failed = make_hdfs_dirs(conf, superuser_env(state, conf) if kerberos else None)
    except (RuntimeError, subprocess.SubprocessError) as e:  # (kinit as hdfs/localhost)
        failed = str(e)
    if failed:
        log(failed)
        hadoop.stop_children(procs, state)
        return 1
    procs["resourcemanager"] = hadoop.launch(
        state, conf, "resourcemanager", RESOURCEMANAGER, heap="512m"
    )
    procs["nodemanager"] = hadoop.launch(state, conf, "nodemanager", NODEMANAGER, heap="512m")
    if not hadoop.wait_ready(state, procs, lambda: yarn_ready(addresses["rm_web"])):
        return 1
    print(f"ResourceManager: {addresses['rm_web']} (RPC {addresses['rm']})")
    print(f"HDFS: {info['url']} (WebHDFS {info['webhdfs']})")
    if kerberos:
        print("\n".join(yarn_kerberos.describe(state)))
    print(f"HADOOP_CONF_DIR={conf}")
    log(f"running; state in {state}; stop with: bin/yarn-test-cluster.sh stop")
    return 0


def start_hosts(state: str, n: int) -> int:
    """``start --hosts N``: the master in the root namespace, N worker hosts (bin/yarn_hosts.py);
    everything made is removed again if any step fails."""
    why = yarn_hosts.usable()
    if why:
        log(f"--hosts {n}: {why}")
        return 1
    if hadoop.running(state) or yarn_hosts.load_net(state):
        log(f"already running in {state}; stop it first: bin/yarn-test-cluster.sh stop")
        return 1
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state, mode=0o700)
    hadoop.fetch(hadoop.cache_dir())
    net: dict = {}
    try:
        net = yarn_hosts.make_network(state, n)
        memory = int(os.environ.get("SPARKTF_YARN_MEMORY_MB", yarn_hosts.WORKER_MEMORY_MB))
        vcores = int(os.environ.get("SPARKTF_YARN_VCORES", yarn_hosts.WORKER_VCORES))
        info = yarn_hosts.write_confs(
            state, net, common_yarn_props(state, memory, vcores), CAPACITY
        )
        info["spark_conf"] = yarn_hosts.write_spark_conf(
            state, net["master"]["address"], os.path.dirname(os.path.dirname(__file__))
        )
        procs = yarn_hosts.start_daemons(state, net, {"resourcemanager": RESOURCEMANAGER})
        yarn_hosts.wait(
            f"HDFS with {n} DataNodes",
            lambda: yarn_hosts.live_datanodes(info["webhdfs"]) == n,
            procs,
            state,
        )
        failed = make_hdfs_dirs(info["conf"])
        if failed:
            raise yarn_hosts.HostsError(failed)
        yarn_hosts.start_nodemanagers(state, net, procs, NODEMANAGER)
        yarn_hosts.wait(
            f"YARN with {n} NodeManagers",
            lambda: len(yarn_hosts.running_nodemanagers(info["rm_web"])) == n,
            procs,
            state,
        )
    except (yarn_hosts.HostsError, OSError, subprocess.SubprocessError) as e:
        log(f"start --hosts {n} failed: {e}\nremoving what it made")
        stop_hosts(state, yarn_hosts.load_net(state) or net)
        return 1
    with open(os.path.join(state, "urls"), "w") as f:
        f.write(f"{info['url']} {info['webhdfs']}\n{info['rm_web']}\n")
    print("\n".join(yarn_hosts.describe(net, info)))
    log(f"running {n} worker hosts; state in {state}; stop with: bin/yarn-test-cluster.sh stop")
    return 0


def stop_hosts(state: str, net: dict) -> int:
    stopped = yarn_hosts.stop(state, net) if net else hadoop.stop_pids(state, STOP_ORDER)
    log(
        f"stopped: {len(net.get('hosts', []))} worker hosts and their network removed, "
        f"{stopped} master daemons"
    )
    return 0


def stop(state: str) -> int:
    net = yarn_hosts.load_net(state)
    if net is not None:
        return stop_hosts(state, net)
    stopped = hadoop.stop_pids(state, STOP_ORDER)
    log(f"stopped ({stopped} daemons)" if stopped else "was not running")
    return 0


def status_hosts(state: str, net: dict) -> int:
    pids = hadoop.running(state)
    for line in yarn_hosts.host_status(state, net):
        print(line)
    try:
        with open(os.path.join(state, "urls")) as f:
            url, webhdfs, rm_web = f.read().split()[:3]
    except (OSError, ValueError):
        log("half started or half stopped: stop it")
        return 1
    print(f"host master {net['master']['address']}: ResourceManager {rm_web}, HDFS {url}")
    print(f"HADOOP_CONF_DIR={os.path.join(state, 'conf')}")
    up = len(pids) == 2
    log(f"master daemons {'running' if up else 'NOT all running'} (PIDs {pids})")
    return 0 if up else 1


def status(state: str) -> int:
    net = yarn_hosts.load_net(state)
    if net is not None:
        return status_hosts(state, net)
    pids = hadoop.running(state)
    expected = len(STOP_ORDER) - (0 if secure(state) else 1)
    if len(pids) == expected and len(hadoop.pid_files(state)) == expected:
        with open(os.path.join(state, "urls")) as f:
            url, webhdfs, rm_web = f.read().split()[:3]
        print(f"ResourceManager: {rm_web}")
        print(f"HDFS: {url} (WebHDFS {webhdfs})")
        if secure(state):
            print("\n".join(yarn_kerberos.describe(state)))
        print(f"HADOOP_CONF_DIR={os.path.join(state, 'conf')}")
        log(f"running, PIDs {pids}")
        return 0
    log("not running" if not pids else f"half running (PIDs {pids}): stop it")
    return 1


def cli(state: str, tool: str, args: list[str]) -> int:
    """Hadoop's `yarn logs|application|node ...` or `hdfs dfs|fsck ...`, on the running
    cluster."""
    sub = args[0] if args else ""
    if (tool, sub) not in {
        ("yarn", "logs"),
        ("yarn", "application"),
        ("yarn", "node"),
        ("hdfs", "dfs"),
        ("hdfs", "fsck"),
    }:
        log(
            f"`{tool} {sub}` is not offered; use: yarn logs|application|node ..., hdfs dfs|fsck ..."
        )
        return 2
    conf = os.path.join(state, "conf")
    if not os.path.isdir(conf):
        log(f"not running (no {conf}): bin/yarn-test-cluster.sh start")
        return 1
    env = hadoop.daemon_env(conf)
    if secure(state):
        hadoop.JVM_OPTS.extend(yarn_kerberos.jvm_opts(state))
        if not os.environ.get("KRB5CCNAME"):  # the user's ticket, from the user's keytab
            d = yarn_kerberos.kdir(state)
            env["KRB5CCNAME"] = os.path.join(d, "cli.ccache")
            keytab = os.path.join(d, yarn_kerberos.USER + ".keytab")
            yarn_kerberos.kinit(state, yarn_kerberos.USER, keytab, env["KRB5CCNAME"])
    cmd = hadoop.java_cmd(conf, CLI[sub], *args[1:])
    cmd.insert(1, "-Dhadoop.root.logger=WARN,console")  # its own output alone on stdout
    return subprocess.run(cmd, env=env).returncode


def fault(state: str, verb: str, args: list[str]) -> int:
    """partition|heal|crash HOST, firewall HOST LO-HI|off, cut HOST OTHER|off: on one worker
    host."""
    try:
        if verb in ("partition", "heal") and len(args) == 1:
            yarn_hosts.set_link(state, args[0], up=verb == "heal")
            log(f"{args[0]}: link {'up' if verb == 'heal' else 'down'}")
        elif verb == "crash" and len(args) == 1:
            killed = yarn_hosts.crash(state, args[0])
            log(f"{args[0]}: link down, {len(killed)} processes SIGKILLed: {killed}")
        elif verb == "firewall" and len(args) == 2:
            yarn_hosts.firewall(state, args[0], args[1])
            log(f"{args[0]}: firewall {args[1]}")
        elif verb == "cut" and len(args) == 2:
            yarn_hosts.cut(state, args[0], args[1])
            log(f"{args[0]}: " + ("cuts removed" if args[1] == "off" else f"cut from {args[1]}"))
        else:
            extra = {"firewall": " LO-HI|off", "cut": " OTHER|off"}.get(verb, "")
            log(f"usage: {verb} HOST{extra}")
            return 2
    except yarn_hosts.HostsError as e:
        log(str(e))
        return 1
    return 0


def main(argv: list[str]) -> int:
    state = state_dir()
    if argv and argv[0] in ("yarn", "hdfs"):
        return cli(state, argv[0], argv[1:])
    if argv and argv[0] in ("partition", "heal", "crash", "firewall", "cut"):
        return fault(state, argv[0], argv[1:])
    if argv[:2] == ["start", "--hosts"] and len(argv) == 3 and argv[2].isdigit():
        if int(argv[2]) < 2:
            log("--hosts N needs N >= 2 (without --hosts: one host on loopback)")
            return 2
        return start_hosts(state, int(argv[2]))
    if argv == ["start", "--kerberos"]:
        return start(state, kerberos=True)
    if len(argv) != 1 or argv[0] not in ("start", "stop", "status"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return {"start": start, "stop": stop, "status": status}[argv[0]](state)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
