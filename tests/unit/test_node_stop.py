"""A node process and the driver's 'stop' (real processes and a real socket, no Spark)."""

import socket
import subprocess
import sys
import textwrap
import time

from sparktf.common import messages, protocol

# A parameter server's process: its main thread is busy starting (importing TensorFlow takes
# seconds); only its control thread can hear the driver.
PS_STILL_STARTING = textwrap.dedent("""
    import socket, sys, threading, time, types
    from sparktf.common import protocol
    from sparktf.node.runtime import NodeRuntime

    sock = socket.socket(fileno=int(sys.argv[1]))
    spec = types.SimpleNamespace(name="ps:0")
    runtime = NodeRuntime(spec, protocol.Channel(sock))
    # (private: the runtime's control loop, run here without the rest of a node)
    threading.Thread(target=runtime._listen, daemon=True).start()
    if {stop_first}:  # the driver's 'stop' arrives before the process has decided
        print("listening", flush=True)
        sys.stdin.readline()  # ... the driver has sent it
        time.sleep(0.5)  # ... and the control thread has heard it
    if {exit_on_stop}:
        runtime.leave_on_stop()
    print("starting", flush=True)
    time.sleep(60)  # 'import tensorflow'
    print("started", flush=True)
""")


def _node(exit_on_stop, stop_first=False):
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PS_STILL_STARTING.format(exit_on_stop=exit_on_stop, stop_first=stop_first),
            str(theirs.fileno()),
        ],
        pass_fds=[theirs.fileno()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    theirs.close()
    chan = protocol.Channel(ours)
    if stop_first:
        assert proc.stdout.readline() == "listening\n"
        chan.send(messages.make("stop"))
        proc.stdin.write("sent\n")
        proc.stdin.flush()
    else:
        assert proc.stdout.readline() == "starting\n"
    return proc, chan


def test_a_parameter_server_told_to_stop_while_it_starts_leaves_at_once_with_its_result():
    proc, chan = _node(exit_on_stop=True)
    try:
        chan.send(messages.make("stop"))
        assert proc.wait(timeout=20) == 0  # not after its 60 s start
        assert chan.recv()["type"] == "done"  # the driver gets its (empty) result
        assert proc.stdout.read() == ""  # it never finished starting
    finally:
        proc.kill()
        proc.wait()
        chan.close()


def test_a_parameter_server_told_to_stop_before_it_chose_to_leave_on_stop_leaves_then():
    """A short job: the driver's 'stop' reaches a ps as soon as it said hello, before its
    main thread has decided that it may leave on 'stop' (it first sets up its log_dir, if any).
    It must leave then, not after its whole start."""
    proc, chan = _node(exit_on_stop=True, stop_first=True)
    try:
        assert proc.wait(timeout=20) == 0
        assert chan.recv()["type"] == "done"
        assert proc.stdout.read() == ""
    finally:
        proc.kill()
        proc.wait()
        chan.close()


def test_a_node_with_work_to_finish_hears_stop_but_its_main_thread_decides():
    proc, chan = _node(exit_on_stop=False)
    try:
        chan.send(messages.make("stop"))
        time.sleep(1.0)
        assert proc.poll() is None  # main_fn's thread (or the log copy) still runs
    finally:
        proc.kill()
        proc.wait()
        chan.close()
