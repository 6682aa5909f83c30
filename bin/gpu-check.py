#!/usr/bin/env python3
"""Check a GPU machine before sparktf uses it: ``python3 bin/gpu-check.py`` on a node with
NVIDIA GPUs (a YARN NodeManager, a standalone worker) prints what it found and exits 1 if
something would go wrong.

1. ``bin/gpu-discovery.sh`` (Spark's ``spark.executor.resource.gpu.discoveryScript``) prints
   the JSON Spark expects, one address per GPU that ``nvidia-smi`` lists, and honours a
   ``CUDA_VISIBLE_DEVICES`` already set (YARN, a container runtime), by index and by GPU UUID
   (whole, or a unique prefix), as CUDA reads it.
2. For each GPU address Spark could assign a task, the ``CUDA_VISIBLE_DEVICES`` that sparktf
   gives a chief or worker node (:func:`sparktf.common.gpus.node_environment`) leaves a fresh
   process's CUDA runtime exactly that one GPU, usable (a small matrix product on it); the one
   it gives a parameter server or evaluator leaves it none (no GPU memory taken).
3. An executor whose ``CUDA_VISIBLE_DEVICES`` names all the GPUs by UUID (a container runtime's
   way): a task assigned one of them gets exactly that one (:func:`sparktf.common.gpus.
   task_assignment`, which asks nvidia-smi for the UUIDs), and the CUDA runtime agrees.
4. Two executors of this host that each see every GPU (YARN without GPU isolation) and gave
   their tasks the same GPU: the driver's dealing (:func:`sparktf.common.gpus.deal`) gives the
   second node another, and CUDA sees one GPU in each (with two GPUs or more).

The CUDA runtime is asked through TensorFlow if it imports (what the nodes run), else PyTorch
or JAX: the variable is read by CUDA itself, so any of them answers for the others.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from sparktf.common import gpus  # noqa: E402  (pure: no pyspark, no tensorflow)

PROBES = {
    "tensorflow": (
        "import tensorflow as tf\n"
        "devices = tf.config.list_physical_devices('GPU')\n"
        "if devices:\n"
        "    with tf.device('/GPU:0'):\n"
        "        x = tf.random.normal((256, 256))\n"
        "        assert bool(tf.reduce_all(tf.math.is_finite(tf.matmul(x, x))))\n"
        "print(len(devices))\n"
    ),
    "torch": (
        "import torch\n"
        "n = torch.cuda.device_count()\n"
        "if n:\n"
        "    x = torch.randn(256, 256, device='cuda:0')\n"
        "    torch.cuda.synchronize(); assert torch.isfinite((x @ x).sum())\n"
        "print(n)\n"
    ),
    "jax": (
        "import jax, jax.numpy as jnp\n"
        "devices = [d for d in jax.devices() if d.platform == 'gpu']\n"
        "if devices:\n"
        "    x = jnp.ones((256, 256)); assert float((x @ x).sum()) == 256.0 ** 3\n"
        "print(len(devices))\n"
    ),
}


def discovery(env_extra: dict) -> list:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(env_extra)
    script = os.path.join(ROOT, "bin", "gpu-discovery.sh")
    out = subprocess.run([script], env=env, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"gpu-discovery.sh exited {out.returncode}: {out.stderr}")
    found = json.loads(out.stdout)
    if found.get("name") != "gpu" or not isinstance(found.get("addresses"), list):
        raise SystemExit(f"gpu-discovery.sh printed what Spark cannot read: {out.stdout!r}")
    return found["addresses"]


def framework() -> str:
    for name in PROBES:
        ok = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True)
        if ok.returncode == 0:
            return name
    raise SystemExit("none of tensorflow, torch, jax imports here: nothing can ask CUDA")


def devices_seen(name: str, env_extra: dict) -> int:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(env_extra, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", PROBES[name]], env=env, capture_output=True, text=True, timeout=300
    )
    if out.returncode != 0:
        raise SystemExit(f"{name} failed with {env_extra}: {out.stderr[-2000:]}")
    return int(out.stdout.strip().splitlines()[-1])


def shared_host(name: str, addresses: list) -> list:
    """Two executors of this host that each see every GPU (YARN without GPU isolation) and
    each gave their task the first: the driver's dealing (gpus.claim/deal, as at the
    rendezvous) gives the second node another GPU, and CUDA sees each node's one GPU."""
    uuids = gpus.inventory() or {}
    first = (addresses[0],)
    claims = [gpus.claim("worker", first, {}, {}, uuids) for _ in range(2)]
    dealt = gpus.deal(["this-host", "this-host"], claims, ["worker:0", "worker:1"])
    second = tuple(dealt.gpus.get(1, first))
    problems = []
    for node, own in (("worker:0", first), ("worker:1", second)):
        env = gpus.node_environment("worker", own, {}, {})
        seen = devices_seen(name, env)
        print(f"  two executors sharing the host's GPUs, {node} ({env}): sees {seen} GPU")
        if seen != 1:
            problems.append(f"{node} of two executors sharing the host's GPUs sees {seen}")
    if second == first:
        problems.append(f"two executors' nodes given GPU {first[0]} were not dealt apart")
    return problems


