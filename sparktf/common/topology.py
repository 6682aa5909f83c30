"""Roles, cluster spec and TF_CONFIG: pure functions over plain data.

Nothing here imports Spark or TensorFlow, so every rule is table-tested on its own.

Rank order (the Spark partition id of each node's barrier task):

    chief|master (if any), workers..., ps..., evaluator (if any)

so rank 0 is always the node whose return value :meth:`Cluster.shutdown` returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktf.errors import ConfigError

MASTER_NODES = ("chief", "master", None)
TRAINING_JOBS = ("chief", "master", "worker")
JOB_ORDER = ("chief", "master", "worker", "ps", "evaluator")


@dataclass(frozen=True, order=True)
class NodeRole:
    """One TensorFlow task: a job name and an index within that job."""

    job: str
    index: int

    def __post_init__(self) -> None:
        if self.job not in JOB_ORDER:
            raise ValueError(f"unknown TensorFlow job {self.job!r}; expected one of {JOB_ORDER}")
        if self.index < 0:
            raise ValueError(f"task index must be >= 0, got {self.index}")

    @property
    def name(self) -> str:
        return f"{self.job}:{self.index}"

    @property
    def trains(self) -> bool:
        """Whether this node runs training (gets data, counts towards ``num_workers``)."""
        return self.job in TRAINING_JOBS


def topology_problems(
    num_nodes: object,
    num_ps: object,
    master_node: object,
    eval_node: object,
    every_slot: tuple[str, str] | None = None,
) -> list[str]:
    """Every reason these role arguments are invalid, each saying what to change.

    ``every_slot``: set when ``num_nodes`` is not the user's but every task slot of a Spark
    master: ``(master, how to give it more slots)``, e.g. ``("local[2]", "--master local[3]")``."""
    problems = []
    if not isinstance(num_nodes, int) or isinstance(num_nodes, bool) or num_nodes < 1:
        problems.append(f"num_executors must be a positive int, got {num_nodes!r}")
    if not isinstance(num_ps, int) or isinstance(num_ps, bool) or num_ps < 0:
        problems.append(f"num_ps must be an int >= 0, got {num_ps!r}")
    if master_node not in MASTER_NODES:
        problems.append(
            f"master_node must be one of 'chief', 'master' or None, got {master_node!r}"
        )
    if not isinstance(eval_node, bool):
        problems.append(f"eval_node must be True or False, got {eval_node!r}")
    if problems or not isinstance(num_nodes, int) or not isinstance(num_ps, int):
        return problems  # (the types are checked above: narrowed here for mypy)
    reserved = num_ps + (1 if eval_node else 0)
    if reserved >= num_nodes:
        what = f"num_ps={num_ps}" + (" plus the evaluator" if eval_node else "")
        if every_slot is None:
            problems.append(
                f"{what} leaves no node to train among num_executors={num_nodes}: "
                f"use num_executors >= {reserved + 1} or fewer parameter servers"
            )
        else:  # num_executors left unset: more nodes need more slots, not the argument
            problems.append(
                f"{what} leaves no node to train among num_executors={num_nodes} (left unset, "
                f"every task slot of {every_slot[0]}): give Spark at least {reserved + 1} task "
                f"slots ({every_slot[1]}) or ask for fewer parameter servers"
            )
    return problems


def assign_roles(
    num_nodes: int, num_ps: int = 0, master_node: str | None = "chief", eval_node: bool = False
) -> tuple[NodeRole, ...]:
    """Give each of ``num_nodes`` nodes its role, in rank order.

    Raises :class:`~sparktf.errors.ConfigError` (a ``ValueError``) listing every problem when
    the arguments cannot make a cluster.
    """
    problems = topology_problems(num_nodes, num_ps, master_node, eval_node)
    if problems:
        raise ConfigError("; ".join(problems))
    roles: list[NodeRole] = []
    trainers = num_nodes - num_ps - (1 if eval_node else 0)
    if master_node is not None:
        roles.append(NodeRole(master_node, 0))
        trainers -= 1
    roles += [NodeRole("worker", i) for i in range(trainers)]
    roles += [NodeRole("ps", i) for i in range(num_ps)]
    if eval_node:
        roles.append(NodeRole("evaluator", 0))
    return tuple(roles)


def format_address(host: str, port: int) -> str:
    """``host:port``, with IPv6 literals in brackets (``[::1]:2222``)."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def split_address(address: str) -> tuple[str, int]:
    """Inverse of :func:`format_address`; accepts ``host:port`` and ``[v6]:port``."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not a host:port address: {address!r}")
    return host.strip("[]"), int(port)


def cluster_spec(roles: Sequence[NodeRole], addresses: Sequence[str]) -> dict[str, list[str]]:
    """Map each job to its tasks' ``host:port`` addresses, ordered by task index.

    ``addresses[rank]`` is the address of the node with role ``roles[rank]``.
    """
    if len(roles) != len(addresses):
        raise ValueError(f"{len(roles)} roles but {len(addresses)} addresses")
    by_job: dict[str, dict[int, str]] = {}
    for role, address in zip(roles, addresses):
        tasks = by_job.setdefault(role.job, {})
        if role.index in tasks:
            raise ValueError(f"two nodes have role {role.name}")
        tasks[role.index] = address
    spec = {}
    for job in sorted(by_job, key=JOB_ORDER.index):
        tasks = by_job[job]
        if sorted(tasks) != list(range(len(tasks))):
            raise ValueError(f"job {job!r} has gaps in its task indices: {sorted(tasks)}")
        spec[job] = [tasks[i] for i in range(len(tasks))]
    return spec


def tf_config(spec: Mapping[str, Sequence[str]], role: NodeRole) -> dict:
    """The TF_CONFIG dict for ``role`` in cluster ``spec`` (every job, this task)."""
    if role.job not in spec or role.index >= len(spec[role.job]):
        raise ValueError(f"{role.name} is not in the cluster spec {dict(spec)}")
    return {
        "cluster": {job: list(tasks) for job, tasks in spec.items()},
        "task": {"type": role.job, "index": role.index},
    }


def chief_role(spec_or_roles: Mapping[str, Sequence[str]] | Sequence[NodeRole]) -> NodeRole:
    """The node whose return value is the job's result: chief, else master, else worker 0."""
    jobs = (
        set(spec_or_roles) if isinstance(spec_or_roles, Mapping) else {r.job for r in spec_or_roles}
    )
    for job in ("chief", "master", "worker"):
        if job in jobs:
            return NodeRole(job, 0)
    raise ValueError("a cluster needs a chief, a master or at least one worker")


def num_training_nodes(spec: Mapping[str, Sequence[str]]) -> int:
    """How many nodes train: chief/master plus workers (not ps, not the evaluator)."""
    return sum(len(spec.get(job, ())) for job in TRAINING_JOBS)
