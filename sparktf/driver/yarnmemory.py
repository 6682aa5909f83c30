"""Whether a YARN executor's container leaves its TensorFlow nodes the memory they need,
checked on the driver before the nodes start (``spark.sparktf.yarnOverheadCheck``).

YARN sizes an executor's container as the JVM's heap (``spark.executor.memory``) plus the
overhead (``spark.executor.memoryOverhead``; unset: the larger of
``spark.executor.minMemoryOverhead``, 384 MiB, and ``spark.executor.memoryOverheadFactor``,
0.10, times the heap) plus ``spark.executor.pyspark.memory``, and kills the container once the
resident memory of every process in it passes that. The JVM's own memory beside its heap
(metaspace, threads, buffers) takes about Spark's 384 MiB minimum; every TensorFlow node that
runs in the executor (one per task slot the job takes there) adds its TF process, its
supervisor and the Spark Python worker it starts from. Spark's defaults (1 GiB heap, 384 MiB
overhead) leave nothing for them: the containers are killed for memory a minute into the job.

Pure: plain data in (the Spark conf as a dict), plain data out; no Spark, no TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: What the JVM itself takes beside its heap (Spark's own minimum overhead), MiB.
JVM_MIB = 384
#: What one TensorFlow node takes in the container, MiB: measured 925 MiB on 2026-11-28
#: (tensorflow-cpu 2.21, tf-keras, a small CNN trained on 28x28 images: the TF process's peak
#: RSS 796 MiB, its supervisor 61 MiB, the Spark Python worker it starts from 67 MiB),
#: rounded up.
NODE_MIB = 1024
#: The values ``spark.sparktf.yarnOverheadCheck`` takes.
MODES = ("error", "warn", "off")

_UNITS = {"": 1, "b": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20, "p": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)


def mebibytes(text: str) -> float | None:
    """A Spark memory size (``"2g"``, ``"1500m"``, ``"384"``: MiB without a unit) in MiB;
    None if it cannot be read."""
    m = _SIZE.match(text)
    if m is None:
        return None
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def _size(conf: Mapping[str, str], key: str, default: float) -> float:
    value = conf.get(key)
    found = mebibytes(value) if value else None
    return default if found is None else found


def overhead_mib(conf: Mapping[str, str]) -> tuple[float, str]:
    """The container's memory beside the JVM heap, MiB, and how it came about (the settings
    and figures, for the message)."""
    heap = _size(conf, "spark.executor.memory", 1024)
    explicit = conf.get("spark.executor.memoryOverhead") or conf.get(
        "spark.yarn.executor.memoryOverhead"
    )
    found = mebibytes(explicit) if explicit else None
    if found is not None:
        overhead, how = found, f"spark.executor.memoryOverhead={explicit}"
    else:
        factor = float(conf.get("spark.executor.memoryOverheadFactor") or 0.10)
        least = _size(conf, "spark.executor.minMemoryOverhead", JVM_MIB)
        overhead = max(least, factor * heap)
        how = (
            f"spark.executor.memoryOverhead unset: max({least:g} MiB, "
            f"spark.executor.memoryOverheadFactor={factor:g} x spark.executor.memory="
            f"{conf.get('spark.executor.memory', '1g')}) = {overhead:g} MiB"
        )
    pyspark = _size(conf, "spark.executor.pyspark.memory", 0)
    if pyspark:
        overhead += pyspark
        how += f", plus spark.executor.pyspark.memory={conf['spark.executor.pyspark.memory']}"
    return overhead, how


def needed_mib(nodes_per_executor: int) -> int:
    """The memory beside the heap that ``nodes_per_executor`` TensorFlow nodes need, MiB."""
    return JVM_MIB + nodes_per_executor * NODE_MIB


def nodes_per_executor(conf: Mapping[str, str], num_nodes: int | None) -> int:
    """How many of the job's nodes one executor may hold: its task slots
    (``spark.executor.cores``, 1 on YARN by default, over ``spark.task.cpus``), at most the
    job's nodes."""
    try:
        cores = int(conf.get("spark.executor.cores") or 1)
        task_cpus = int(conf.get("spark.task.cpus") or 1)
    except ValueError:
        return 1
    slots = max(1, cores // max(1, task_cpus))
    return min(slots, num_nodes) if num_nodes else slots


def overhead_problem(conf: Mapping[str, str], num_nodes: int | None) -> str | None:
    """What to change when the application runs on YARN (``spark.master``) and its executors'
    containers leave less beside the heap than the TensorFlow nodes need (None: enough, or not
    YARN)."""
    if not (conf.get("spark.master") or "").startswith("yarn"):
        return None
    have, how = overhead_mib(conf)
    per = nodes_per_executor(conf, num_nodes)
    need = needed_mib(per)
    if have >= need:
        return None
    nodes = f"{per} TensorFlow node{'s' if per > 1 else ''}"
    return (
        f"on YARN each executor's container holds {have:g} MiB beside the JVM heap "
        f"({how}), but {nodes} per executor need about {need} MiB there ({JVM_MIB} MiB for "
        f"the JVM itself, {NODE_MIB} MiB a node: its TF process, supervisor and Python "
        "worker), and YARN kills a container whose processes pass its size: submit with "
        f"--conf spark.executor.memoryOverhead={_round_up(need)}m or more (a large model "
        "needs more), or set spark.sparktf.yarnOverheadCheck=warn (or off) to run anyway"
    )


def _round_up(mib: float) -> int:
    """``mib`` rounded up to a multiple of 128."""
    return int(-(-mib // 128) * 128)
