"""sparktf: distributed TensorFlow on Apache Spark, gang-scheduled with barrier execution.

>>> cluster = sparktf.run(sc, main_fn, args, num_executors=4, num_ps=1)
>>> result = cluster.shutdown()

The driver side (this package's top level) never imports tensorflow. Names are imported on
first use, so the node and supervisor processes (``python -m sparktf.node``) load only their
own side.

Modules:

- ``__main__``: ``python -m sparktf run ...``: the command line (``cli``)
- ``batch_prediction/``: ``sparktf.predict``: a SavedModel applied to a DataFrame, without a cluster
- ``cli``: The command line: ``python -m sparktf run SCRIPT`` (also the ``sparktf`` console script)
- ``common/``: What all three sides share: settings, topology, specs, the control protocol, ports
- ``compat/``: TensorFlowOnSpark compatibility: ``sparktf.TFCluster`` and ``sparktf.TFNode``
- ``daemon``: A Spark Python worker daemon with TensorFlow already imported
- ``driver/``: The driver side: ``sparktf.run`` and the ``Cluster`` it returns
- ``errors``: Exceptions raised by sparktf
- ``fs/``: Hadoop paths (``hdfs://``, ``viewfs://``) from the driver, the executors and the nodes
- ``ml``: Spark ML Pipeline API: ``TFEstimator.fit`` trains on the cluster, ``TFModel`` scores
- ``node/``: The TensorFlow process of a node, the ``ctx`` its ``main_fn`` gets, and its feed
- ``session``: Driver conveniences: ``spark_session``, ``quiet_spark_logs``, ``from_numpy``
- ``task/``: The Spark barrier task: one per node, in a Spark Python worker on an executor
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_EXPORTS = {
    "run": "sparktf.driver.cluster",
    "Cluster": "sparktf.driver.cluster",
    "InputMode": "sparktf.common.settings",
    "Status": "sparktf.driver.job.state",
    "NodeContext": "sparktf.node.context",
    "SparkTFError": "sparktf.errors",
    "ConfigError": "sparktf.errors",
    "ConfigTypeError": "sparktf.errors",
    "NodeError": "sparktf.errors",
    "SparkJobError": "sparktf.errors",
    "ClusterTimeoutError": "sparktf.errors",
    "ReservationTimeoutError": "sparktf.errors",
    "ClusterStateError": "sparktf.errors",
    "predict": "sparktf.batch_prediction",
    "ModelChangedError": "sparktf.batch_prediction",
    "warm_up": "sparktf.driver.warmup",
    "WarmUp": "sparktf.driver.warmup",
    "DataFeed": "sparktf.node.feed",
    "FeedError": "sparktf.errors",
    "quiet_spark_logs": "sparktf.session",
    "from_numpy": "sparktf.session",
    "spark_session": "sparktf.session",
}

__all__ = [*_EXPORTS, "fs", "TFCluster", "TFNode", "__version__"]

if TYPE_CHECKING:
    from sparktf.batch_prediction import ModelChangedError, predict
    from sparktf.common.settings import InputMode
    from sparktf.driver.cluster import Cluster, run
    from sparktf.driver.job.state import Status
    from sparktf.driver.warmup import WarmUp, warm_up
    from sparktf.errors import (
        ClusterStateError,
        ClusterTimeoutError,
        ConfigError,
        ConfigTypeError,
        FeedError,
        NodeError,
        ReservationTimeoutError,
        SparkJobError,
        SparkTFError,
    )
    from sparktf.node.context import NodeContext
    from sparktf.node.feed import DataFeed
    from sparktf.session import from_numpy, quiet_spark_logs, spark_session


def __getattr__(name: str):
    if name == "fs":  # sparktf.fs: Hadoop paths (a module)
        return importlib.import_module("sparktf.fs")
    if name == "TFCluster":  # TensorFlowOnSpark's driver API (a module)
        return importlib.import_module("sparktf.compat.tfcluster")
    if name == "TFNode":  # TensorFlowOnSpark's helpers for main_fn (a module)
        return importlib.import_module("sparktf.compat.tfnode")
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sparktf' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
