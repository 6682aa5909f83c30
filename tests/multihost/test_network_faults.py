"""What a network does to a job (issue 47 §3), on the multi-host test YARN: a fault injected
on one worker host mid-training (bin/yarn-test-cluster.sh partition|crash HOST), each with the
bound it is held to, and nothing of the old attempt left on the host afterwards.

The job (fault_job.py) is TF2 ParameterServerStrategy with restartable workers
(``heartbeat_timeout`` 10 s): a chief, two workers, a ps in four executors on three hosts.
The host broken is worker:0's (whatever else YARN put there).
"""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import psutil
import pytest
from helpers.procs import wait_until

pytestmark = [pytest.mark.tf, pytest.mark.timeout(600)]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT_BIN = os.path.join(os.path.dirname(os.path.dirname(HERE)), "bin")
HEARTBEAT = 10.0
#: heartbeat_timeout + stopGrace (3 s) + KILL_WAIT (10 s) (docs/reliability.md: a frozen worker
#: whose supervisor cannot be reached) + 1 s, and a margin for a loaded 2-core machine
DETECTION_BOUND = HEARTBEAT + 3 + 10 + 1 + 20


class Job:
    """fault_job.py spark-submitted in the background; its stdout lines as they come.
    ``mwms``: its MWMS job, a chief and a worker in containers that cannot share a host."""

    def __init__(self, hosts, tmp_path, mwms=False, restarts=0, epochs=400, conf=None):
        cmd = [os.path.join(__import__("hosts_harness").pyspark_home(), "bin", "spark-submit")]
        cmd += ["--master", "yarn"]
        executors, overhead = ("2", "2560m") if mwms else ("4", "1536m")
        cmd += hosts.conf(
            **{
                "spark.executor.instances": executors,
                "spark.executor.memoryOverhead": overhead,
                **(conf or {}),
            }
        )
        cmd += [os.path.join(HERE, "fault_job.py"), str(HEARTBEAT), str(epochs)]
        cmd += ["mwms", str(restarts)] if mwms else []
        self.proc = subprocess.Popen(
            cmd,
            env=hosts.env(),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=open(tmp_path / "driver.err", "w"),
            text=True,
        )
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def value(self, key, timeout):
        found = []

        def seen():
            found[:] = [x for x in self.lines if x.startswith(key + "=")]
            return bool(found) or self.proc.poll() is not None

        wait_until(seen, timeout=timeout, interval=0.2)
        assert found, f"no {key}= from the driver: {self.lines[-30:]}"
        return found[0].split("=", 1)[1]

    def stop(self):
        """The driver (spark-submit's JVM and its Python), by PID, with everything under it."""
        try:
            procs = [psutil.Process(self.proc.pid)]
            procs += procs[0].children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass
        self.proc.wait(30)


def ours(left):
    """sparktf's own processes among ``left``: its supervisors and TF processes, named
    ``sparktf-sup`` / ``sparktf-node`` (forked from Spark's Python worker, their command lines
    are its own). The rest are Spark's and YARN's (the executor JVM, its Python daemon and
    workers, the container's shell), which end when Spark or YARN says so: on a partitioned
    host, once it is healed."""
    from sparktf.task.supervisor import NAME, NODE_NAME

    found = []
    for pid, cmd in left:
        try:
            name = psutil.Process(pid).name()
        except psutil.Error:
            continue
        if name in (NAME, NODE_NAME) or "sparktf" in cmd:
            found.append((pid, name, cmd))
    return found


def sparktf_on(hosts, name):
    """What is left in the host of YARN's containers (executors, Spark's Python workers,
    sparktf's supervisors and TF nodes): every process in its namespace but its NodeManager
    and DataNode."""
    import hdfs_test_cluster

    daemons = set(hdfs_test_cluster.pid_files(os.path.join(hosts.state, "hosts", name)).values())
    left = []
    for pid in hosts.host_processes(name):
        if pid in daemons:
            continue
        try:
            left.append((pid, " ".join(psutil.Process(pid).cmdline())[:160]))
        except psutil.Error:
            continue
    return left


