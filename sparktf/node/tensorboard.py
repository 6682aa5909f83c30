"""TensorBoard on the chief: ``run(..., tensorboard=True)``.

The chief's node process starts ``python -m tensorboard.main`` on the cluster's log directory,
on a port held by a :class:`~sparktf.common.ports.PortReservation` until TensorBoard has bound it
(werkzeug sets ``SO_REUSEADDR``, as TensorFlow's gRPC server does), waits until it answers,
(with ``spark.sparktf.portRange``, without its fast loader, which would listen on a port of
its own choosing),
and tells the driver its URL. TensorBoard is a child of the node process, in the node's
session: the supervisor stops it with the rest of the node's process tree.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from sparktf.common import messages
from sparktf.common.ports import PortRange, PortReservation

START_TIMEOUT = 60.0  # seconds for TensorBoard to import and answer

# Dies with the node process (SIGTERM), then runs TensorBoard's command line.
_LAUNCHER = (
    "import runpy, signal, sys\n"
    "from sparktf.common import procs\n"
    "procs.die_with_parent(signal.SIGTERM, int(sys.argv.pop(1)))\n"
    "sys.argv[0] = 'tensorboard'\n"
    "runpy.run_module('tensorboard.main', run_name='__main__')\n"
)


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def start(
    log_dir: str, host: str, output: str, ports: PortRange | None = None
) -> tuple[subprocess.Popen, PortReservation]:
    """Start TensorBoard on ``log_dir``, bound to ``host`` (on a port of ``ports``, if given),
    its output to the file ``output``. Call from the main thread: the kernel's parent-death
    signal follows the thread that forks."""
    os.makedirs(log_dir, exist_ok=True)
    reservation = PortReservation(host, ports, what="TensorBoard")
    parent = os.getpid()
    try:
        with open(output, "w") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _LAUNCHER,
                    str(parent),
                    "--logdir",
                    log_dir,
                    "--host",
                    host,
                    "--port",
                    str(reservation.port),
                    "--reload_interval",
                    "5",
                    # its fast loader is a data server of its own, on a port it picks
                    *(["--load_fast", "false"] if ports is not None else []),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    except BaseException:
        reservation.release()
        raise
    return proc, reservation


def announce(
    proc: subprocess.Popen,
    reservation: PortReservation,
    host: str,
    log_dir: str,
    output: str,
    report: Callable[[dict], None],
) -> None:
    """Wait until TensorBoard answers, then ``report`` its URL (or why it did not start)."""
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if _answers(host, reservation.port):
                break
            time.sleep(0.25)
    finally:
        reservation.release()
    address = f"[{host}]" if ":" in host else host
    if proc.poll() is None and _answers(host, reservation.port):
        report(
            messages.make(
                "tensorboard",
                url=f"http://{address}:{reservation.port}/",
                log_dir=log_dir,
                error=None,
            )
        )
        return
    if proc.poll() is None:
        proc.kill()
    try:
        with open(output, errors="replace") as f:
            err = f.read()[-2000:]
    except OSError:
        err = ""
    report(
        messages.make(
            "tensorboard",
            url=None,
            log_dir=log_dir,
            error=f"TensorBoard did not start within {START_TIMEOUT:g}s: {err.strip()}",
        )
    )
