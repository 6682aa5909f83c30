"""Two real OS users run sparktf jobs on one host at the same time (issue 48, section 3): with
the same spark.sparktf.portRange both complete; neither can read the other's node logs or the
nodes' private directories (spool, feed socket); a symlink or directory one plants in /tmp where
the other's node logs go makes the other's job refuse it, naming it, and is never followed.

Needs root (it creates the two users with ``useradd`` and removes them at the end, with every
process, file and directory they made, also on failure). Python lives under /root, which other
users cannot enter; /root is left as it is: each user's process runs in a private mount
namespace (``unshare --mount``) where a tmpfs (0755) covers /root and Python's tree is bound
back in place, then drops to the user with ``setpriv``. Real Spark (local[2]) in each user's
own driver, real node processes, no TensorFlow.
"""

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap

import psutil
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JOB = os.path.join(ROOT, "tests", "helpers", "user_job.py")
PREFIX = sys.prefix  # the interpreter's tree (/root/.pyenv/... here)
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"


def _why_not():
    if os.geteuid() != 0:
        return "creating OS users and switching to them needs root"
    for tool in ("useradd", "userdel", "unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    if not os.path.isdir(JAVA_HOME):
        return f"needs Java 17 at {JAVA_HOME} (readable by every user)"
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        return "cannot make a mount namespace here (unshare --mount)"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_why_not() is not None, reason=str(_why_not())),
]

#: Run in the user's mount namespace, as root, then exec the command as the user: a tmpfs over
#: /root (so that the user can pass through it) with Python's tree bound back where it was.
WRAPPER = textwrap.dedent(
    """\
    set -eu
    mount --bind "$PY_TREE" "$PARK"
    mount -t tmpfs -o mode=0755 sparktf-test /root
    mkdir -p "$PY_TREE"
    mount --move "$PARK" "$PY_TREE"
    exec setpriv --reuid "$RUN_UID" --regid "$RUN_GID" --init-groups -- "$@"
    """
)


