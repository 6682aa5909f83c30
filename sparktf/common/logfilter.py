"""Which lines of a node's output are TensorFlow's C++ start-up chatter.

TensorFlow's native libraries log through absl before Python code can configure anything
(``TF_CPP_MIN_LOG_LEVEL`` set from Python after the process started does not reach them): the
"absl::InitializeLog" banner, CUDA probes on machines without a GPU, the CPU-instructions
notice, oneDNN's notice, gRPC server start-up lines. :func:`is_startup_chatter` names them so
the driver can leave them off the console (``spark.sparktf.tfStartupLogs=true`` shows them).
A C++ error or fatal line is chatter only when it is a GPU probe's; everything else passes.

Pure: no pyspark, no tensorflow.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

#: ``I0000 00:00:1795384432.272370   24967 cudart_stub.cc:31] message`` and the older
#: ``2026-11-22 21:53:46.123456: I tensorflow/core/...cc:123] message``
_ABSL = re.compile(r"^(?P<level>[IWEF])\d{4} [\d:.]+\s+\d+ (?P<file>[\w./+-]+):\d+\] ")
_TSL = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<level>[IWEF]) "
    r"(?P<file>[\w./+-]+):\d+\] "
)
_BANNERS = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "To enable the following instructions:",
)
#: A bare task name: the continuation line of TensorFlow's two-line coordination-service log
#: (``coordination_service.cc:505] Example stragglers:`` then ``/job:worker/replica:0/task:0``)
_TASK_NAME = re.compile(r"^/job:\w+/replica:\d+/task:\d+$")
_GPU_PROBE = re.compile(
    r"cuda|cudnn|cufft|cublas|cusolver|cusparse|nccl|rocm|tensorrt|TF-TRT", re.IGNORECASE
)


def is_startup_chatter(line: str) -> bool:
    """True for a line of TensorFlow's native start-up logging that says nothing to act on."""
    text = line.strip()
    if not text:
        return False
    if text.startswith(_BANNERS) or _TASK_NAME.match(text):
        return True
    m = _ABSL.match(text) or _TSL.match(text)
    if m is None:
        return False
    if m.group("level") in "IW":
        return True
    # E/F lines stay, unless they are a GPU probe failing on a machine without one
    return m.group("level") == "E" and bool(_GPU_PROBE.search(m.group("file")) or "cuInit" in text)


#: The second line of TensorFlow's status messages: the op that raised (``\t [[{{node ...}}]]``)
_NODE_CONTEXT = re.compile(r"^\s*\[\[\{\{node ")


def is_continuation(line: str) -> bool:
    """A line that goes on the one before it (indented, or a status's ``[[{{node ...}}]]``):
    hidden where that one was (the console keeps each node's last verdict)."""
    return bool(line) and (line[0] in " \t" or bool(_NODE_CONTEXT.match(line)))


@contextlib.contextmanager
def startup_chatter_filtered(show: bool = False) -> Iterator[None]:
    """While the block runs, this process's native stderr (file descriptor 2, where
    TensorFlow's C++ code writes) goes to a temporary file; at its end every line that is not
    :func:`is_startup_chatter` is written to the real stderr, in order. For the places where no
    sparktf process relays the output (Spark's own Python workers): wrap TensorFlow's import
    and model load. ``show``: no filtering."""
    if show:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            for raw in held:
                if not is_startup_chatter(raw.decode("utf-8", "replace")):
                    os.write(2, raw)