def worker_host(hosts, job):
    """Once the job trains: worker:0's host (its name), and every node YARN put there."""
    spec = json.loads(job.value("SPEC", timeout=400))
    by_address = {a: n for n, a in hosts.workers.items()}
    placement = {
        f"{kind}:{i}": by_address[addr.rsplit(":", 1)[0]]
        for kind, addrs in spec.items()
        for i, addr in enumerate(addrs)
    }
    name = placement["worker:0"]
    return name, sorted(r for r, h in placement.items() if h == name)


def test_a_worker_host_partitioned_mid_training(hosts, tmp_path):
    """worker:0's host loses its link mid-training: the driver ends the job (or restarts the
    worker) within heartbeat_timeout + the kill wait, naming a node of that host; on the
    partitioned host every sparktf process stops within 60 s; after `heal` nothing of the
    old attempt is left there, and the host's NodeManager is back."""
    job = Job(hosts, tmp_path)
    name = None
    try:
        name, on_host = worker_host(hosts, job)
        running = ours(sparktf_on(hosts, name))
        assert running, "no sparktf-sup/sparktf-node process on worker:0's host"
        partitioned = time.time()
        hosts.verb("partition", name)
        ended, _, outcome = job.value("ENDED", timeout=300).partition(" OUTCOME=")
        detected = float(ended) - partitioned
        print(
            f"\n[multihost] partition of {name} ({on_host}): job ended after {detected:.1f}s: "
            f"{outcome[:300]}"
        )
        if outcome != "ok":
            assert any(role in outcome for role in on_host), (on_host, outcome)
        ended_at = time.time()
        gone = wait_until(lambda: not ours(sparktf_on(hosts, name)), timeout=60, interval=1.0)
        left_partitioned = ours(sparktf_on(hosts, name))
        print(
            f"[multihost] on the partitioned {name}: sparktf's {len(running)} processes "
            + (
                f"gone {time.time() - ended_at:.1f}s after the job ended; Spark's and YARN's "
                f"left until heal: {len(sparktf_on(hosts, name))}"
                if gone
                else f"still {left_partitioned} 60 s after the job ended"
            )
        )
    finally:
        if name:
            hosts.verb("heal", name)
        job.stop()
    healed = time.time()
    assert wait_until(lambda: not sparktf_on(hosts, name), timeout=120, interval=1.0), sparktf_on(
        hosts, name
    )
    print(f"[multihost] after heal, {name} clean in {time.time() - healed:.1f}s")
    assert wait_until(lambda: name_running(hosts, name), timeout=120, interval=1.0)
    assert detected <= DETECTION_BOUND, (
        f"the job ended {detected:.0f}s after the partition (bound {DETECTION_BOUND:.0f}s)"
    )
    assert gone, f"60 s after the job ended, the partitioned host still ran {left_partitioned}"


def name_running(hosts, name):
    import yarn_hosts

    return hosts.workers[name] in yarn_hosts.running_nodemanagers(hosts.rm)


def listen_in(hosts, name, first):
    """A TCP listener in the worker host's namespace on the first free port from ``first``
    (a daemon's outgoing connection may hold a port there: seen in CI, EADDRINUSE); a child of
    ours, killed by the caller. Returns (process, port)."""
    import yarn_hosts

    ns = yarn_hosts.host_of(hosts.net, name)["ns"]
    code = (
        "import socket,sys,time\n"
        f"for port in range({first}, {first + 80}):\n"
        "    s = socket.socket()\n"
        "    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "    try:\n"
        "        s.bind(('0.0.0.0', port))\n"
        "        break\n"
        "    except OSError:\n"
        "        s.close()\n"
        "s.listen(); print('up', port, flush=True); time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, "python3", "-c", code], stdout=subprocess.PIPE, text=True
    )
    word, port = proc.stdout.readline().split()
    assert word == "up"
    return proc, int(port)


def reaches(address, port):
    import socket

    try:
        socket.create_connection((address, port), timeout=3).close()
        return True
    except OSError:
        return False