class Users:
    """The test's two OS users, each with a home of its own; ``run`` starts a command as one."""

    def __init__(self, scratch):
        self.scratch = scratch
        self.names = [f"stf{os.getpid() % 100000}{c}" for c in "ab"]
        self.made = []
        self.procs = []
        self.park = os.path.join(scratch, "park")
        os.mkdir(self.park)
        tree = PREFIX
        while os.path.dirname(tree) != "/root" and tree != "/":
            tree = os.path.dirname(tree)
        self.py_tree = tree if tree.startswith("/root/") else None

    def create(self):
        for name in self.names:
            subprocess.run(
                ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                check=True,
                capture_output=True,
            )
            self.made.append(name)
            home = os.path.join(self.scratch, name)
            os.mkdir(home, 0o700)
            os.chown(home, self.uid(name), self.gid(name))

    def uid(self, name):
        return pwd.getpwnam(name).pw_uid

    def gid(self, name):
        return pwd.getpwnam(name).pw_gid

    def home(self, name):
        return os.path.join(self.scratch, name)

    def run(self, name, argv):
        """Start ``argv`` as user ``name`` (its own session, so that it can be stopped)."""
        env = {
            "PATH": f"{os.path.dirname(sys.executable)}:{JAVA_HOME}/bin:/usr/bin:/bin",
            "HOME": self.home(name),
            "USER": name,
            "LOGNAME": name,
            "JAVA_HOME": JAVA_HOME,
            "PYTHONPATH": ROOT,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PY_TREE": self.py_tree or "",
            "PARK": self.park,
            "RUN_UID": str(self.uid(name)),
            "RUN_GID": str(self.gid(name)),
        }
        if self.py_tree:
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", WRAPPER, "sh"]
        else:  # Python outside /root: every user can run it already
            cmd = ["setpriv", "--reuid", env["RUN_UID"], "--regid", env["RUN_GID"], "--init-groups"]
        proc = subprocess.Popen(
            cmd + argv,
            env=env,
            cwd=self.home(name),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def python(self, name, code, timeout=120):
        """Run ``code`` with Python as user ``name``; its output and exit status."""
        proc = self.run(name, [sys.executable, "-c", code])
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out

    def remove(self):
        """Stop every process of the test's users (all started here), remove what they left
        in /tmp (top-level entries they own) and the users. Safe after any failure."""
        uids = set()
        for name in self.made:
            try:
                uids.add(self.uid(name))
            except KeyError:
                pass
        for proc in psutil.process_iter(["uids"]):
            try:
                if proc.info["uids"] and proc.info["uids"].real in uids:
                    proc.kill()
            except psutil.Error:
                pass
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout:
                proc.stdout.close()
        tmp = tempfile.gettempdir()
        for entry in os.listdir(tmp):
            path = os.path.join(tmp, entry)
            try:
                if os.lstat(path).st_uid in uids:
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        os.unlink(path)
            except OSError:
                pass
        for name in self.made:
            subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(self.scratch, ignore_errors=True)


@pytest.fixture
def users():
    scratch = tempfile.mkdtemp(prefix="sparktf-two-users-")
    os.chmod(scratch, 0o755)  # each user reaches its home inside
    u = Users(scratch)
    try:
        u.create()
        yield u
    finally:
        u.remove()


def free_block(size):
    """``size`` consecutive ports nobody holds now, outside the kernel's ephemeral range."""
    for low in range(43000, 48000, 113):
        try:
            held = [socket.create_server(("0.0.0.0", p)) for p in range(low, low + size)]
        except OSError:
            continue
        for s in held:
            s.close()
        return f"{low}-{low + size - 1}"
    pytest.skip(f"no {size} free consecutive ports")


def run_jobs(users, port_range, timeout=420):
    """Both users' jobs at once; each one's JSON result (and output, if it wrote none)."""
    outs, procs = {}, {}
    for name in users.names:
        outs[name] = os.path.join(users.home(name), "result.json")
        procs[name] = users.run(name, [sys.executable, JOB, outs[name], port_range])
    results = {}
    for name, proc in procs.items():
        output, _ = proc.communicate(timeout=timeout)
        try:
            with open(outs[name]) as f:
                results[name] = json.load(f)
        except OSError:
            pytest.fail(f"{name}'s job wrote no result (exit {proc.returncode}):\n{output[-4000:]}")
        os.unlink(outs[name])
    return results


READ_OTHERS = textwrap.dedent(
    """\
    import sys
    for path in sys.argv[1:]:
        try:
            open(path).read()
            print("READ", path)
        except PermissionError:
            print("DENIED", path)
    """
)


def test_two_users_share_a_port_range_and_keep_their_files_apart(users):
    a, b = users.names
    port_range = free_block(14)
    low, high = (int(p) for p in port_range.split("-"))
    results = run_jobs(users, port_range)
    ports = []
    for name in (a, b):
        r = results[name]
        assert r["ok"], f"{name}'s job failed: {r}"
        nodes = r["results"]
        assert sum(n["sum"] for n in nodes.values()) == sum(range(1, 101))
        for node in nodes.values():
            assert node["uid"] == users.uid(name)
            # the node's private directory (spool, feed socket): the user's alone
            assert node["work_dir_uid"] == users.uid(name) and node["work_dir_mode"] == 0o700
            assert node["sock_dir_uid"] == users.uid(name) and node["sock_dir_mode"] == 0o700
            assert low <= node["port"] <= high
            ports.append((node["port"], name, node["span"]))
        for path in r["log_files"].values():
            st = os.stat(path)
            assert st.st_uid == users.uid(name) and st.st_mode & 0o077 == 0, path
            assert os.stat(os.path.dirname(path)).st_mode & 0o077 == 0, path
    # no port held by two nodes at once, whoever's (on a loaded machine one user's job may end
    # before the other's starts, and a port freed may then be claimed again)
    for i, (port, name, (start, end)) in enumerate(ports):
        for other, other_name, (o_start, o_end) in ports[i + 1 :]:
            if port == other:
                assert name != other_name and (end < o_start or o_end < start), ports
    # port claims are abstract sockets: no lock file (an older sparktf's directory may exist,
    # made by other jobs on a shared machine, but nothing in it is these users')
    locks = os.path.join(tempfile.gettempdir(), "sparktf-ports")
    uids = {users.uid(a), users.uid(b)}
    if os.path.isdir(locks) and not os.path.islink(locks):
        assert not [f for f in os.listdir(locks) if os.lstat(f"{locks}/{f}").st_uid in uids]
    # each user tries to read the other's node log files, and their directory
    for reader, owner in ((a, b), (b, a)):
        targets = list(results[owner]["log_files"].values())
        proc = users.run(reader, [sys.executable, "-c", READ_OTHERS, *targets])
        out, _ = proc.communicate(timeout=120)
        assert "READ" not in out and out.count("DENIED") == len(targets), out


def test_a_log_dir_planted_by_another_user_is_refused_never_followed(users):
    a, b = users.names
    tmp = tempfile.gettempdir()
    # a plants a symlink where b's node logs go, to a directory b could write into; b plants
    # a directory of its own, open to all, where a's go
    trap = os.path.join(users.home(a), "trap")
    code, out = users.python(
        a,
        f"import os; os.mkdir({trap!r}); os.chmod({trap!r}, 0o777); "
        f"os.chmod({users.home(a)!r}, 0o755); "
        f"os.symlink({trap!r}, {os.path.join(tmp, 'sparktf-' + b)!r})",
    )
    assert code == 0, out
    planted = os.path.join(tmp, f"sparktf-{a}")
    code, out = users.python(
        b, f"import os; os.makedirs({planted + '/logs'!r}); os.chmod({planted!r}, 0o777)"
    )
    assert code == 0, out
    results = run_jobs(users, free_block(14))
    for victim, path, why in (
        (b, os.path.join(tmp, f"sparktf-{b}"), "is a symlink"),
        (a, planted, f"is owned by uid {users.uid(b)}"),
    ):
        r = results[victim]
        assert not r["ok"] and r["error"] == "UnsafePathError", r
        assert path in r["message"] and why in r["message"], r["message"]
        assert "spark.sparktf.nodeLogDir" in r["message"]
    assert os.listdir(trap) == []  # never followed
    assert os.listdir(os.path.join(planted, "logs")) == []
