"""A node's supervisor: :func:`serve`, forked from the barrier task (the usual way), or
``python -m sparktf.task.supervisor PARENT_PID`` with the node's spec pickled on stdin.

The barrier task starts it in a session of its own (:func:`sparktf.task.barrier.start_supervisor`).
The supervisor is small and imports neither pyspark nor tensorflow, so it can always react:

* it gets SIGTERM when the barrier task's process dies, however it dies (``PR_SET_PDEATHSIG``),
  and is the subreaper of everything below it, so orphans of the TF process come back to it;
* it starts the TF process (``sparktf.node``), which itself dies with SIGKILL if the
  supervisor goes;
* it streams the TF process's stdout and stderr to the driver line by line, keeping a tail;
* when the TF process exits, or the driver says ``abort``, or a signal arrives, it stops every
  descendant (SIGTERM, then SIGKILL) and reports the exit code and the tail to the driver,
  after every line of the output (the driver waits for that report while lines still come);
* a worker's TF process that failed (a signal, an error in ``main_fn``) may be started again
  in place (``spark.sparktf.workerRestarts``, for models with parameter servers): the
  supervisor asks the driver (``restart``), which decides (``resume``); the new process gets
  the same TF_CONFIG and port (the barrier task still holds its reservation) while the rest
  of the cluster runs on; a worker's TF process that is stopped or frozen (silent past
  ``heartbeat_timeout``) is killed when the driver says ``kill``, and restarted the same way.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import IO

from sparktf.common import keepalive, messages, procs, protocol
from sparktf.common.spec import NodeSpec

EXIT_ABORTED = 70
#: The supervisor's own exit code when its node failed and the node's exit report went to
#: the driver, which fails the job with the node's error: the barrier task then ends without
#: an error of its own (Spark would log it as a stack trace on top of sparktf's message).
EXIT_REPORTED = 3
#: The supervisor's and the TF process's names (``ps -o comm``, ``psutil.Process.name()``):
#: forked, they would otherwise show as the Spark Python worker.
NAME, NODE_NAME = "sparktf-sup", "sparktf-node"
#: After the TF process exits: how long its output pipes may take to drain before whatever
#: still holds them (its children) is stopped, and how long those get between TERM and KILL.
DRAIN_SECS = 0.5
ORPHAN_GRACE = 1.0
#: Then every writer is gone and the rest of the output goes to the driver before the exit
#: report, however long a driver busy with earlier lines takes; only one that takes no line
#: for this long (frozen) has the exit sent without the rest.
DRAIN_STALL_SECS = 10.0
#: How long a supervisor waits for the driver's answer to a restart request before it reports
#: the exit instead (the driver answers as soon as the old process's channel has ended).
RESUME_WAIT = 30.0


class Supervisor:
    def __init__(self, spec: NodeSpec, chan: protocol.Channel) -> None:
        self.spec = spec
        self.chan = chan
        self.tail: collections.deque[str] = collections.deque(maxlen=spec.launch.tail_lines)
        self.lines = 0  # lines of output read (and sent): how the drain sees progress
        self.child: subprocess.Popen | _Forked | None = None
        self.aborted = threading.Event()
        self.reported = False  # the node's exit report reached the driver's channel
        self.resumed = threading.Event()  # the driver's answer to a restart request came
        self.resume: dict | None = None
        #: Why the driver had the TF process killed (``kill``: no heartbeat for ...), if it did
        self.killed_for: str | None = None

    def _send(self, message: dict) -> bool:
        try:
            self.chan.send(message)
            return True
        except OSError:
            return False  # the driver is gone; the listener thread handles that

    def _pump(self, stream: IO[bytes], name: str) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.tail.append(line)
            self._send(messages.make("log", stream=name, line=line))
            self.lines += 1
        stream.close()

    def _listen(self) -> None:
        try:
            while self.on_message(self.chan.recv()):
                pass
        except (OSError, EOFError, pickle.UnpicklingError):
            pass  # lost the driver: nobody can use this node any more
        self.aborted.set()
        self.resumed.set()  # a restart request waiting for the answer gives up
        self.stop_children()

    def on_message(self, message: dict) -> bool:
        """Carry out one message from the driver; False once it says ``abort``."""
        kind = message.get("type")
        if kind == "abort":
            return False
        if kind == "resume":
            self.resume = message
            self.resumed.set()
        if kind == "kill":
            self._kill_child(message["why"], message.get("incarnation", 0))
        return True

    def _kill_child(self, why: str, incarnation: int) -> None:
        """The driver heard no heartbeat from the TF process of ``incarnation`` (``why``): it
        is stopped or frozen. SIGKILL it (a stopped process dies of it too); the main thread
        sees the exit, stops what it left (orphans included) and asks to restart it in place.
        Not reaped here: the main thread waits for it, and must read its exit code. A kill for
        an older process (one restarted in place since) is ignored: it must not reach the
        new one."""
        child = self.child
        if incarnation < self.spec.incarnation:
            return  # for a process already replaced
        if child is None or child.returncode is not None:
            return  # exited already: its exit is on its way
        self.killed_for = why
        self._note(
            f"sparktf: {self.spec.name} {why}; killing its TF process to restart it in place"
        )
        try:
            os.kill(child.pid, signal.SIGKILL)  # unreaped, so the pid is still this child's
        except ProcessLookupError:
            pass

    def stop_children(self) -> None:
        procs.kill_tree(grace=self.spec.launch.stop_grace)

    def start_child(self) -> None:
        """Fork the TF process from this (small, TensorFlow-free, thread-free) process: it
        starts with the node's modules already imported instead of a new interpreter's
        start-up. ``SPARKTF_NODE_EXEC=1`` starts ``python -m sparktf.node`` instead."""
        if os.environ.get("SPARKTF_NODE_EXEC") == "1":
            self._exec_child()
            return
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the TF process
            try:
                _become_node(self.spec, self.chan, out_w, err_w, (out_r, err_r))
            finally:
                os._exit(1)
        os.close(out_w)
        os.close(err_w)
        self.child = _Forked(pid, os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))

    def _exec_child(self) -> None:
        env = dict(os.environ)
        if self.spec.python_path:
            env["PYTHONPATH"] = os.pathsep.join(self.spec.python_path)
        env["PYTHONUNBUFFERED"] = "1"
        child = subprocess.Popen(
            [sys.executable, "-m", "sparktf.node", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert child.stdin is not None
        child.stdin.write(pickle.dumps(self.spec, protocol=pickle.HIGHEST_PROTOCOL))
        child.stdin.close()
        self.child = child

    def run(self) -> int:
        self.start_child()  # forked while this process has no other thread
        threading.Thread(target=self._listen, daemon=True).start()
        while True:
            code = self._watch_child()
            if code == 0 or self.aborted.is_set() or not self._may_restart(code):
                break
            # Started anew (fork and exec), not forked: this process now runs threads.
            self._exec_child()
        if self.aborted.is_set() and code != 0:
            code = code if code < 0 else EXIT_ABORTED
        self.reported = self._send(
            messages.make("exit", code=code, aborted=self.aborted.is_set(), tail=list(self.tail))
        )
        self.chan.close()
        return code

    def _watch_child(self) -> int:
        """Stream the TF process's output, wait for it and stop whatever it left."""
        child = self.child
        assert child is not None and child.stdout is not None and child.stderr is not None
        pumps = [
            threading.Thread(target=self._pump, args=(s, n), daemon=True)
            for s, n in ((child.stdout, "stdout"), (child.stderr, "stderr"))
        ]
        for t in pumps:
            t.start()
        code = child.wait()
        # Its children may hold the output pipes open: read what is there, then stop them
        # (the pumps end when the last holder dies), so the exit is reported at once.
        deadline = time.monotonic() + DRAIN_SECS
        for t in pumps:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        procs.kill_tree(grace=min(ORPHAN_GRACE, self.spec.launch.stop_grace))
        self._drain(pumps)
        return code

    def _drain(self, pumps: list[threading.Thread]) -> None:
        """Wait for the pumps to send the output left in the pipes: every writer is gone,
        so each ends at its pipe's end, at the pace the driver reads. The exit report must
        come after every line (one connection, in order): sent sooner, it went ahead of the
        lines still in the pipes, and closing the connection behind it dropped them, the
        tail included (a driver busy with a flood of earlier lines takes seconds). Only a
        driver that takes nothing for DRAIN_STALL_SECS cuts the wait short."""
        seen, since = -1, time.monotonic()
        while any(t.is_alive() for t in pumps):
            for t in pumps:
                t.join(timeout=0.2)
            if self.lines != seen:
                seen, since = self.lines, time.monotonic()
            elif time.monotonic() - since > DRAIN_STALL_SECS:
                return

    def _may_restart(self, code: int) -> bool:
        """Whether the failed TF process (exit ``code``) starts again in place: a worker
        without a data feed, where the job allows it, and the driver says so. The driver
        answers once the old process's channel has ended (so nothing of it can be taken for
        the new one's); on a yes the new process gets the same spec, but its incarnation."""
        spec = self.spec
        killed_for, self.killed_for = self.killed_for, None
        if not restartable(spec):
            return False
        self.resume = None
        self.resumed.clear()
        if not self._send(messages.make("restart", code=code, tail=list(self.tail)[-5:])):
            return False
        if not self.resumed.wait(RESUME_WAIT) or self.aborted.is_set():
            return False
        answer: dict = self.resume or {}
        if not answer.get("go"):
            line = f"sparktf: {spec.name} is not restarted in place: {answer.get('why')}"
            self._note(line)
            return False
        after = f" after it {killed_for}" if killed_for else ""
        self._note(
            f"sparktf: {spec.name}'s TF process {procs.describe_exit(code)}{after}; restarting "
            f"it in place (restart {answer['count']} of {answer['limit']}, "
            "spark.sparktf.workerRestarts), same TF_CONFIG and port"
        )
        self.spec = dataclasses.replace(spec, incarnation=spec.incarnation + 1)
        return True

    def _note(self, line: str) -> None:
        """A line of the supervisor's own in the node's output, as the driver shows it."""
        self.tail.append(line)
        self._send(messages.make("log", stream="stderr", line=line))


