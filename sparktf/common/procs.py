"""Process lifetime helpers: die with the parent, reap orphans, stop a whole tree.

Linux provides ``prctl(PR_SET_PDEATHSIG)`` and ``prctl(PR_SET_CHILD_SUBREAPER)``; elsewhere
these helpers do nothing and return ``False`` (the supervisor then falls back to polling its
parent's pid).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

import psutil

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, value, 0, 0, 0) == 0


def die_with_parent(sig: int, expected_parent: int) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies.

    If the parent is already gone (it died before the call), exit at once.
    """
    _prctl(_PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != expected_parent:
        os._exit(128 + int(signal.SIGTERM))


def set_name(name: str) -> bool:
    """This process's name as ``ps -o comm``, ``top`` and ``psutil.Process.name()`` show it
    (at most 15 bytes): a forked process otherwise keeps its parent's."""
    return _prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]))


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process instead of init."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def has_children() -> bool | None:
    """Whether this process has a child, running or exited but not yet reaped (None where
    ``waitid`` is missing). Asks the kernel about this process alone, without reading every
    process on the host as finding descendants does."""
    if not hasattr(os, "waitid"):
        return None
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED | os.WCONTINUED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def kill_tree(
    root: psutil.Process | None = None, grace: float = 2.0, include_root: bool = False
) -> list[int]:
    """Terminate every descendant of ``root`` (default: this process), then kill survivors.

    Returns the pids that had to be killed with SIGKILL.
    """
    if root is None and not include_root and has_children() is False:
        return []  # no child, so no descendant: a subreaper's orphans are its children
    root = root or psutil.Process()
    try:
        procs = root.children(recursive=True)
    except psutil.NoSuchProcess:
        procs = []
    if include_root:
        procs.append(root)
    for proc in procs:
        try:
            proc.terminate()
            proc.resume()  # a stopped (SIGSTOP) process acts on the TERM only once continued
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace)
    return [p.pid for p in alive]


def describe_exit(code: int) -> str:
    """'exited with code 3' or 'was killed by signal 9 (SIGKILL)'."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {-code} ({name})"
    return f"exited with code {code}"


class ForkedChild:
    """A child this process forked, with what its users take of a ``Popen``: ``poll``,
    ``wait`` (with an optional timeout), ``send_signal``, ``terminate``, ``kill``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (kill_tree): as Popen, say 0
                self.returncode = 0
                return 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            while self.returncode is None:
                try:
                    _, status = os.waitpid(self.pid, 0)
                except InterruptedError:
                    continue
                except ChildProcessError:
                    self.returncode = 0
                    break
                self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            time.sleep(0.005)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
