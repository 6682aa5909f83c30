"""Progress on the driver: how far each node is, as a live bar or as plain log lines.

The nodes send their step and metrics (``ctx.report``, ``ctx.keras_callback()``), rows fed and
the feed's epoch with every heartbeat; :meth:`JobState.progress_snapshot` keeps them as plain
data. :class:`Reporter` shows them while the job runs: a tqdm bar of rows fed (with the
chief's epoch, step and metrics) when stderr is a terminal, else a ``[sparktf] progress:``
line every ``progress_interval`` seconds when something changed; at the end, one summary line
per node. ``progress=False`` (``spark.sparktf.progress=false``) turns it off.

The formatting is pure (no Spark, no threads): :func:`status_line`, :func:`summary_lines`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

Snapshot = dict  # node name -> its progress (JobState.progress_snapshot)


class Writer(Protocol):
    """Where the lines go: a text file, or the driver's console (``Console``)."""

    def write(self, text: str, /) -> Any: ...
    def flush(self) -> Any: ...


def _metrics(metrics: dict) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()) if k != "epoch_done")


def _node(name: str, p: dict) -> str:
    parts = [name]
    if p.get("epoch") is not None:
        parts.append(f"epoch {p['epoch']}")
    if p.get("step") is not None:
        parts.append(f"step {p['step']}")
    if p.get("rows") is not None:
        rows = f"{p['rows']:,} rows"
        if p.get("epoch_rows") is not None and p.get("epoch") not in (None, 1):
            rows += f" ({p['epoch_rows']:,} this epoch)"
        if p.get("rows_per_s"):
            rows += f", {p['rows_per_s']:,.0f} rows/s"
        parts.append(rows)
    if p.get("metrics"):
        parts.append(_metrics(p["metrics"]))
    return " ".join(parts[:1]) + (": " + ", ".join(parts[1:]) if len(parts) > 1 else "")


def _reporting(snapshot: Snapshot) -> dict[str, dict]:
    """The nodes that have anything to show (a ps or an idle node has not)."""
    return {
        name: p
        for name, p in sorted(snapshot.items())
        if p.get("step") is not None or p.get("rows") or p.get("metrics")
    }


def status_line(snapshot: Snapshot) -> str | None:
    """One line of every reporting node's progress; None when none has reported yet."""
    nodes = _reporting(snapshot)
    if not nodes:
        return None
    return "[sparktf] progress: " + " | ".join(_node(n, p) for n, p in nodes.items())


def summary_lines(snapshot: Snapshot) -> list[str]:
    """At the end: one line per node that reported, with its time."""
    lines = []
    for name, p in _reporting(snapshot).items():
        took = f" in {p['seconds']:.1f}s" if p.get("seconds") is not None else ""
        head, _, rest = _node(name, p).partition(": ")
        lines.append(f"[sparktf] {head} {p.get('state', '?')}{took}: {rest}")
    return lines


class Reporter:
    """Shows ``snapshot()`` until :meth:`stop`; a tqdm bar on a terminal, else log lines."""

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        interval: float,
        out: Writer | None = None,
        bar: bool | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._interval = interval
        self._out: Writer = out if out is not None else sys.stdout
        err = sys.stderr
        self._bar_wanted = (
            bar if bar is not None else bool(getattr(err, "isatty", None) and err.isatty())
        )
        self._bar: Any = None  # a tqdm bar, once shown
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_line: str | None = None

    def start(self) -> Reporter:
        self._thread = threading.Thread(target=self._loop, name="sparktf-progress", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        wait = 0.5 if self._bar_wanted else self._interval
        while not self._stop.wait(wait):
            try:
                self.show(self._snapshot())
            except Exception:
                pass

    def show(self, snapshot: Snapshot) -> None:
        if self._bar_wanted:
            self._update_bar(snapshot)
            return
        line = status_line(snapshot)
        if line and line != self._last_line:
            self._last_line = line
            self._write(line)

    def _update_bar(self, snapshot: Snapshot) -> None:
        nodes = _reporting(snapshot)
        if not nodes:
            return
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                desc="sparktf", unit="rows", unit_scale=True, leave=False, dynamic_ncols=True
            )
        rows = sum(p.get("rows") or 0 for p in nodes.values())
        self._bar.update(max(0, rows - self._bar.n))
        first = next(iter(nodes.items()))
        self._bar.set_postfix_str(_node(*first).split(": ", 1)[-1], refresh=True)

    def _write(self, line: str) -> None:
        try:
            self._out.write(line + "\n")
            self._out.flush()
        except (OSError, ValueError):
            pass

    def stop(self, summary: bool = True) -> None:
        """Stop showing; print the summary per node (``summary``)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._bar is not None:
            self._bar.close()
        if summary:
            try:
                lines = summary_lines(self._snapshot())
            except Exception:
                lines = []
            for line in lines:
                self._write(line)