def restartable(spec: NodeSpec) -> bool:
    """Whether the node's failed TF process may start again in place (if the driver says
    so): a worker without a data feed, where ``spark.sparktf.workerRestarts`` allows it."""
    return spec.launch.worker_restarts > 0 and spec.role.job == "worker" and not spec.feed_path


class _Forked(procs.ForkedChild):
    """The forked TF process, with its output pipes (as a ``Popen``'s stdout and stderr)."""

    def __init__(self, pid: int, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        super().__init__(pid)
        self.stdout, self.stderr = stdout, stderr


def _become_node(
    spec: NodeSpec, chan: protocol.Channel, out_w: int, err_w: int, read_ends: tuple[int, ...]
) -> None:
    """In the forked child: drop the supervisor's channel, signal handlers and pipe ends,
    put stdout/stderr on the pipes, and run the node."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    try:
        chan.sock.close()
    except OSError:
        pass
    for fd in read_ends:
        os.close(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (devnull, out_w, err_w):
        os.close(fd)
    sys.stdout = open(
        1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
    )
    sys.stderr = open(
        2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
    )
    if spec.python_path:
        os.environ["PYTHONPATH"] = os.pathsep.join(spec.python_path)
        sys.path[:0] = [p for p in spec.python_path if p not in sys.path]
    os.environ["PYTHONUNBUFFERED"] = "1"
    procs.set_name(NODE_NAME)
    from sparktf.node import process

    process.main_in_fork(spec, os.getppid())


_SPEC: NodeSpec | None = None


def remove_node_dirs(spec: NodeSpec | None) -> None:
    """The node's private directories (spool, feed socket); the barrier task removes them too,
    but when Spark kills that task outright, only the supervisor is left to do it."""
    if spec is None:
        return
    for path in (spec.work_dir, os.path.dirname(spec.feed_path) if spec.feed_path else None):
        if path:
            shutil.rmtree(path, ignore_errors=True)


def _on_signal(signum: int, frame: object) -> None:
    # Our parent (the Spark task) died or Spark is stopping us: take the whole tree down.
    procs.kill_tree(grace=1.0)
    remove_node_dirs(_SPEC)
    os._exit(128 + signum)


def serve(spec: NodeSpec, parent: int) -> int:
    """Supervise the node of ``spec`` for the barrier task ``parent``; the exit code (0: the
    TF process succeeded). In a new interpreter (:func:`main`) or forked from the task."""
    global _SPEC
    _SPEC = spec
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _on_signal)
    procs.die_with_parent(signal.SIGTERM, parent)
    procs.become_subreaper()
    procs.set_name(NAME)
    try:
        chan = protocol.connect(
            spec.launch.driver_address, spec.launch.secret, spec.launch.connect_timeout
        )
        keepalive.watch_peer(chan.sock)  # a driver's host that falls silent: stop in 30 s
    except (OSError, protocol.AuthenticationError) as exc:
        host, port = spec.launch.driver_address
        print(
            f"sparktf: node {spec.name} cannot reach the driver at {host}:{port}: {exc}. "
            "Check that executors can connect to spark.driver.host.",
            file=sys.stderr,
        )
        return 2
    chan.send(
        messages.hello(
            messages.SUPERVISOR,
            spec.name,
            spec.host,
            pid=os.getpid(),
            port=spec.port,
            restartable=restartable(spec),
        )
    )
    supervisor = Supervisor(spec, chan)
    code = supervisor.run()
    remove_node_dirs(spec)
    if code == 0:
        return 0
    return EXIT_REPORTED if supervisor.reported else 1


def main() -> None:
    """``python -m sparktf.task.supervisor PARENT_PID``, the spec pickled on stdin."""
    spec: NodeSpec = pickle.load(sys.stdin.buffer)
    sys.stdin.close()
    sys.exit(serve(spec, int(sys.argv[1])))


if __name__ == "__main__":
    main()
