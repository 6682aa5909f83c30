"""Several hosts on one machine for ``bin/yarn-test-cluster.sh start --hosts N`` (driver side:
a test tool, run as root).

    bin/yarn-test-cluster.sh start --hosts 3   # master + worker1..worker3; each host's name
                                               # and address, then HADOOP_CONF_DIR=DIR last
    bin/yarn-test-cluster.sh status            # the hosts, each with its daemons' state
    bin/yarn-test-cluster.sh partition HOST    # HOST's link down (nothing killed) ...
    bin/yarn-test-cluster.sh heal HOST         # ... and up again
    bin/yarn-test-cluster.sh crash HOST        # every process of HOST SIGKILLed, its link down
    bin/yarn-test-cluster.sh firewall HOST LO-HI  # nftables in HOST: only YARN's and HDFS's
                                               # ports and LO-HI open to it (LO-HI "off": none)
    bin/yarn-test-cluster.sh cut HOST OTHER    # nftables in HOST: every packet between HOST
                                               # and worker host OTHER dropped (both still
                                               # reach the master and the edge node)
    bin/yarn-test-cluster.sh cut HOST off      # HOST's cuts removed
    bin/yarn-test-cluster.sh stop              # every process, namespace, link and bridge made

A **worker host** is a Linux network namespace (``ip netns``) with its own address on a bridge,
joined to it by a veth pair, running a NodeManager and a DataNode (each its own JVM started
with ``ip netns exec``, so it and every container it launches live in that namespace, bind
that address, and reach the others only through the bridge). Each has its own configuration
directory (its addresses, its NodeManager's and DataNode's directories). HDFS keeps 2 replicas.

The **master** (ResourceManager, NameNode) runs in the root namespace on the bridge's own
address, which is also the **edge node** where a client-mode driver runs: the faults act on
worker hosts only, so the master needs no namespace of its own; a driver in the root
namespace reaches every host through the bridge without a route; and the machine's other
addresses stay out of it (nothing listens on them, no host has a route to them). In cluster
mode the driver runs in a container, on a worker host.

Spark in a container (executor, ApplicationMaster) leaves ``SPARK_LOCAL_IP`` unset and finds
its host's address itself: the machine's name resolves to loopback (checked at start), so
Spark takes the namespace's one other interface, ``eth0``, its host's address; YARN names each
NodeManager by its address (``yarn.nodemanager.bind-host``), which is what executors advertise
and what sparktf puts in TF_CONFIG. ``SPARK_LOCAL_IP`` cannot do it: Spark's
ApplicationMaster copies its own ``SPARK_*`` variables into every executor's environment (its
host's address for all), and ``yarn.nodemanager.admin-env`` appends to that (``ADDR1:ADDR2``,
which fails); mapping the machine's name to each host's address in ``/etc/netns/NS/hosts``
gave every NodeManager the same name. A job must not set ``spark.executorEnv.SPARK_LOCAL_IP``. The cluster's Spark settings
(driver on the bridge's address) are written to a ``SPARK_CONF_DIR`` that ``start`` prints.

Names carry a tag from the state directory's hash (``stf`` + 6 hex digits): the bridge
``TAGbr``, the namespaces ``TAG-workerI``, the veth ``TAGwI``; the subnet is a free
``10.X.Y.0/24`` (checked against every address and route of the machine). What was made is
recorded in ``STATE/net.json`` as it is made, and ``stop`` (or a failed start) removes exactly
that, never anything else.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import hdfs_test_cluster as hadoop

NET_FILE = "net.json"
# Fixed in each worker host (each namespace has ports of its own): YARN's and HDFS's defaults
WORKER_PORTS = {
    "nm": 8041,
    "nm_web": 8042,
    "localizer": 8040,
    "dn": 9866,
    "dn_http": 9864,
    "dn_ipc": 9867,
}
WORKER_MEMORY_MB = 6144
WORKER_VCORES = 4


class HostsError(RuntimeError):
    """A multi-host step failed: the message says which and why."""


# ------------------------------------------------------------------------------- network
def tag_of(state: str) -> str:
    return "stf" + hashlib.sha1(os.path.realpath(state).encode()).hexdigest()[:6]


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise HostsError(f"`ip {' '.join(args)}` failed: {out.stderr.strip()}")
    return out


def usable() -> str | None:
    """Why this machine cannot run several hosts (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (ip netns, veth pairs and a bridge)"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2) on PATH"
    probe = ip("netns", "list", check=False)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.strip()}"
    try:
        own = socket.gethostbyname(socket.gethostname())
    except OSError:
        own = "127.0.0.1"  # (unresolvable: Spark then enumerates the interfaces too)
    if not ipaddress.ip_address(own).is_loopback:
        return (
            f"the machine's name resolves to {own}, not loopback: Spark in a worker host "
            "would advertise that address instead of its host's (map the name to 127.0.0.1 "
            "in /etc/hosts)"
        )
    return None


