"""Horovod's view of a sparktf cluster (``run(framework="horovod")``): pure functions.

Each training node is one Horovod process: its rank is its sparktf rank (the chief's is 0), its
local rank counts the nodes on the same host before it, its cross rank the hosts before its
own among those with a node of that local rank, as ``horovodrun`` assigns them. The
environment is what ``horovod.runner.gloo_run`` gives each process it starts: the Gloo
controller and the address of the HTTP rendezvous server, here the chief's reserved port.

Common: imports neither pyspark, tensorflow nor horovod.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktf.common.topology import TRAINING_JOBS, format_address, split_address

#: ``run(framework=...)``: what ``main_fn`` trains with.
FRAMEWORKS = ("tensorflow", "horovod")

#: What a node's own environment (``run(env=...)``) may set instead of sparktf.
TUNABLE = ("HOROVOD_GLOO_IFACE", "HOROVOD_CPU_OPERATIONS", "HOROVOD_GLOO_TIMEOUT_SECONDS")


@dataclass(frozen=True)
class Slot:
    """One Horovod process, as ``horovod.runner.common.util.hosts.SlotInfo`` has it (the
    rendezvous server reads these attributes)."""

    hostname: str
    rank: int
    local_rank: int
    cross_rank: int
    size: int
    local_size: int
    cross_size: int


def trainer_addresses(cluster_spec: Mapping[str, Sequence[str]]) -> list[str]:
    """The ``host:port`` of every training node in rank order: chief or master, then workers."""
    return [a for job in TRAINING_JOBS for a in cluster_spec.get(job, ())]


def slots(hosts: Sequence[str]) -> tuple[Slot, ...]:
    """The Horovod slot of each node; ``hosts[rank]`` is the host of the node of that rank."""
    order = list(dict.fromkeys(hosts))  # hosts by their first rank
    local_rank, per_host = [], dict.fromkeys(order, 0)
    for host in hosts:
        local_rank.append(per_host[host])
        per_host[host] += 1
    out = []
    for rank, host in enumerate(hosts):
        peers = [h for h in order if per_host[h] > local_rank[rank]]  # same local rank
        out.append(
            Slot(
                hostname=host,
                rank=rank,
                local_rank=local_rank[rank],
                cross_rank=peers.index(host),
                size=len(hosts),
                local_size=per_host[host],
                cross_size=len(peers),
            )
        )
    return tuple(out)


def cluster_slots(cluster_spec: Mapping[str, Sequence[str]]) -> tuple[Slot, ...]:
    """The slots of the training nodes of ``cluster_spec``, in rank order."""
    return slots([split_address(a)[0] for a in trainer_addresses(cluster_spec)])


def rendezvous_address(cluster_spec: Mapping[str, Sequence[str]]) -> tuple[str, int]:
    """Where the rendezvous server listens: the port the chief (rank 0) reserved."""
    return split_address(trainer_addresses(cluster_spec)[0])


def environment(
    slot: Slot, rendezvous: tuple[str, int], iface: str | None, timeout: float
) -> dict[str, str]:
    """The ``HOROVOD_*`` variables of the process of ``slot``; ``iface``: the network
    interface of the node's own address, where Gloo listens (None: Gloo's default);
    ``timeout``: seconds ``hvd.init()`` waits for every peer (horovodrun's default is 30;
    sparktf's nodes start within the reservation timeout)."""
    env = {
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": rendezvous[0],
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(rendezvous[1]),
        "HOROVOD_HOSTNAME": slot.hostname,
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(slot.size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        "HOROVOD_GLOO_TIMEOUT_SECONDS": str(max(1, math.ceil(timeout))),
    }
    if iface:
        env["HOROVOD_GLOO_IFACE"] = iface
    return env


def describe(rendezvous: tuple[str, int]) -> str:
    """The rendezvous address as messages show it."""
    return format_address(*rendezvous)
