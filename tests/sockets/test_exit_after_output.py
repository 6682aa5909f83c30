"""A supervisor reports its node's exit only after every line the node wrote: a real
supervisor process, a real child printing, a real socket to a reader that plays a driver
still busy with earlier lines (it reads nothing for a while, then everything).

The lines and the exit share one connection, in order; lines still in the node's pipe when it
exits must go out before the exit report, and none may be dropped by the connection's close."""

import pickle
import socket
import subprocess
import sys
import textwrap
import time

from helpers.procs import wait_until

from sparktf.common import protocol

LINES = 2000  # 60 KB of output: it fits in the pipe, so the node exits at once

SUPERVISOR = textwrap.dedent(
    """
    import socket, subprocess, sys
    from sparktf.common import protocol
    from sparktf.common.spec import LaunchSpec, NodeSpec
    from sparktf.common.topology import assign_roles
    from sparktf.task.supervisor import Supervisor

    PRINTER = (
        "import sys; sys.stdout.write(''.join(f'line {i:06d} ' + 'x' * 16 + chr(10) "
        "for i in range(LINES))); sys.stdout.flush(); open(sys.argv[1], 'w').close()"
    )

    class Printing(Supervisor):
        def start_child(self):
            self.child = subprocess.Popen(
                [sys.executable, "-c", PRINTER, sys.argv[2]],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )

    launch = LaunchSpec("j", assign_roles(1, 0, "chief", False), ("127.0.0.1", 1), b"s" * 32, b"")
    spec = NodeSpec(launch, 0, "127.0.0.1", 0, {}, {}, 1)
    chan = protocol.Channel(socket.socket(fileno=int(sys.argv[1])))
    sys.exit(Printing(spec, chan).run())
    """
).replace("LINES", str(LINES))


def test_every_line_of_a_node_that_exited_goes_out_before_its_exit_report(tmp_path):
    driver_end, supervisor_end = socket.socketpair()
    printed = tmp_path / "printed"
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, str(supervisor_end.fileno()), str(printed)],
        pass_fds=(supervisor_end.fileno(),),
    )
    supervisor_end.close()
    chan = protocol.Channel(driver_end)
    try:
        # The driver is busy: the node has exited, its last lines wait in the pipe and the
        # socket is full. Long past the supervisor's old 1.5 s drain, it reads again.
        assert wait_until(printed.exists, timeout=60)
        time.sleep(3.0)
        got = []
        while True:
            try:
                got.append(chan.recv())
            except (EOFError, OSError, pickle.UnpicklingError):
                break
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        chan.close()
    types = [m["type"] for m in got]
    lines = [m["line"] for m in got if m["type"] == "log"]
    assert types[-1] == "exit" and types.count("exit") == 1, types[-5:]
    assert len(lines) == LINES and lines[-1].startswith(f"line {LINES - 1:06d}")
    assert got[-1]["tail"][-1] == lines[-1]  # the exit's tail ends with the last line