def test_firewall_opens_only_yarns_hdfss_ports_and_the_range(hosts):
    """`firewall HOST LO-HI`: from the edge node a port in LO-HI and the NodeManager's port
    answer, a port outside does not (dropped: a timeout, not a refusal); the NodeManager stays
    RUNNING; `firewall HOST off` opens the host again."""
    if shutil.which("nft") is None:
        pytest.skip("no nft (Debian's nftables; .ci/run installs it)")
    name = sorted(hosts.workers)[0]
    address = hosts.workers[name]
    (inside, port_in), (outside, port_out) = (
        listen_in(hosts, name, 40010),
        listen_in(hosts, name, 41010),
    )
    try:
        hosts.verb("firewall", name, "40000-40099")
        assert reaches(address, port_in) and reaches(address, 8041)
        assert not reaches(address, port_out)
        assert "firewall 40000-40099" in hosts.verb("status").stdout
        assert name_running(hosts, name)  # (its heartbeats go out: outbound is not filtered)
        hosts.verb("firewall", name, "off")
        assert reaches(address, port_out)
    finally:
        for proc in (inside, outside):
            proc.kill()
            proc.wait()
        subprocess.run(
            [os.path.join(ROOT_BIN, "yarn-test-cluster.sh"), "firewall", name, "off"],
            env=hosts.env(),
            capture_output=True,
        )


#: Every worker host's firewall opens YARN's and HDFS's ports and this range only; Spark's
#: block managers (executors fetching broadcast pieces from each other) get a port inside it.
OPEN = "40000-40099"


def firewall_job(hosts, tmp_path, **conf):
    """firewall_job.py on two executors that cannot share a host (each container 3.5 GB of a
    host's 6 GB): its RESULT."""
    conf = {
        "spark.executor.instances": "2",
        "spark.executor.memoryOverhead": "2560m",
        "spark.blockManager.port": "40090",
        **conf,
    }
    out = hosts.submit(os.path.join(HERE, "firewall_job.py"), conf=conf, cwd=tmp_path)
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT=")]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-5000:]
    return json.loads(lines[0].split("=", 1)[1])


def test_a_firewalled_cluster_runs_with_a_port_range_and_fails_fast_without(hosts, tmp_path):
    """Issue 47 §2: `firewall` on every worker host. With spark.sparktf.portRange inside what
    the firewall opens, the job trains; without it, TensorFlow's ports are random and dropped
    between the hosts: the job fails within a minute with an error that names the unreachable
    node's address and the setting (sparktf.node.reach), not TensorFlow's minutes of retries."""
    if shutil.which("nft") is None:
        pytest.skip("no nft (Debian's nftables; .ci/run installs it)")
    names = sorted(hosts.workers)
    try:
        for name in names:
            hosts.verb("firewall", name, OPEN)
        ok = firewall_job(hosts, tmp_path, **{"spark.sparktf.portRange": "40000-40049"})
        assert ok["ok"], ok
        assert ok["loss"][-1] < ok["loss"][0]
        blocked = firewall_job(hosts, tmp_path)
        assert not blocked["ok"], blocked
        assert blocked["type"] == "NodeError", blocked
        assert "cannot reach" in blocked["message"] and "no answer in 30s" in blocked["message"]
        assert "spark.sparktf.portRange=LO-HI" in blocked["message"], blocked["message"]
        # the probe's 30 s from the nodes' start, plus the cluster's start on a loaded machine
        assert blocked["secs"] < 90, blocked
        print(f"\n[multihost] firewalled without portRange: failed in {blocked['secs']:.1f}s")
    finally:
        for name in names:
            subprocess.run(
                [os.path.join(ROOT_BIN, "yarn-test-cluster.sh"), "firewall", name, "off"],
                env=hosts.env(),
                capture_output=True,
            )


#: TensorFlow's own health check under MWMS (CollectiveAllReduceExtended: a peer checked every
#: 30 s, 3 tries of 10 s) aborts the collectives; then the node's error; and a loaded machine
PEER_CUT_BOUND = 30 + 3 * 10 + 10 + 20


