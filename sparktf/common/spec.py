"""Plain-data descriptions shipped from the driver to the executors and nodes.

Everything here pickles with the standard library alone (a test checks it), so the closure
Spark ships to executors holds no driver objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparktf.common.ports import PortRange
from sparktf.common.settings import default  # pure: the settings table, its defaults
from sparktf.common.topology import NodeRole

if TYPE_CHECKING:
    from sparktf.common.shipped import BroadcastBytes


@dataclass
class FeedConfig:
    """How this node's feed behaves; built by the driver for each train/inference call."""

    num_epochs: int = 1
    feed_timeout: float = default("feed_timeout")
    shuffle: bool = False
    equalize: bool = False
    #: With equalize, rows move between nodes after the first pass if the shares turn out
    #: unequal (off: the surplus is held back, as rebalance=False asks).
    exchange: bool = False
    #: Frames buffered ahead of the consumer (and always >= 2 batches). Under equalization
    #: the consumer trails the others' count by a round trip through the driver: 16 of
    #: Spark's ~350-row RDD frames cover it, so the reader does not stall Spark meanwhile.
    read_ahead: int = 16
    read_ahead_bytes: int = 64 << 20  # ... and at most this many bytes (ditto)
    chunk_rows: int = 256  # RDD elements per pickled frame
    #: cap on a node's spool (spark.sparktf.spoolMaxBytes)
    spool_max_bytes: int | None = default("spool_max_bytes")
    seed: int = 0


@dataclass(frozen=True)
class LaunchSpec:
    """What every barrier task needs to start its node; built once on the driver."""

    job_id: str
    roles: tuple[NodeRole, ...]
    driver_address: tuple[str, int]
    secret: bytes = field(repr=False)
    #: cloudpickle of (main_fn, args, n_params); a BroadcastBytes on the driver when large,
    #: plain bytes again once the task's closure is unpickled (sparktf.common.shipped)
    payload: bytes | BroadcastBytes = field(repr=False)
    attempt: int = 0
    connect_timeout: float = 30.0
    #: How long a barrier task waits at the rendezvous for every node's address before it
    #: gives up (spark.sparktf.reservationTimeout: the driver fails the attempt by then)
    rendezvous_timeout: float = default("reservation_timeout")
    stop_grace: float = default("stop_grace")
    tail_lines: int = default("tail_lines")
    env: tuple[tuple[str, str], ...] = ()
    #: InputMode.SPARK: None in InputMode.TENSORFLOW; True for train(), False for inference()
    train_mode: bool | None = None
    feed: FeedConfig | None = None
    output_schema: bytes | None = None  # inference over a DataFrame: Arrow schema of the output
    heartbeat_interval: float = 1.0  # seconds between a node's heartbeats to the driver
    tensorboard: bool = False  # the chief serves TensorBoard on log_dir
    log_dir: str | None = None  # TensorBoard's directory (default: under the chief's work dir)
    #: The driver's Hadoop defaults for sparktf.fs on the nodes (fs.defaultFS, the NameNode's
    #: HTTP address, the Spark user) as environment defaults; the node's own env wins.
    hadoop_env: tuple[tuple[str, str], ...] = ()
    #: Cores of one executor where the master or conf says (None: unknown). A node whose host
    #: runs fewer nodes than the executor has task slots takes the idle cores as TF threads.
    executor_cores: int | None = None
    #: spark.sparktf.portRange: every port the nodes open comes from it (None: any port).
    port_range: PortRange | None = None
    #: How often a worker's TF process that fails may be started again in place by its
    #: supervisor, the rest of the cluster running on (spark.sparktf.workerRestarts); the
    #: driver decides each time (JobState's restart rule).
    worker_restarts: int = 0
    #: run(framework=...): "horovod" gives every node its Horovod environment before main_fn
    framework: str = "tensorflow"

    @property
    def num_nodes(self) -> int:
        return len(self.roles)


@dataclass(frozen=True)
class NodeSpec:
    """One node's launch description, built in its barrier task once addresses are known."""

    launch: LaunchSpec
    rank: int
    host: str
    port: int
    cluster_spec: dict
    tf_config: dict
    num_cpus: int
    python_path: tuple[str, ...] = ()
    work_dir: str | None = None  # private (0700) directory of this node, removed at its end
    feed_path: str | None = None  # the Unix socket its barrier task feeds data through
    gpus: tuple[str, ...] = ()  # the GPU addresses Spark assigned to its barrier task
    #: 0 for the node's first TF process, k for the k-th started again in place
    incarnation: int = 0

    @property
    def role(self) -> NodeRole:
        return self.launch.roles[self.rank]

    @property
    def name(self) -> str:
        return self.role.name