def main() -> int:
    problems = []
    try:
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        smi = ""
    print(smi.strip() or "nvidia-smi: not found or no GPU")
    addresses = discovery({})
    print(f"gpu-discovery.sh: {addresses}")
    listed = sum(line.startswith("GPU ") for line in smi.splitlines())
    if not listed:
        problems.append("no GPU: nvidia-smi is missing or lists none (run this on a GPU node)")
    if len(addresses) != listed:
        problems.append(f"discovery lists {len(addresses)} GPUs, nvidia-smi {listed}")
    if addresses:
        only = discovery({"CUDA_VISIBLE_DEVICES": addresses[-1]})
        none = discovery({"CUDA_VISIBLE_DEVICES": "999"})
        print(f"  with CUDA_VISIBLE_DEVICES={addresses[-1]}: {only}; =999: {none}")
        if only != [addresses[-1]] or none != []:
            problems.append("discovery does not honour CUDA_VISIBLE_DEVICES")
        uuids = gpus.inventory() or {}
        by_uuid = ",".join(uuids[a] for a in reversed(addresses) if a in uuids)
        named = discovery({"CUDA_VISIBLE_DEVICES": by_uuid})
        print(f"  with CUDA_VISIBLE_DEVICES=<their UUIDs, reversed>: {named}")
        if named != list(reversed(addresses)):
            problems.append("discovery does not map GPU UUIDs in CUDA_VISIBLE_DEVICES")
    name = framework()
    print(f"asking CUDA through {name}")
    for address in addresses:
        env = gpus.node_environment("worker", (address,), {}, {})
        seen = devices_seen(name, env)
        print(f"  a worker assigned GPU {address} ({env}): sees {seen} GPU, computes on it")
        if seen != 1:
            problems.append(f"a worker assigned GPU {address} sees {seen} GPUs")
        uuids = gpus.inventory() or {}
        executor = {"CUDA_VISIBLE_DEVICES": ",".join(uuids.get(a, a) for a in addresses)}
        own = gpus.task_assignment("worker", (address,), executor, {})
        env = gpus.node_environment("worker", own, executor, {})
        seen = devices_seen(name, env)
        print(f"    on an executor of every GPU by UUID ({env}): sees {seen} GPU")
        if seen != 1:
            problems.append(f"a worker on a UUID-named executor, assigned {address}, sees {seen}")
    if len(addresses) >= 2:
        problems += shared_host(name, addresses)
    for job in gpus.NO_GPU_JOBS:
        env = gpus.node_environment(job, tuple(addresses), {}, {})
        seen = devices_seen(name, env)
        print(f"  a {job} ({env}): sees {seen} GPU")
        if seen != 0:
            problems.append(f"a {job} sees {seen} GPUs")
    for p in problems:
        print(f"PROBLEM: {p}")
    print("gpu-check: " + ("FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