def test_two_worker_hosts_cut_from_each_other_under_mwms_end_the_job_naming_the_peer(
    hosts, tmp_path
):
    """Issue 47 §3: a chief and a worker on two hosts that can no longer talk to each other,
    both still reaching the driver (heartbeats go on): the job ends within the bound with an
    error naming the peer that cannot be reached and its address, not a hang (progress_timeout
    is off by default)."""
    if shutil.which("nft") is None:
        pytest.skip("no nft (Debian's nftables; .ci/run installs it)")
    job = Job(hosts, tmp_path, mwms=True)
    cut = None
    try:
        spec = json.loads(job.value("SPEC", timeout=400))
        by_address = {a: n for n, a in hosts.workers.items()}
        chief, worker = (by_address[spec[k][0].rsplit(":", 1)[0]] for k in ("chief", "worker"))
        assert chief != worker, spec
        cut = chief
        started = time.time()
        hosts.verb("cut", chief, worker)
        ended, _, outcome = job.value("ENDED", timeout=300).partition(" OUTCOME=")
        took = float(ended) - started
        print(f"\n[multihost] {chief} cut from {worker}: job ended after {took:.1f}s: {outcome}")
        assert outcome.startswith("error NodeError"), outcome
        # TensorFlow says the peer crashed; the driver still heard it: the error says so
        assert "which the driver still heard" in outcome, outcome
        assert "network partition or a firewall" in outcome, outcome
        assert took <= PEER_CUT_BOUND, f"ended {took:.0f}s after the cut (bound {PEER_CUT_BOUND})"
    finally:
        if cut:
            hosts.verb("cut", cut, "off")
        job.stop()


def restarted_or_clear(hosts, job, name, outcome, named):
    """A job whose host ``name`` was lost ended well: restarted on the hosts left (no node of
    its last attempt on that host's address), or failed clearly (the error says ``named``, or
    that YARN ended the application: its ApplicationMaster was on the host)."""
    if outcome != "ok":
        assert named in outcome or "YARN application ended" in outcome, outcome
        return
    last = json.loads(job.value("LAST_SPEC", timeout=30))
    lost = hosts.workers[name]
    assert all(not a.startswith(lost + ":") for v in last.values() for a in v), last


#: heartbeat_timeout, then a restart: Spark replaces the lost executor once it declares it
#: lost (the test YARN's NodeManager expiry, about 35 s; Spark's own 120 s), the gang starts
#: again and trains its 150 short epochs
CHIEF_BOUND = 10 + 120 + 60 + 120


def test_the_chiefs_host_partitioned_under_mwms_restarts_on_the_hosts_left(hosts, tmp_path):
    """Issue 47 §3: MWMS (a chief and a worker, each host holds one), max_restarts=1, the
    chief's host partitioned mid-training: a whole-cluster restart on the hosts left, or a
    clear failure; never a hang, never a ReservationTimeoutError blaming slots."""
    job = Job(hosts, tmp_path, mwms=True, restarts=1, epochs=150)
    name = None
    try:
        spec = json.loads(job.value("SPEC", timeout=400))
        by_address = {a: n for n, a in hosts.workers.items()}
        name = by_address[spec["chief"][0].rsplit(":", 1)[0]]
        started = time.time()
        hosts.verb("partition", name)
        ended, _, outcome = job.value("ENDED", timeout=500).partition(" OUTCOME=")
        took = float(ended) - started
        print(f"\n[multihost] chief's {name} partitioned: job ended after {took:.1f}s: {outcome}")
        print("[multihost] " + " | ".join(x for x in job.lines if "FAILURES=" in x)[:2000])
        assert "ReservationTimeoutError" not in outcome, outcome
        # a clear failure (the chief named, or YARN's AM lost with it), or the hosts left
        restarted_or_clear(hosts, job, name, outcome, "chief:0")
        assert took <= CHIEF_BOUND, f"ended {took:.0f}s after the partition ({CHIEF_BOUND}s)"
    finally:
        if name:
            hosts.verb("heal", name)
        job.stop()
    assert wait_until(lambda: name_running(hosts, name), timeout=120, interval=1.0)


