"""Which GPUs a node's TensorFlow sees: the ones Spark's resource scheduling gave its task,
within the ones its executor may use.

Spark assigns GPU addresses to a task (``TaskContext.resources()["gpu"].addresses``) when the
executors have ``spark.executor.resource.gpu.*`` and the stage asks for GPUs per task (the
default profile's ``spark.task.resource.gpu.amount``, or ``run(..., gpus_per_node=N)``, which
gives the barrier stage its own ResourceProfile). A chief/worker node gets those addresses as
``CUDA_VISIBLE_DEVICES``; parameter servers and the evaluator see no GPU. ``run(env=...)`` wins
over all of this.

An executor may already have a ``CUDA_VISIBLE_DEVICES`` (YARN, a container runtime, a
scheduler): say ``0,1`` for an executor given two GPUs that runs two tasks of one GPU each. Each
node then sees exactly its task's GPUs, translated through that value (:func:`translate`):
an address the value names (an index, a MIG identifier) stays; an nvidia-smi index maps to the
value's UUID for it (``GPU-...``, whole or a unique prefix, as CUDA reads them; the task asks
``nvidia-smi`` for the UUIDs, :func:`inventory`); an address that is neither is an ordinal of
the value (a discovery script that numbers the visible GPUs 0..n-1) where nvidia-smi does not list
it as a GPU of its own. Anything else is a
:class:`~sparktf.errors.ConfigError`: Spark gave the task a GPU its executor may not use.

Pure but for :func:`inventory` (it runs ``nvidia-smi``): no pyspark, no tensorflow.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktf.errors import ConfigError

VAR = "CUDA_VISIBLE_DEVICES"
NO_GPU_JOBS = ("ps", "evaluator")


def entries(value: str) -> list[str]:
    """A ``CUDA_VISIBLE_DEVICES`` value's entries, blanks dropped."""
    return [v.strip() for v in value.split(",") if v.strip()]


def _by_uuid(address: str, allowed: list[str], inventory: Mapping[str, str]) -> str | None:
    """The entry of ``allowed`` that names nvidia-smi's GPU ``address`` by (a prefix of) its
    UUID."""
    uuid = inventory.get(address)
    if uuid is None:
        return None
    for entry in allowed:
        if entry.startswith("GPU-") and uuid.startswith(entry):
            return entry
    return None


