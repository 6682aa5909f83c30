"""Which GPUs a node's TensorFlow sees: the ones Spark's resource scheduling gave its task.

Spark assigns GPU addresses to a task (``TaskContext.resources()["gpu"].addresses``) when the
executors have ``spark.executor.resource.gpu.*`` and the stage asks for GPUs per task (the
default profile's ``spark.task.resource.gpu.amount``, or ``run(..., gpus_per_node=N)``, which
gives the barrier stage its own ResourceProfile). A chief/worker node gets those addresses as
``CUDA_VISIBLE_DEVICES``; a value the executor's environment already has (YARN, a container
runtime) is respected; parameter servers and the evaluator see no GPU. ``run(env=...)`` wins
over all of this.

Pure: no pyspark, no tensorflow.
"""

from __future__ import annotations

from collections.abc import Mapping

VAR = "CUDA_VISIBLE_DEVICES"
NO_GPU_JOBS = ("ps", "evaluator")


def node_environment(
    job: str, assigned: tuple[str, ...], environ: Mapping[str, str], user_env: Mapping[str, str]
) -> dict[str, str]:
    """The ``CUDA_VISIBLE_DEVICES`` entry for a node of ``job`` (or nothing to change)."""
    if VAR in user_env:
        return {}  # run(env={...}) said so
    if job in NO_GPU_JOBS:
        return {VAR: ""}  # a ps or an evaluator takes no GPU (nor its memory)
    if VAR in environ:
        return {}  # the executor's environment already limits what this task may use
    if assigned:
        return {VAR: ",".join(assigned)}
    return {}


def visible(
    job: str, assigned: tuple[str, ...], environ: Mapping[str, str], user_env: Mapping[str, str]
) -> tuple[str, ...]:
    """The GPU ids the node's process will see (``ctx.gpus``)."""
    env = {**environ, **node_environment(job, assigned, environ, user_env), **user_env}
    value = env.get(VAR)
    if value is None:
        return tuple(assigned)
    return tuple(v.strip() for v in value.split(",") if v.strip())