#: How long the gang's first executor Python waits before it starts (late_python.sh): the other
#: task reaches the rendezvous first, and its host is partitioned while it waits there
LATE = 25
#: The job's reservationTimeout: the driver fails the attempt whose node never started by then
RESERVE = 40
#: The partitioned task gives up at its keepalive (DRIVER_SILENT_SECS, 30 s), with a margin
GIVE_UP_BOUND = 30 + 20
#: From the partition: the late task, the reservation timeout, Spark replacing the lost
#: executor (the test YARN's NodeManager expiry, about 35 s; Spark's own 120 s), the restart's
#: gang and its short training
RDV_BOUND = LATE + RESERVE + 120 + 60 + 60


def driver_channels(hosts, name):
    """(pid, port) of each Python process in the worker host with a TCP connection to the edge
    node's address: before the gang's TF processes start, its barrier task's control channel
    (the executor's own connections to the driver are its JVM's). ``ss`` in the host's
    namespace (psutil reads the connections of its own namespace only)."""
    import re

    import yarn_hosts

    ns = yarn_hosts.host_of(hosts.net, name)["ns"]
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "ss", "-Htnp", "state", "established", "dst", hosts.master],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    found = []
    for line in out.splitlines():
        for proc, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line):
            if "python" in proc:
                found.append((int(pid), line.split()[2]))
    return found


def test_a_partition_during_the_rendezvous_gives_up_in_time_and_the_restart_runs(hosts, tmp_path):
    """Issue 47 §3: one task of an MWMS gang has sent its address and waits at the rendezvous
    for the others' (the other executor's Python starts LATE s later) when its host is
    partitioned. The task gives up within its keepalive, not when its executor ends (its
    channel to the driver closed: checked inside the partitioned host); the driver fails the
    attempt at reservationTimeout and, with max_restarts=1, the restart is not blocked by the
    lost task: it trains on the hosts left, or the job fails clearly, never a hang."""
    late = tmp_path / "late"
    late.mkdir()
    python = os.path.join(HERE, "late_python.sh")
    conf = {
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.SPARKTF_TEST_LATE_DIR": str(late),
        "spark.executorEnv.SPARKTF_TEST_LATE_SECS": str(LATE),
        "spark.executorEnv.SPARKTF_TEST_PYTHON": sys.executable,
        "spark.sparktf.reservationTimeout": str(RESERVE),
    }
    job = Job(hosts, tmp_path, mwms=True, restarts=1, epochs=60, conf=conf)
    name = None
    try:
        by_address = {a: n for n, a in hosts.workers.items()}

        def early():
            found = [f.read_text().strip() for f in late.glob("early.*")]
            return found[0] if found and found[0] else None

        assert wait_until(lambda: early() or job.proc.poll() is not None, timeout=300, interval=0.2)
        assert early(), job.lines[-20:]
        name = by_address[early()]
        waiting = []
        assert wait_until(
            lambda: waiting.extend(driver_channels(hosts, name)) or waiting,
            timeout=60,
            interval=0.2,
        ), "the early task never reached the driver"
        started = time.time()
        hosts.verb("partition", name)
        assert wait_until(lambda: not driver_channels(hosts, name), timeout=120, interval=0.5)
        gave_up = time.time() - started
        print(
            f"\n[multihost] {name} partitioned at the rendezvous: its task gave up after "
            f"{gave_up:.1f}s (bound {GIVE_UP_BOUND}s)"
        )
        ended, _, outcome = job.value("ENDED", timeout=600).partition(" OUTCOME=")
        took = float(ended) - started
        print(f"[multihost] the job ended {took:.1f}s after the partition: {outcome}")
        print("[multihost] " + " | ".join(x for x in job.lines if "FAILURES=" in x)[:2000])
        assert gave_up <= GIVE_UP_BOUND, f"the task gave up {gave_up:.0f}s after the partition"
        # a clear failure (naming what never started), or the hosts left; not a hang
        restarted_or_clear(hosts, job, name, outcome, "reservationTimeout")
        assert took <= RDV_BOUND, f"ended {took:.0f}s after the partition ({RDV_BOUND}s)"
    finally:
        if name:
            hosts.verb("heal", name)
        job.stop()
    assert wait_until(lambda: name_running(hosts, name), timeout=120, interval=1.0)


