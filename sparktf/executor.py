"""What runs in each Spark barrier task: one TensorFlow node.

``node_task(launch)`` returns the function given to ``rdd.barrier().mapPartitions``. In the
task it:

1. reserves a port for the node's TF server (:mod:`sparktf.ports`) and publishes
   ``host:port`` with ``BarrierTaskContext.allGather``; the host is the executor address Spark
   reports in ``getTaskInfos()``;
2. builds the cluster spec and TF_CONFIG (:mod:`sparktf.topology`);
3. starts the node's supervisor (:mod:`sparktf.supervisor`) in a session of its own, which
   starts the TF process, and waits for it; the port stays reserved until the node ends.

The closure captures only the :class:`~sparktf.spec.LaunchSpec` (plain data).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from typing import Callable, Iterable, Iterator

from sparktf import topology
from sparktf.ports import PortReservation
from sparktf.procs import describe_exit
from sparktf.spec import LaunchSpec, NodeSpec


def gather_addresses(published: Iterable[str], num_nodes: int) -> list[str]:
    """Order the ``allGather`` messages by rank into ``host:port`` addresses."""
    by_rank = {}
    for text in published:
        info = json.loads(text)
        by_rank[info["rank"]] = topology.format_address(info["host"], info["port"])
    if sorted(by_rank) != list(range(num_nodes)):
        raise RuntimeError(f"sparktf: expected ranks 0..{num_nodes - 1}, got {sorted(by_rank)}")
    return [by_rank[r] for r in range(num_nodes)]


def build_node_spec(launch: LaunchSpec, rank: int, addresses: list[str], num_cpus: int,
                    python_path: Iterable[str] = ()) -> NodeSpec:
    """The node's spec once every node's address is known."""
    spec = topology.cluster_spec(launch.roles, addresses)
    host, port = topology.split_address(addresses[rank])
    return NodeSpec(
        launch=launch, rank=rank, host=host, port=port, cluster_spec=spec,
        tf_config=topology.tf_config(spec, launch.roles[rank]), num_cpus=max(1, num_cpus),
        python_path=tuple(p for p in python_path if p and os.path.exists(p)))


def run_supervisor(spec: NodeSpec) -> int:
    """Start the node's supervisor with ``spec`` on its stdin and wait for it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparktf.supervisor", str(os.getpid())],
        stdin=subprocess.PIPE, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(spec.python_path)})
    assert proc.stdin is not None
    proc.stdin.write(pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))
    proc.stdin.close()
    return proc.wait()


def node_task(launch: LaunchSpec) -> Callable[[Iterator], Iterator[str]]:
    """The barrier-stage function for ``launch``."""

    def run_node(_partition: Iterator) -> Iterator[str]:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        rank = ctx.partitionId()
        host, _ = topology.split_address(ctx.getTaskInfos()[rank].address)
        with PortReservation() as reservation:
            published = ctx.allGather(
                json.dumps({"rank": rank, "host": host, "port": reservation.port}))
            addresses = gather_addresses(published, launch.num_nodes)
            spec = build_node_spec(launch, rank, addresses, ctx.cpus(), sys.path)
            code = run_supervisor(spec)
        if code != 0:
            raise RuntimeError(
                f"sparktf node {spec.name} on {host} {describe_exit(code)}; "
                "the driver's error has the node's own message and output")
        yield json.dumps({"rank": rank, "node": spec.name, "host": host})

    return run_node