def pick_subnet(tag: str) -> ipaddress.IPv4Network:
    """A 10.X.Y.0/24 that overlaps no address or route of this machine."""
    used = []
    for cmd in (("-4", "addr"), ("-4", "route")):
        for word in ip(*cmd).stdout.split():
            try:
                used.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                continue
    seed = int(tag[3:], 16)
    for i in range(200):
        net = ipaddress.ip_network(f"10.{200 + (seed + i) % 50}.{(seed >> 8) % 256}.0/24")
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return net
    raise HostsError("no free 10.x.y.0/24 subnet on this machine")


def save_net(state: str, net: dict) -> None:
    with open(os.path.join(state, NET_FILE), "w") as f:
        json.dump(net, f, indent=1)


def load_net(state: str) -> dict | None:
    try:
        with open(os.path.join(state, NET_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def make_network(state: str, n: int) -> dict:
    """The bridge (master's address) and ``n`` worker namespaces, recorded as they are made."""
    tag = tag_of(state)
    subnet = pick_subnet(tag)
    addrs = list(subnet.hosts())
    net: dict = {"tag": tag, "subnet": str(subnet), "bridge": None, "hosts": []}
    net["master"] = {"name": "master", "address": str(addrs[0])}
    save_net(state, net)
    bridge = f"{tag}br"
    ip("link", "add", bridge, "type", "bridge")
    net["bridge"] = bridge
    save_net(state, net)
    ip("addr", "add", f"{addrs[0]}/24", "dev", bridge)
    ip("link", "set", bridge, "up")
    for i in range(1, n + 1):
        host = {
            "name": f"worker{i}",
            "ns": f"{tag}-worker{i}",
            "veth": f"{tag}w{i}",
            "address": str(addrs[9 + i]),
            "made": [],
        }
        net["hosts"].append(host)
        ip("netns", "add", host["ns"])
        host["made"].append("ns")
        save_net(state, net)
        ip("link", "add", host["veth"], "type", "veth", "peer", "name", host["veth"] + "p")
        host["made"].append("veth")
        save_net(state, net)
        ip("link", "set", host["veth"] + "p", "netns", host["ns"])
        ip("-n", host["ns"], "link", "set", host["veth"] + "p", "name", "eth0")
        ip("-n", host["ns"], "addr", "add", f"{host['address']}/24", "dev", "eth0")
        ip("-n", host["ns"], "link", "set", "lo", "up")
        ip("-n", host["ns"], "link", "set", "eth0", "up")
        ip("link", "set", host["veth"], "master", bridge)
        ip("link", "set", host["veth"], "up")
    return net


def netns_pids(ns: str) -> list[int]:
    out = ip("netns", "pids", ns, check=False)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def kill_host_processes(host: dict, grace: float = 0.0) -> list[int]:
    """Every process in the host's namespace, by PID (SIGTERM and ``grace`` s first if
    asked), until none is left; their PIDs."""
    killed: list[int] = []
    if grace:
        for pid in netns_pids(host["ns"]):
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while netns_pids(host["ns"]) and time.monotonic() < deadline:
            time.sleep(0.2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = netns_pids(host["ns"])
        if not pids:
            break
        for pid in pids:
            if _signal(pid, signal.SIGKILL):
                killed.append(pid)
            hadoop._reap(pid)
        time.sleep(0.1)
    return sorted(set(killed))


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except OSError:
        return False


def remove_network(net: dict) -> None:
    """Exactly what ``net`` records as made: each host's processes, veth and namespace, then
    the bridge."""
    for host in net.get("hosts", []):
        made = host.get("made", [])
        if "ns" in made:
            kill_host_processes(host, grace=5.0)
        if "veth" in made:
            ip("link", "del", host["veth"], check=False)  # (its peer goes with it)
        if "ns" in made:
            ip("netns", "del", host["ns"], check=False)
    if net.get("bridge"):
        ip("link", "del", net["bridge"], check=False)


def host_of(net: dict, name: str) -> dict:
    for host in net["hosts"]:
        if host["name"] == name:
            return host
    raise HostsError(
        f"no worker host {name!r}; the hosts are {', '.join(h['name'] for h in net['hosts'])}"
    )


# ---------------------------------------------------------------------- configuration
def free_port_on(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def master_props(state: str, master: str) -> tuple[dict, dict, dict]:
    """(core-site, the master's hdfs-site, the ResourceManager's part of yarn-site)."""
    p = {
        n: free_port_on(master)
        for n in ("rpc", "http", "snn", "rm", "sched", "tracker", "admin", "web")
    }
    core = {
        "fs.defaultFS": f"hdfs://{master}:{p['rpc']}",
        "hadoop.tmp.dir": os.path.join(state, "tmp"),
    }
    hdfs = {
        "dfs.replication": 2,
        "dfs.namenode.name.dir": "file://" + os.path.join(state, "name"),
        "dfs.namenode.rpc-address": f"{master}:{p['rpc']}",
        "dfs.namenode.http-address": f"{master}:{p['http']}",
        "dfs.namenode.secondary.http-address": f"{master}:{p['snn']}",
        "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        "dfs.namenode.safemode.extension": 0,
        "dfs.namenode.resource.du.reserved": 0,
        "dfs.permissions.enabled": "true",
        "dfs.webhdfs.enabled": "true",
        # a lost DataNode is declared dead after 2 x recheck + 10 x heartbeat: 70 s, not 10 min
        "dfs.namenode.heartbeat.recheck-interval": 30000,
        "dfs.heartbeat.interval": 1,
        # clients use the DataNodes' addresses as registered (their own hosts')
        "dfs.client.use.datanode.hostname": "false",
    }
    rm = {
        "yarn.resourcemanager.hostname": master,
        "yarn.resourcemanager.address": f"{master}:{p['rm']}",
        "yarn.resourcemanager.scheduler.address": f"{master}:{p['sched']}",
        "yarn.resourcemanager.resource-tracker.address": f"{master}:{p['tracker']}",
        "yarn.resourcemanager.admin.address": f"{master}:{p['admin']}",
        "yarn.resourcemanager.webapp.address": f"{master}:{p['web']}",
        # a NodeManager silent this long is LOST and its containers failed (default 10 min)
        "yarn.nm.liveness-monitor.expiry-interval-ms": 30000,
        "yarn.resourcemanager.nodemanager-connect-retries": 10,
    }
    return core, hdfs, rm


def worker_props(host_dir: str, address: str) -> tuple[dict, dict]:
    """(the worker's hdfs-site part, its NodeManager's yarn-site part)."""
    p = WORKER_PORTS
    hdfs = {
        "dfs.datanode.data.dir": "file://" + os.path.join(host_dir, "data"),
        "dfs.datanode.address": f"{address}:{p['dn']}",
        "dfs.datanode.http.address": f"{address}:{p['dn_http']}",
        "dfs.datanode.ipc.address": f"{address}:{p['dn_ipc']}",
        "dfs.datanode.hostname": address,
    }
    nm = os.path.join(host_dir, "nm")
    memory = int(os.environ.get("SPARKTF_YARN_MEMORY_MB", WORKER_MEMORY_MB))
    yarn = {
        "yarn.nodemanager.hostname": address,
        # with a bind-host, the NodeManager's id is yarn.nodemanager.address's host as given
        # (else the address's reverse lookup: the machine's name, the same for every host)
        "yarn.nodemanager.bind-host": address,
        "yarn.nodemanager.address": f"{address}:{p['nm']}",
        "yarn.nodemanager.webapp.address": f"{address}:{p['nm_web']}",
        "yarn.nodemanager.localizer.address": f"{address}:{p['localizer']}",
        "yarn.nodemanager.local-dirs": os.path.join(nm, "local"),
        "yarn.nodemanager.log-dirs": os.path.join(nm, "logs"),
        "yarn.nodemanager.resource.memory-mb": memory,
        "yarn.nodemanager.resource.cpu-vcores": int(
            os.environ.get("SPARKTF_YARN_VCORES", WORKER_VCORES)
        ),
    }
    return hdfs, yarn


def write_confs(state: str, net: dict, common_yarn: dict, capacity: dict) -> dict:
    """The master's conf (STATE/conf: the clients') and each worker's own; the URLs."""
    master = net["master"]["address"]
    core, hdfs, rm = master_props(state, master)
    memory = int(os.environ.get("SPARKTF_YARN_MEMORY_MB", WORKER_MEMORY_MB))
    vcores = int(os.environ.get("SPARKTF_YARN_VCORES", WORKER_VCORES))
    yarn = dict(
        common_yarn,
        **rm,
        **{
            "yarn.scheduler.maximum-allocation-mb": memory,
            "yarn.scheduler.maximum-allocation-vcores": vcores,
        },
    )
    confs = [(os.path.join(state, "conf"), {}, {})]
    for host in net["hosts"]:
        host_dir = os.path.join(state, "hosts", host["name"])
        confs.append((os.path.join(host_dir, "conf"), *worker_props(host_dir, host["address"])))
    for conf, hdfs_extra, yarn_extra in confs:
        for app in ("hdfs", "datanode", "secondary", "journal", "nodemanager"):
            os.makedirs(os.path.join(conf, "webapps", app), exist_ok=True)
        hadoop.write_site(conf, "core-site.xml", core)
        hadoop.write_site(conf, "hdfs-site.xml", dict(hdfs, **hdfs_extra))
        hadoop.write_site(conf, "yarn-site.xml", dict(yarn, **yarn_extra))
        hadoop.write_site(conf, "capacity-scheduler.xml", capacity)
        hadoop.write_log4j(conf)
    return {
        "url": core["fs.defaultFS"],
        "webhdfs": f"http://{hdfs['dfs.namenode.http-address']}",
        "rm_web": f"http://{rm['yarn.resourcemanager.webapp.address']}",
        "rm": rm["yarn.resourcemanager.address"],
        "conf": os.path.join(state, "conf"),
    }


SPARK_DEFAULTS = """\
# Spark settings for the multi-host test YARN of bin/yarn-test-cluster.sh start --hosts N
# (SPARK_CONF_DIR): the driver on the edge node's (the bridge's) address; no
# spark.executorEnv.SPARK_LOCAL_IP (a container advertises its own host's address).
spark.submit.deployMode                       client
spark.driver.host                             {master}
spark.driver.bindAddress                      {master}
spark.executor.instances                      2
spark.executor.cores                          1
spark.executor.memory                         1g
spark.executor.memoryOverhead                 2g
spark.dynamicAllocation.enabled               false
spark.scheduler.minRegisteredResourcesRatio   1.0
spark.yarn.maxAppAttempts                     1
spark.ui.enabled                              false
spark.ui.showConsoleProgress                  false
"""


def write_spark_conf(state: str, master: str, root: str) -> str:
    spark_conf = os.path.join(state, "spark-conf")
    os.makedirs(spark_conf, exist_ok=True)
    with open(os.path.join(spark_conf, "spark-defaults.conf"), "w") as f:
        f.write(SPARK_DEFAULTS.format(master=master))
    shutil.copy(
        os.path.join(root, "conf", "log4j2.properties"),
        os.path.join(spark_conf, "log4j2.properties"),
    )
    return spark_conf


# ----------------------------------------------------------------------------- daemons
def launch_in(state: str, host: dict | None, name: str, cls: str, heap: str) -> subprocess.Popen:
    """One daemon (in ``host``'s namespace, or the master's), output to DIR/NAME.log, PID in
    DIR/NAME.pid (DIR: the host's directory, or STATE for the master)."""
    where = os.path.join(state, "hosts", host["name"]) if host else state
    conf = os.path.join(where, "conf")
    cmd = hadoop.java_cmd(conf, cls, heap=heap)
    if host:
        cmd = ["ip", "netns", "exec", host["ns"], *cmd]  # (execs: the PID is the JVM's)
    with open(os.path.join(where, name + ".log"), "w") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=hadoop.daemon_env(conf),
        )
    with open(os.path.join(where, name + ".pid"), "w") as f:
        f.write(str(proc.pid))
    return proc


def live_datanodes(webhdfs: str) -> int:
    try:
        beans = hadoop.http_json(
            webhdfs + "/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState"
        )["beans"]
        system = hadoop.http_json(webhdfs + "/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo")[
            "beans"
        ]
    except (OSError, ValueError, KeyError):
        return -1
    if not (beans and system) or system[0].get("Safemode") != "":
        return -1
    return int(beans[0].get("NumLiveDataNodes", 0))


def running_nodemanagers(rm_web: str) -> list[str]:
    try:
        nodes = hadoop.http_json(rm_web + "/ws/v1/cluster/nodes")["nodes"] or {}
    except (OSError, ValueError, KeyError):
        return []
    return [n["nodeHostName"] for n in nodes.get("node", []) if n.get("state") == "RUNNING"]


def wait(what: str, ready, procs: dict, state: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        dead = [n for n, p in procs.items() if p.poll() is not None]
        if dead:
            raise HostsError(
                f"{', '.join(dead)} exited while waiting for {what}; its last output:\n"
                + "\n".join(daemon_tail(state, n) for n in dead)
            )
        time.sleep(0.5)
    raise HostsError(
        f"{what}: not after {timeout:.0f}s; the logs' ends:\n"
        + "\n".join(f"--- {n}\n{daemon_tail(state, n, 800)}" for n in procs)
    )


def daemon_tail(state: str, name: str, chars: int = 2000) -> str:
    """``name`` is ``daemon`` (the master's) or ``host/daemon``."""
    host, _, daemon = name.rpartition("/")
    return hadoop.tail(os.path.join(state, "hosts", host) if host else state, daemon, chars)


def start_daemons(state: str, net: dict, classes: dict) -> dict:
    """NameNode (formatted) and ResourceManager on the master, a DataNode and a NodeManager
    in each worker host; the processes, once HDFS (N live DataNodes) and YARN (N running
    NodeManagers) are ready."""
    conf = os.path.join(state, "conf")
    if not hadoop.format_namenode(state, conf):
        raise HostsError("formatting the NameNode failed:\n" + hadoop.tail(state, "format"))
    procs = {
        "namenode": launch_in(state, None, "namenode", hadoop.NAMENODE, "256m"),
        "resourcemanager": launch_in(
            state, None, "resourcemanager", classes["resourcemanager"], "512m"
        ),
    }
    for host in net["hosts"]:
        os.makedirs(os.path.join(state, "hosts", host["name"]), exist_ok=True)
        procs[f"{host['name']}/datanode"] = launch_in(
            state, host, "datanode", hadoop.DATANODE, "256m"
        )
    return procs


def start_nodemanagers(state: str, net: dict, procs: dict, cls: str) -> None:
    for host in net["hosts"]:
        procs[f"{host['name']}/nodemanager"] = launch_in(state, host, "nodemanager", cls, "512m")


def describe(net: dict, info: dict) -> list[str]:
    lines = [
        f"host master {net['master']['address']} (edge node, root namespace; bridge "
        f"{net['bridge']}): ResourceManager, NameNode"
    ]
    for host in net["hosts"]:
        lines.append(
            f"host {host['name']} {host['address']} (namespace {host['ns']}): NodeManager, DataNode"
        )
    lines += [
        f"ResourceManager: {info['rm_web']} (RPC {info['rm']})",
        f"HDFS: {info['url']} (WebHDFS {info['webhdfs']})",
        f"SPARK_CONF_DIR={info['spark_conf']}",
        f"SPARK_LOCAL_IP={net['master']['address']}",
        f"HADOOP_CONF_DIR={info['conf']}",
    ]
    return lines


# ---------------------------------------------------------------------------- verbs
def set_link(state: str, name: str, up: bool) -> int:
    net = load_net(state)
    if net is None:
        raise HostsError("no multi-host cluster here: bin/yarn-test-cluster.sh start --hosts N")
    host = host_of(net, name)
    ip("link", "set", host["veth"], "up" if up else "down")
    host["link"] = "up" if up else "down"
    save_net(state, net)
    return 0


def crash(state: str, name: str) -> list[int]:
    """A power loss: the host's link down, then every process in it SIGKILLed."""
    net = load_net(state)
    if net is None:
        raise HostsError("no multi-host cluster here: bin/yarn-test-cluster.sh start --hosts N")
    host = host_of(net, name)
    ip("link", "set", host["veth"], "down")
    killed = kill_host_processes(host)
    host["link"], host["crashed"] = "down", True
    save_net(state, net)
    return killed


def _nft_table_gone(state: str, name: str, table: str) -> tuple[dict, dict]:
    """The network and worker host ``name``, with nftables table ``table`` removed from the
    host's namespace (where it was there)."""
    net = load_net(state)
    if net is None:
        raise HostsError("no multi-host cluster here: bin/yarn-test-cluster.sh start --hosts N")
    host = host_of(net, name)
    if shutil.which("nft") is None:
        raise HostsError("no `nft` on PATH: apt-get install -y nftables")
    subprocess.run(
        ["ip", "netns", "exec", host["ns"], "nft", "delete", "table", "inet", table],
        capture_output=True,
    )
    return net, host


def _nft_load(host: dict, rules: str) -> None:
    """Load the nftables ``rules`` into the host's namespace."""
    out = subprocess.run(
        ["ip", "netns", "exec", host["ns"], "nft", "-f", "-"],
        input=rules,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise HostsError(f"nft in {host['ns']} failed: {out.stderr.strip()}")


def firewall(state: str, name: str, span: str) -> str:
    """nftables in the host's namespace: inbound TCP only to YARN's and HDFS's ports and
    ``span`` (``LO-HI``; ``off`` removes the firewall); the ruleset."""
    table = "sparktf_firewall"
    net, host = _nft_table_gone(state, name, table)
    if span == "off":
        host.pop("firewall", None)
        save_net(state, net)
        return ""
    lo, _, hi = span.partition("-")
    if not (lo.isdigit() and hi.isdigit() and 0 < int(lo) <= int(hi) < 65536):
        raise HostsError(f"firewall {name} {span}: give a port range LO-HI, e.g. 40000-40100")
    ports = ", ".join(str(p) for p in sorted(WORKER_PORTS.values()))
    rules = (
        f"table inet {table} {{\n chain input {{\n  type filter hook input priority 0; "
        "policy drop;\n  iif lo accept\n  ct state established,related accept\n"
        "  meta l4proto icmp accept\n"
        f"  tcp dport {{ {ports} }} accept\n  tcp dport {int(lo)}-{int(hi)} accept\n }}\n}}\n"
    )
    _nft_load(host, rules)
    host["firewall"] = f"{int(lo)}-{int(hi)}"
    save_net(state, net)
    return rules


def cut(state: str, name: str, other: str) -> str:
    """A partition between two worker hosts only: nftables in ``name``'s namespace drops every
    packet to and from ``other``'s address (``other`` "off": the cut removed); the ruleset.
    Both hosts still reach the master, the edge node and the third host."""
    table = "sparktf_cut"
    net, host = _nft_table_gone(state, name, table)
    if other == "off":
        host.pop("cut", None)
        save_net(state, net)
        return ""
    peer = host_of(net, other)
    if peer is host:
        raise HostsError(f"cut {name} {other}: name another worker host")
    rules = (
        f"table inet {table} {{\n chain input {{\n  type filter hook input priority -10; "
        f"policy accept;\n  ip saddr {peer['address']} drop\n }}\n"
        f" chain output {{\n  type filter hook output priority -10; policy accept;\n"
        f"  ip daddr {peer['address']} drop\n }}\n}}\n"
    )
    _nft_load(host, rules)
    host["cut"] = other
    save_net(state, net)
    return rules


def host_status(state: str, net: dict) -> list[str]:
    lines = []
    for host in net["hosts"]:
        pids = hadoop.pid_files(os.path.join(state, "hosts", host["name"]))
        daemons = ", ".join(
            f"{n} {'up' if hadoop._ours(p, state) else 'DOWN'}" for n, p in sorted(pids.items())
        )
        extra = f", firewall {host['firewall']}" if host.get("firewall") else ""
        extra += f", cut from {host['cut']}" if host.get("cut") else ""
        lines.append(
            f"host {host['name']} {host['address']}: link {host.get('link', 'up')}"
            f"{', CRASHED' if host.get('crashed') else ''}{extra}; {daemons}; "
            f"{len(netns_pids(host['ns']))} processes"
        )
    return lines


def stop(state: str, net: dict) -> int:
    """Every worker host's processes, links and namespaces, the bridge, then the master's
    daemons (by PID); the state removed. The number of master daemons stopped."""
    remove_network(net)
    return hadoop.stop_pids(state, ["resourcemanager", "namenode"])