def translate(
    assigned: tuple[str, ...], executor_value: str, inventory: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The GPU entries a node given addresses ``assigned`` by Spark may see, on an executor
    whose own ``CUDA_VISIBLE_DEVICES`` is ``executor_value``; ``inventory`` maps nvidia-smi's
    indices to UUIDs where it could be read. Raises ConfigError for an address outside the
    executor's GPUs."""
    allowed = entries(executor_value)
    chosen = []
    for address in assigned:
        if address in allowed or (inventory and _by_uuid(address, allowed, inventory)):
            chosen.append(address)  # CUDA reads nvidia-smi's index as that very GPU
        elif address.isdigit() and int(address) < len(allowed) and address not in (inventory or {}):
            # not a GPU nvidia-smi lists: an ordinal of the executor's GPUs (a discovery
            # script that numbers what the executor may use 0..n-1)
            chosen.append(allowed[int(address)])
        else:
            raise ConfigError(
                f"Spark assigned this task GPU {address!r}, which its executor may not use "
                f"({VAR}={executor_value!r} there): the executors' GPU discovery script "
                "(spark.executor.resource.gpu.discoveryScript) must list only the GPUs in "
                f"{VAR}, as bin/gpu-discovery.sh does, or unset {VAR} for the executors"
            )
    return tuple(chosen)


def assignment(
    job: str,
    assigned: tuple[str, ...],
    environ: Mapping[str, str],
    user_env: Mapping[str, str],
    inventory: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """The GPUs of a node's spec (``NodeSpec.gpus``, ``ctx.gpus``): Spark's addresses for its
    task, translated through the executor's ``CUDA_VISIBLE_DEVICES`` for a chief or worker."""
    if job in NO_GPU_JOBS or VAR in user_env or VAR not in environ:
        return tuple(assigned)
    return translate(tuple(assigned), environ[VAR], inventory)


def task_assignment(
    job: str,
    assigned: tuple[str, ...],
    environ: Mapping[str, str],
    user_env: Mapping[str, str],
    known: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """:func:`assignment` as a barrier task computes it: nvidia-smi's UUIDs (``known``, or
    asked for here) are used only when the executor's ``CUDA_VISIBLE_DEVICES`` names GPUs by
    UUID."""
    named = any(e.startswith("GPU-") for e in entries(environ.get(VAR, "")))
    needed = named and bool(assigned) and job not in NO_GPU_JOBS and VAR not in user_env
    if not needed:
        return assignment(job, assigned, environ, user_env, None)
    return assignment(job, assigned, environ, user_env, known if known else inventory())


def node_environment(
    job: str, gpus: tuple[str, ...], environ: Mapping[str, str], user_env: Mapping[str, str]
) -> dict[str, str]:
    """The ``CUDA_VISIBLE_DEVICES`` entry for a node of ``job`` whose spec has ``gpus`` (from
    :func:`assignment`), or nothing to change."""
    if VAR in user_env:
        return {}  # run(env={...}) said so
    if job in NO_GPU_JOBS:
        return {VAR: ""}  # a ps or an evaluator takes no GPU (nor its memory)
    if not gpus:
        return {}  # no GPU scheduling: the executor's value, or TensorFlow's default
    return {VAR: ",".join(gpus)}


def visible(
    job: str, gpus: tuple[str, ...], environ: Mapping[str, str], user_env: Mapping[str, str]
) -> tuple[str, ...]:
    """The GPU ids the node's process will see (``ctx.gpus``)."""
    env = {**environ, **node_environment(job, gpus, environ, user_env), **user_env}
    value = env.get(VAR)
    if value is None:
        return tuple(gpus)
    return tuple(entries(value))


def inventory() -> dict[str, str] | None:
    """nvidia-smi's GPUs as ``{index: UUID}``; None where nvidia-smi cannot be run."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    rows = (line.split(",") for line in out.stdout.splitlines() if "," in line)
    return {index.strip(): uuid.strip() for index, uuid in rows}


# ------------------------------------------------------------------ GPUs shared on a host
#: A GPU as a node names it (its ``CUDA_VISIBLE_DEVICES`` entry) and which GPU that is (its
#: UUID, or the entry itself where nvidia-smi cannot say).
Named = tuple[str, str]
#: A node's GPUs and its executor's, as :func:`claim` tells them.
Claim = tuple[list[Named], list[Named]]


def _identity(entry: str, inventory: Mapping[str, str]) -> str:
    """Which physical GPU ``entry`` names: nvidia-smi's UUID for an index or a UUID prefix,
    else the entry itself (a MIG identifier)."""
    if entry in inventory:
        return inventory[entry]
    if entry.startswith("GPU-"):
        found = [u for u in inventory.values() if u.startswith(entry)]
        if len(found) == 1:
            return found[0]
    return entry


def claim(
    job: str,
    gpus: tuple[str, ...],
    environ: Mapping[str, str],
    user_env: Mapping[str, str],
    inventory: Mapping[str, str] | None,
) -> Claim | None:
    """What a barrier task tells the driver of its node's GPUs at the rendezvous: the GPUs the
    node will see (``gpus``, from :func:`assignment`) and every GPU its executor may use, each
    as (entry, UUID); None where there is nothing to check (no GPU assigned, a ps or an
    evaluator, ``run(env=...)`` names the GPUs, or no nvidia-smi to say which GPU is which)."""
    if not gpus or job in NO_GPU_JOBS or VAR in user_env or not inventory:
        return None
    pool = entries(environ[VAR]) if VAR in environ else sorted(inventory, key=_index_order)
    index = {uuid: i for i, uuid in inventory.items()}
    named = [(e, _identity(e, inventory)) for e in pool]
    return (
        [(e, _identity(e, inventory)) for e in gpus],
        # named as translate() names them: by nvidia-smi's index where it lists the GPU
        [(index.get(u, e), u) for e, u in named],
    )


def _index_order(index: str) -> tuple[int, str]:
    return (int(index), "") if index.isdigit() else (1 << 30, index)


@dataclass(frozen=True)
class Dealt:
    """The driver's answer to GPUs shared on a host: new entries for some ranks, and what to
    say of it in the log."""

    gpus: dict[int, list[str]]
    warnings: list[str]


def deal(hosts: Sequence[str], claims: Sequence[Claim | None], names: Sequence[str] = ()) -> Dealt:
    """Give each node of a host GPUs no other node of that host was given, where Spark gave
    two of them the same one.

    Spark deals GPUs out per executor: two executors on one host that each see all of its
    GPUs (YARN without GPU isolation, whose containers all see every GPU; one discovery
    script for executors that share a machine) each give their first task GPU 0. ``hosts``
    and ``claims`` (from :func:`claim`) are in rank order. The first node to hold a GPU keeps
    it; a later one gets as many GPUs of its executor's pool that no node of the host holds,
    or, where too few are free, keeps what Spark gave it (sharing is named in a warning: each
    TensorFlow takes most of a GPU's memory by default)."""
    gpus: dict[int, list[str]] = {}
    warnings: list[str] = []

    def label(ranks: Sequence[int]) -> str:  # names[r] where given (the warnings' words)
        return " and ".join(names[r] if names else f"rank {r}" for r in ranks)

    for host in dict.fromkeys(hosts):
        mine = {r: c for r, c in enumerate(claims) if hosts[r] == host and c is not None}
        held: dict[str, int] = {}  # UUID -> the rank that holds it
        clashing = []
        for r, (given, _) in mine.items():
            if any(u in held for _, u in given):
                clashing.append(r)
            else:
                held.update((u, r) for _, u in given)
        for r in clashing:
            given, pool = mine[r]
            free = [(e, u) for e, u in pool if u not in held]
            shared = sorted({u for _, u in given if u in held})
            others = sorted({held[u] for u in shared})
            if len(free) < len(given):
                held.update((u, r) for _, u in given if u not in held)
                warnings.append(
                    f"{label([*others, r])} on {host} share GPU {', '.join(shared)}: their "
                    "executors see the same GPUs and the host has no free one left (each "
                    "TensorFlow takes most of a GPU's memory unless it grows memory as needed)"
                )
                continue
            chosen = free[: len(given)]
            held.update((u, r) for _, u in chosen)
            gpus[r] = [e for e, _ in chosen]
            warnings.append(
                f"Spark gave {label([r])} on {host} GPU {', '.join(shared)}, which "
                f"{label(others)} there has too (their executors each see every GPU of the host: "
                "YARN without GPU isolation, or one discovery script for executors that share "
                f"a machine); {label([r])} gets {', '.join(u for _, u in chosen)} instead"
            )
    return Dealt(gpus, warnings)
