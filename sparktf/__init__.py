"""sparktf: distributed TensorFlow on Apache Spark, gang-scheduled with barrier execution.

>>> cluster = sparktf.run(sc, main_fn, args, num_executors=4, num_ps=1)
>>> result = cluster.shutdown()

The driver side (this package's top level) never imports tensorflow.
"""

from sparktf.cluster import Cluster, InputMode, Status, run
from sparktf.context import NodeContext
from sparktf.errors import (ClusterStateError, ClusterTimeoutError, ConfigError, NodeError,
                            SparkJobError, SparkTFError)

__version__ = "0.1.0"

__all__ = [
    "run", "Cluster", "InputMode", "Status", "NodeContext",
    "SparkTFError", "ConfigError", "NodeError", "SparkJobError", "ClusterTimeoutError",
    "ClusterStateError", "__version__",
]
