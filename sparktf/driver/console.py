"""The driver's console: the nodes' output lines tagged ``[worker:1]``, sparktf's own notices
and the progress reporter's lines, written whole through one lock (no torn lines)."""

from __future__ import annotations

import logging
import sys
import threading

from sparktf.common import logfilter

log = logging.getLogger(__name__)


class Console:
    """Where a job's lines go on the driver (``log_to_driver``: the nodes' output too;
    ``tf_startup_logs``: TensorFlow's start-up chatter included)."""

    def __init__(self, log_to_driver: bool, tf_startup_logs: bool = False) -> None:
        self._log_to_driver = log_to_driver
        self._tf_startup_logs = tf_startup_logs
        self._lock = threading.Lock()
        #: (node, stream) -> whether its last line was hidden (its continuation lines go too)
        self._hidden: dict[tuple[str, str], bool] = {}

    def print(self, node: str, stream: str, line: str) -> None:
        """One line, tagged ``[node]``, on the driver's stdout or stderr (``stream``)."""
        out = sys.stdout if stream == "stdout" else sys.stderr
        with self._lock:
            try:
                out.write(f"[{node}] {line}\n")
                out.flush()
            except (OSError, ValueError):
                pass  # a closed console must not fail the job

    def node_line(self, node: str, stream: str, line: str) -> None:
        """A line of a node's output, if the job shows them: not TensorFlow's start-up
        chatter, nor a line that goes on a hidden one (the second line of a hidden warning)."""
        if not self._log_to_driver:
            return
        key = (node, stream)
        hide = not self._tf_startup_logs and (
            logfilter.is_startup_chatter(line)
            or (self._hidden.get(key, False) and logfilter.is_continuation(line))
        )
        self._hidden[key] = hide
        if not hide:
            self.print(node, stream, line)

    def tensorboard(self, job_id: str, node: str, msg: dict) -> None:
        """The chief's ``tensorboard`` message: its URL, or why it failed."""
        if msg.get("url"):
            log.info(  # (printed below: once on the console)
                "sparktf: TensorBoard for %s at %s (log dir %s on %s)",
                job_id,
                msg["url"],
                msg["log_dir"],
                node,
            )
            self.print("sparktf", "stdout", f"TensorBoard at {msg['url']}")
        else:
            self.print("sparktf", "stderr", msg.get("error") or "TensorBoard failed")

    def write(self, text: str) -> None:
        """The progress reporter's output (a file-like ``out``), on stdout."""
        with self._lock:
            sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()
