"""The evaluator in TF_CONFIG, apart from the connections training makes.

sparktf's TF_CONFIG is complete: the evaluator's address is in every node's cluster. TensorFlow
treats the evaluator as a cluster of its own ("independent of the training cluster",
``multi_worker_util``), and an evaluator runs no TensorFlow server unless its ``main_fn``
starts one. Two kinds of plain TensorFlow code on the training nodes reach every task of the
cluster they are given, and so waited for ever for a server at the evaluator's address:

- a ``ParameterServerStrategy`` coordinator (and ``tf.config.experimental_connect_to_cluster``):
  both connect through ``tensorflow.python.eager.remote.connect_to_cluster``;
- a TF1 session on a ``grpc://`` target without device filters (the seeds' between-graph code:
  ``MonitoredTrainingSession(master=server.target)``): its master lists every task's devices.

On a chief, worker (or master) node of a cluster with an evaluator, :func:`install` leaves the
evaluator's job out of what those two reach: ``connect_to_cluster`` gets the cluster without
it, and such a session gets device filters naming every other job (a session given filters
of its own keeps them). Nothing changes where the cluster has no evaluator, nor on the
evaluator itself. TensorFlow is not imported here: the patches are applied when its modules are
imported (or at once if they already are).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sparktf.node.patches import on_import

REMOTE = "tensorflow.python.eager.remote"
SESSION = "tensorflow.python.client.session"
EVALUATOR = "evaluator"


def install(cluster_spec: dict, job_name: str) -> None:
    """Keep the evaluator out of this training node's cluster-wide connections."""
    if EVALUATOR not in cluster_spec or job_name == EVALUATOR:
        return
    others = sorted(job for job in cluster_spec if job != EVALUATOR)
    on_import.after_import(REMOTE, _patch_connect)
    on_import.after_import(SESSION, functools.partial(_patch_session, others))


def _patch_connect(module) -> None:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def connect_to_cluster(
            cluster_spec_or_resolver: object, job_name: str = "localhost", *args: Any, **kwargs: Any
        ) -> Any:
            if job_name != EVALUATOR:
                cluster_spec_or_resolver = _without_evaluator(module, cluster_spec_or_resolver)
            return original(cluster_spec_or_resolver, job_name, *args, **kwargs)

        return connect_to_cluster

    on_import.wrap(module, "connect_to_cluster", make, everywhere=True)


def _without_evaluator(remote, spec_or_resolver):
    """The same cluster (a ClusterSpec, or a resolver telling the same things) less the
    evaluator's job; anything else as it came (TensorFlow then says what is wrong with it)."""
    ClusterSpec = remote.server_lib.ClusterSpec
    resolver = None
    if isinstance(spec_or_resolver, ClusterSpec):
        spec = spec_or_resolver
    elif isinstance(spec_or_resolver, remote.cluster_resolver.ClusterResolver):
        resolver, spec = spec_or_resolver, spec_or_resolver.cluster_spec()
    else:
        return spec_or_resolver
    if EVALUATOR not in spec.jobs:
        return spec_or_resolver
    kept = ClusterSpec({job: tasks for job, tasks in spec.as_dict().items() if job != EVALUATOR})
    if resolver is None:
        return kept
    return remote.cluster_resolver.SimpleClusterResolver(
        kept,
        master=resolver.master(),
        task_type=resolver.task_type,
        task_id=resolver.task_id,
        environment=resolver.environment,
        rpc_layer=resolver.rpc_layer,
    )


def _patch_session(others: list, module) -> None:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def __init__(self, target="", graph=None, config=None):
            if (
                isinstance(target, (str, bytes))
                and _remote(target)
                and (config is None or not config.device_filters)
            ):
                config = _filtered(module, config, others)
            original(self, target, graph, config)

        return __init__

    on_import.wrap(getattr(module, "BaseSession", None), "__init__", make)


def _remote(target) -> bool:
    text = target.decode() if isinstance(target, bytes) else target
    return text.startswith("grpc://")


def _filtered(module, config, others: list):
    """A copy of ``config`` (or a new one) whose device filters name every job but the
    evaluator's."""
    proto = module.config_pb2.ConfigProto()
    if config is not None:
        proto.CopyFrom(config)
    proto.device_filters.extend(f"/job:{job}" for job in others)
    return proto
