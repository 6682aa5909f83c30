"""TensorFlowOnSpark's ``TFNode`` helpers for a ``main_fn``: ``from sparktf import TFNode`` in
place of ``from tensorflowonspark import TFNode``, each a call on the node's ``ctx``.

Runs in the node process (never imports pyspark). TFoS hands its helpers ``ctx.mgr``, its
per-executor queue manager; on sparktf ``ctx.mgr`` is the ``ctx`` itself, which has the feed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparktf.errors import ConfigTypeError

if TYPE_CHECKING:
    from sparktf.node.context import NodeContext
    from sparktf.node.feed import DataFeed as Feed

__all__ = [
    "DataFeed",
    "batch_results",
    "hdfs_path",
    "next_batch",
    "release_port",
    "start_cluster_server",
    "terminate",
]


def _ctx(mgr: Any) -> NodeContext:
    from sparktf.node.context import NodeContext

    if not isinstance(mgr, NodeContext):
        raise ConfigTypeError(
            f"TFNode: pass ctx.mgr (or ctx), the main_fn's context; got {type(mgr).__name__}"
        )
    return mgr


def DataFeed(
    mgr: NodeContext,
    train_mode: bool = True,
    qname_in: str = "input",
    qname_out: str = "output",
    input_mapping: dict | None = None,
) -> Feed:
    """The node's feed (:meth:`sparktf.NodeContext.get_data_feed`). Its mode is the one the data
    came with (``cluster.train`` or ``cluster.inference``): TFoS's examples pass
    ``train_mode=False`` while training too, which there only kept batches within a partition."""
    ctx = _ctx(mgr)
    mode = ctx.train_mode if ctx.train_mode is not None else train_mode
    return ctx.get_data_feed(mode, input_mapping, qname_in=qname_in, qname_out=qname_out)


def _feed(mgr: NodeContext, qname: str) -> Feed:
    return DataFeed(mgr, qname_in=qname)  # in the data's own mode


def next_batch(mgr: NodeContext, batch_size: int, qname: str = "input") -> Any:
    """TFoS 1.x: ``DataFeed(mgr).next_batch(batch_size)``."""
    return _feed(mgr, qname).next_batch(batch_size)


def batch_results(mgr: NodeContext, results: Any, qname: str = "output") -> None:
    """TFoS 1.x: the outputs of the batch just taken (inference)."""
    _feed(mgr, "input").batch_results(results)


def terminate(mgr: NodeContext, qname: str = "input") -> None:
    """TFoS 1.x: stop the feed now."""
    _feed(mgr, qname).terminate()


def hdfs_path(ctx: NodeContext, path: str) -> str:
    """:meth:`sparktf.NodeContext.absolute_path`."""
    return _ctx(ctx).absolute_path(path)


def start_cluster_server(ctx: NodeContext, num_gpus: int = 1, rdma: bool = False) -> tuple:
    """:meth:`sparktf.NodeContext.start_cluster_server`: ``(tf.train.ClusterSpec, server)``."""
    return _ctx(ctx).start_cluster_server(num_gpus, rdma)


def release_port(ctx: NodeContext) -> None:
    """Nothing to do (:meth:`sparktf.NodeContext.release_port`)."""
    _ctx(ctx).release_port()
