"""TensorFlowOnSpark's driver API over sparktf: a TFoS driver program runs with one import
changed, ``from sparktf import TFCluster`` for ``from tensorflowonspark import TFCluster``.

Runs on the driver. A thin translation onto :func:`sparktf.run` and :class:`sparktf.Cluster`
that keeps TFoS's positional order and defaults (``master_node=None``: every training node a
worker, worker 0 the chief; ``reservation_timeout=600``) and its cluster methods
``train(dataRDD, num_epochs, feed_timeout, qname)``, ``inference(dataRDD, feed_timeout, qname)``
and ``shutdown(ssc, grace_secs, timeout)``. The ``main_fn`` runs as written: ``ctx`` has TFoS's
names too (:class:`sparktf.NodeContext`). What sparktf does not do is refused before anything
starts, with a :class:`~sparktf.ConfigError` that says what to change: parameter servers on the
driver (``driver_ps_nodes=True``), queue names other than TFoS's own, and Spark Streaming.
``train(dataRDD)`` without ``num_epochs`` feeds ten passes, as TFoS did (its ``num_epochs=0``),
and logs that it does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparktf.common.settings import InputMode as _Mode
from sparktf.common.settings import default as _default
from sparktf.errors import ConfigError

if TYPE_CHECKING:
    from pyspark import SparkContext

    from sparktf.driver.cluster import Cluster

__all__ = ["InputMode", "TFCluster", "run"]

log = logging.getLogger(__name__)
_QUEUES = ("input", "output", "error")
#: Passes that TFoS's ``train(dataRDD)`` fed for its default ``num_epochs=0``.
TFOS_DEFAULT_EPOCHS = 10


class InputMode:
    """TFoS's input modes (its 0 and 1 are taken too)."""

    TENSORFLOW = _Mode.TENSORFLOW
    SPARK = _Mode.SPARK


def run(
    sc: SparkContext,
    map_fun: Callable,
    tf_args: Any,
    num_executors: int,
    num_ps: int,
    tensorboard: bool = False,
    input_mode: Any = InputMode.TENSORFLOW,
    log_dir: str | None = None,
    driver_ps_nodes: bool = False,
    master_node: str | None = None,
    reservation_timeout: float = 600,
    queues: Any = _QUEUES,
    eval_node: bool = False,
    release_port: bool = True,
) -> TFCluster:
    """``TFCluster.run`` as TensorFlowOnSpark takes it; see :func:`sparktf.run`."""
    import sparktf

    problems = []
    if driver_ps_nodes is not False:
        problems.append(
            "driver_ps_nodes: sparktf runs every node, parameter servers included, "
            "in a Spark barrier task; give Spark num_executors task slots and pass "
            "driver_ps_nodes=False"
        )
    if isinstance(queues, str) or not all(isinstance(q, str) for q in queues or ()):
        problems.append(f"queues must be a list of queue names, got {queues!r}")
    if not isinstance(release_port, bool):
        problems.append(f"release_port must be True or False, got {release_port!r}")
    if problems:
        raise ConfigError.from_problems(problems)
    if not isinstance(input_mode, bool) and input_mode in (0, 1):
        input_mode = (InputMode.TENSORFLOW, InputMode.SPARK)[input_mode]
    return TFCluster(
        sparktf.run(
            sc,
            map_fun,
            tf_args,
            num_executors,
            num_ps,
            master_node=master_node,
            eval_node=eval_node,
            input_mode=input_mode,
            reservation_timeout=reservation_timeout,
            tensorboard=tensorboard,
            log_dir=log_dir,
        )
    )


def _check_qname(qname: Any) -> None:
    if qname != "input":
        raise ConfigError(f"qname: a sparktf node has one input feed, 'input'; got {qname!r}")


class TFCluster:
    """TFoS's cluster object over a :class:`sparktf.Cluster` (``.cluster``); other attributes
    (``results``, ``progress()``, ``status``, ...) are the sparktf cluster's."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def train(
        self,
        dataRDD: Any,
        num_epochs: int = 0,
        feed_timeout: float = _default("feed_timeout"),
        qname: str = "input",
    ) -> None:
        """Feed ``dataRDD`` (an RDD or a DataFrame) for ``num_epochs`` passes; ``0`` (the
        default) is ten passes, as in TFoS (a ``main_fun`` that has trained enough calls
        ``terminate()``)."""
        _check_qname(qname)
        if not isinstance(num_epochs, bool) and num_epochs == 0:
            log.warning(
                "sparktf: num_epochs=0 (TensorFlowOnSpark's default): feeding %d passes "
                "of the data, as TensorFlowOnSpark did; pass num_epochs to choose",
                TFOS_DEFAULT_EPOCHS,
            )
            num_epochs = TFOS_DEFAULT_EPOCHS
        self.cluster.train(dataRDD, num_epochs, feed_timeout)

    def inference(
        self, dataRDD: Any, feed_timeout: float = _default("feed_timeout"), qname: str = "input"
    ) -> Any:
        """One output per row of ``dataRDD``, in its order (an RDD for an RDD)."""
        _check_qname(qname)
        return self.cluster.inference(dataRDD, feed_timeout=feed_timeout)

    def shutdown(
        self, ssc: Any = None, grace_secs: float = 0, timeout: float | None = 259200
    ) -> Any:
        """Wait for the end and stop every node; returns the chief's (worker 0's) value."""
        if ssc is not None:
            raise ConfigError(
                "shutdown(ssc): sparktf does not feed Spark Streaming; call "
                "shutdown() without a StreamingContext"
            )
        return self.cluster.shutdown(grace_secs, timeout)

    def tensorboard_url(self) -> str | None:
        return self.cluster.tensorboard_url()

    def __getattr__(self, name: str) -> Any:
        if name == "cluster":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.cluster, name)
