"""MultiWorkerMirroredStrategy in a cluster that also has parameter servers.

TensorFlow makes the first parameter server the coordination-service leader of any cluster
that has one (``multi_worker_util.coordination_leader``), which suits ParameterServerStrategy.
MultiWorkerMirroredStrategy coordinates only its chief and workers, yet asks that same leader,
and a parameter server runs no coordination service: the strategy's constructor then waits
for ever, holding the GIL. So ``sparktf.run(sc, main_fn, num_ps=2)`` with a mirrored main_fn
froze both trainers.

In a node's process, :func:`install` arranges that when the strategy starts on a chief or
worker of such a cluster, the coordination service it would configure without the parameter servers
(the chief leads, or worker 0; chief and workers coordinated) is configured first; the strategy
then keeps it, as it keeps any service configured before it. Nothing else changes, and nothing
is done unless that strategy is created. TensorFlow is not imported here: the patch is applied
when the strategy's module is imported (or at once if it already is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparktf.node import synchronous
from sparktf.node.patches import on_import

MODULE = "tensorflow.python.distribute.collective_all_reduce_strategy"
TRAINING_JOBS = ("chief", "worker")


def install() -> None:
    """Patch the strategy when its module is imported (now, if it is already)."""
    on_import.after_import(MODULE, _patch)


def _patch(module) -> None:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _initialize_multi_worker(self, cluster_resolver):
            if not getattr(self, "_local_or_standalone_client_mode", False):
                synchronous.mark("MultiWorkerMirroredStrategy")
                _coordinate_trainers(module, cluster_resolver)
            return original(self, cluster_resolver)

        return _initialize_multi_worker

    on_import.wrap(
        getattr(module, "CollectiveAllReduceExtended", None), "_initialize_multi_worker", make
    )


def _coordinate_trainers(module, cluster_resolver) -> None:
    """Configure the coordination service the strategy would have without parameter servers,
    unless one is configured already (by the user, or another strategy)."""
    try:
        util, context, ops = module.multi_worker_util, module.context, module.ops
        coordinated_job = module.coordination_config_pb2.CoordinatedJob
    except AttributeError:  # another TensorFlow: leave the strategy as it is
        return
    spec = util.normalize_cluster_spec(cluster_resolver.cluster_spec())
    if (
        "ps" not in spec.jobs
        or cluster_resolver.task_type not in TRAINING_JOBS
        or not ops.executing_eagerly_outside_functions()
        or context.context().coordination_service is not None
    ):
        return
    trainers = {job: spec.job_tasks(job) for job in TRAINING_JOBS if job in spec.jobs}
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=util.coordination_leader(trainers),
        coordinated_jobs=[
            coordinated_job(name=job, num_tasks=len(tasks)) for job, tasks in trainers.items()
        ],
    )