#: A read's bound with one replica's DataNode silent: the HDFS client's connect timeout to it
#: (Hadoop's 60 s socket timeout at most), then the other replica; a loaded machine
DATANODE_BOUND = 60 + 30
#: Reads of the file each: the NameNode picks one of its two replicas at random for each
#: (WebHDFS), so some meet the silent one first (all 6 miss it 1 time in 64)
READS = 6


def edge(hosts, *args, backend):
    """dn_read.py on the edge node with ``backend`` (libhdfs: its library, the Hadoop jars
    and conf, a JVM, as on a cluster's host): its KEY=value lines."""
    import hdfs_test_cluster

    extra = {}
    if backend == "libhdfs":
        extra = {
            "CLASSPATH": hdfs_test_cluster.classpath(hosts.conf_dir),
            "ARROW_LIBHDFS_DIR": os.path.join(hdfs_test_cluster.cache_dir(), "native"),
            "JAVA_HOME": hdfs_test_cluster.java_home(),
        }
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "dn_read.py"), *map(str, args)],
        env=hosts.env(SPARKTF_HDFS_BACKEND=backend, **extra),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return dict(x.split("=", 1) for x in out.stdout.splitlines() if "=" in x)


def replica_hosts(hosts, path):
    """The worker hosts holding ``path``'s replicas (hdfs fsck -locations)."""
    out = hosts.verb("hdfs", "fsck", path, "-files", "-blocks", "-locations").stdout
    return sorted({n for n, a in hosts.workers.items() if f"{a}:" in out})


def test_a_datanode_host_partitioned_leaves_its_files_readable(hosts):
    """Issue 47 §3: a file of 2 replicas (the test HDFS's replication), one holder's host
    partitioned: sparktf.fs still reads it whole (training data, checkpoints and SavedModels
    come down this way), over WebHDFS and over libhdfs where it loads, within the bound."""
    path = f"/tmp/sparktf-dn-{os.getpid()}.bin"
    wrote = edge(hosts, "write", f"hdfs://{path}", 3 * 1024 * 1024, backend="webhdfs")["SHA"]
    holders = replica_hosts(hosts, path)
    assert len(holders) == 2, holders
    name = holders[0]
    try:
        hosts.verb("partition", name)
        for backend in ("webhdfs", "libhdfs"):
            got = edge(hosts, "read", f"hdfs://{path}", READS, backend=backend)
            print(
                f"\n[multihost] {name} partitioned: {READS} {backend} reads, the longest "
                f"{got['SECS']}s; {got['MET']} met the silent DataNode first"
            )
            assert got["SHA"] == wrote, backend
            assert float(got["SECS"]) <= DATANODE_BOUND, (backend, got)
    finally:
        hosts.verb("heal", name)
    assert wait_until(lambda: name_running(hosts, name), timeout=120, interval=1.0)


def test_a_crashed_host_is_found_and_leaves_nothing(hosts, tmp_path):
    """worker:0's host crashed mid-training (its link down, every process in it SIGKILLed: a
    power loss): the driver ends the job naming a node of that host, within the bound. (Last
    of the tier: the host stays down.)"""
    job = Job(hosts, tmp_path)
    try:
        name, on_host = worker_host(hosts, job)
        crashed = time.time()
        hosts.verb("crash", name)
        assert not hosts.host_processes(name)
        ended, _, outcome = job.value("ENDED", timeout=300).partition(" OUTCOME=")
        detected = float(ended) - crashed
        print(
            f"\n[multihost] crash of {name} ({on_host}): job ended after {detected:.1f}s: "
            f"{outcome[:300]}"
        )
        if outcome != "ok":
            assert any(role in outcome for role in on_host), (on_host, outcome)
    finally:
        job.stop()
    assert detected <= DETECTION_BOUND, (
        f"the job ended {detected:.0f}s after the crash (bound {DETECTION_BOUND:.0f}s)"
    )
