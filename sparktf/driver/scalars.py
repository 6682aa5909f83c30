"""The nodes' ``ctx.report`` metrics as TensorBoard scalars, written on the driver.

Runs on the driver and never imports TensorFlow: tensorboard's ``EventFileWriter`` would (its
file layer goes through ``tensorboard.compat.tf``, which imports TensorFlow where it is
installed), so the events are framed with tensorboard's own ``RecordWriter`` (TFRecord framing,
its masked CRC32C) from its ``Event``/``Summary`` protos, into a plain local file: one
``events.out.tfevents.*`` file per node, in a directory named after the node
(``chief-0``, ``worker-1``), which TensorBoard shows as one run each.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

log = logging.getLogger(__name__)


class _NodeEvents:
    def __init__(self, directory: str) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.summary.writer.record_writer import RecordWriter

        os.makedirs(directory, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.sparktf"
        self.path = os.path.join(directory, name)
        self._file = open(self.path, "wb")
        self._records = RecordWriter(self._file)
        self._records.write(Event(wall_time=now, file_version="brain.Event:2").SerializeToString())

    def write(self, step: int | None, wall: float, values: dict[str, float]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        summary = Summary(
            value=[Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()]
        )
        event = Event(wall_time=wall, step=int(step or 0), summary=summary)
        self._records.write(event.SerializeToString())

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def file_name(node: str) -> str:
    """``worker:1`` -> ``worker-1`` (HDFS refuses ``:`` in a name): a node's log and event
    files are named so."""
    return node.replace(":", "-")


class Scalars:
    """Writes each node's reports under ``root/<node>``; ``add`` is safe from any thread,
    ``close`` is idempotent, and neither raises (a failure is logged once, then nothing more
    is written)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._nodes: dict[str, _NodeEvents] = {}
        self._off = False

    def add(self, node: str, reports: list[tuple[Any, float, dict]]) -> None:
        with self._lock:
            if self._off:
                return
            try:
                events = self._nodes.get(node)
                if events is None:
                    events = self._nodes[node] = _NodeEvents(
                        os.path.join(self.root, file_name(node))
                    )
                for step, wall, values in reports:
                    events.write(step, wall, values)
                events.flush()
            except Exception as exc:  # (ImportError: no tensorboard package)
                self._off = True
                log.warning("sparktf: cannot write the nodes' metrics to %s: %s", self.root, exc)

    def close(self) -> None:
        with self._lock:
            self._off = True
            nodes, self._nodes = list(self._nodes.values()), {}
        for events in nodes:
            try:
                events.close()
            except OSError:
                pass
