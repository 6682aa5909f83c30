"""The public API on the driver: ``sparktf.run`` and the :class:`Cluster` it returns.

A thin layer: settings are resolved by :mod:`~sparktf.common.settings` and the calls'
arguments checked by :mod:`~sparktf.driver.arguments`; the job is carried out by a
:class:`~sparktf.driver.runner.Runner` whose rules live in :mod:`~sparktf.driver.job.state`, on
the barrier stages of :mod:`~sparktf.driver.stages`. Every wait (:func:`wait_until`, each
taking the job's runner) stops every node and Spark job before an interruption or error
propagates.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from sparktf.common import plain_numbers, scripts, topology
from sparktf.common.settings import InputMode, Settings, default
from sparktf.common.spec import FeedConfig
from sparktf.common.topology import NodeRole
from sparktf.driver import arguments, launch, preflight, sparkfacts, stages
from sparktf.driver.job.records import NodeState
from sparktf.driver.job.state import Status
from sparktf.driver.runner import Runner
from sparktf.errors import ClusterStateError, ClusterTimeoutError, ConfigError, SparkTFError

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext
    from pyspark.sql import DataFrame, SparkSession

    from sparktf.driver.job.state import JobState

log = logging.getLogger(__name__)

__all__ = ["Cluster", "InputMode", "Status", "run"]


class Cluster:
    """A TensorFlow cluster on Spark; returned by :func:`sparktf.run`.

    Attributes
    ----------
    roles : tuple of NodeRole
        The nodes, in rank order.
    results : dict
        Node name to the value its ``main_fn`` returned (``None`` for parameter servers).
    failures : list of SparkTFError
        What made the cluster restart (``max_restarts``) or a worker restart in place
        (``worker_restarts``; those have ``restarted_in_place`` set), oldest first.
    rows_held_back : int
        InputMode.SPARK: rows equalization held back so every worker took the same steps.
    rows_moved : int
        InputMode.SPARK: rows moved between training nodes to equalize shares fed as they are.
    """

    def __init__(
        self,
        sc,
        roles: tuple[NodeRole, ...],
        payload: bytes,
        settings: Settings,
        conf: dict[str, str],
    ) -> None:
        self.sc = sc
        self.roles = roles
        self.input_mode = settings.input_mode
        self.settings = settings
        self._plan = launch.job_plan(sc, roles, payload, settings, conf)
        self._call = launch.CallFeed()  # InputMode.TENSORFLOW; train()/inference() set theirs
        self._runner = Runner(sc, roles, self._plan.job_id, settings, conf)
        #: The barrier stages' ResourceProfile (gpus_per_node), None for the default profile.
        self._profile = sparkfacts.gpu_profile(sc, settings.gpus_per_node)

    # ------------------------------------------------------------------------- properties
    @property
    def job_id(self) -> str:
        return self._runner.job_id

    @property
    def status(self) -> Status:
        return self._runner.status

    @property
    def attempt(self) -> int:
        """The launch of the whole cluster this is (0 first; ``ctx.attempt`` on the nodes)."""
        return self._runner.attempt

    @property
    def failures(self) -> list[SparkTFError]:
        return list(self._runner.failures)

    @property
    def results(self) -> dict[str, Any]:
        state = self._runner.state
        return state.results if state is not None else {}

    def metrics(self) -> dict[str, list[dict]]:
        """Each node's history of what ``ctx.report`` / ``ctx.keras_callback()`` sent, oldest
        first: ``{"chief:0": [{"step": 10, "time": 1795700000.5, "values": {"loss": 0.4},
        "attempt": 0}, ...], ...}`` (``time``: the node's wall clock, seconds since the epoch;
        only reports with metrics). The driver also writes them as TensorBoard scalars: under
        ``log_dir/sparktf/<job id>/<node>``, or beside the node logs without a local
        ``log_dir`` (a Hadoop one gets a copy at the end)."""
        return self._runner.history.metrics()

    @property
    def log_files(self) -> dict[str, str]:
        """Node name to the file on the driver that holds its whole output, this attempt's
        (``spark.sparktf.nodeLogDir``; earlier attempts' are beside it, in ``attempt-N``)."""
        logs = self._runner.history.logs
        return {r.name: logs.path(self.attempt, r.name) for r in self.roles}

    def progress(self) -> dict[str, dict]:
        """How far each node is, as plain data: ``{"chief:0": {"state": "running",
        "epoch": 2, "step": 120, "rows": 6000, "epoch_rows": 2000, "rows_per_s": 3100.5,
        "metrics": {"loss": 0.31, "accuracy": 0.9}, "restarts": 0, "seconds": 12.5}, ...}``
        (restarts: of its TF process in place, ``worker_restarts``; epoch counts from 1; rows are those the feed handed to ``main_fn``; steps and metrics are what
        ``ctx.report`` / ``ctx.keras_callback()`` sent; None where nothing was reported).
        The same data the driver's progress bar or lines show."""
        return self._runner.progress()

    @property
    def rows_held_back(self) -> int:
        state = self._runner.state
        return state.rows_held_back if state is not None else 0

    @property
    def rows_moved(self) -> int:
        state = self._runner.state
        return state.rows_moved if state is not None else 0

    @property
    def cluster_spec(self) -> dict[str, list[str]]:
        """Job name to node addresses: each TF server's ``host:port``, as in ``TF_CONFIG``
        (the host alone before its task reserved the port; ``"?"`` before it reported)."""
        state = self._runner.state
        spec: dict[str, list[str]] = {}
        for role in self.roles:
            record = state.nodes[role.name] if state is not None else None
            where = (record.address or record.host) if record is not None else None
            spec.setdefault(role.job, []).append(where or "?")
        return spec

    # ----------------------------------------------------------------------------- waits
    def _start(self, stage_factory, deadline: float | None = None, expired: str = "") -> None:
        with stopping_on_error(self._runner):
            self._runner.start(self._plan, self._call, stage_factory)
        wait_until(self._runner, lambda s: s.registered, deadline, expired)

    # ---------------------------------------------------------------------------- public
    def tensorboard_url(self, timeout: float = 0) -> str | None:
        """The chief's TensorBoard URL (``run(..., tensorboard=True)``), once it answers.

        Waits up to ``timeout`` seconds; ``None`` if it is not (yet) up, was not asked for, or
        failed to start (the reason is printed on the driver). TensorBoard runs while the
        chief's node does, and is stopped with it.
        """
        if plain_numbers.real(timeout) is None:
            raise ConfigError(f"timeout must be a number of seconds, got {timeout!r}")
        if not self.settings.tensorboard:
            return None
        chief = topology.chief_role(self.roles).name
        deadline = time.monotonic() + max(0.0, float(timeout))

        def known(s: JobState) -> bool:
            return s.tensorboard is not None or s.nodes[chief].state is NodeState.EXITED

        self._runner.wait(known, deadline)
        state = self._runner.state
        if (
            state is None
            or state.tensorboard is None
            or state.nodes[chief].state is NodeState.EXITED
        ):
            return None
        return state.tensorboard.get("url")

    def shutdown(self, grace_secs: float = 0, timeout: float | None = None) -> Any:
        """Wait for the job to end, stop what is left, and return the chief's return value.

        Safe to call again: it returns the same value, or raises the same error.

        Parameters
        ----------
        grace_secs : float
            Seconds the parameter servers (and finished nodes, whose TF servers peers may still
            use) stay up after the last chief/worker ``main_fn`` returns.
        timeout : float or None
            Give up after this many seconds: stop every node and raise
            :class:`~sparktf.errors.ClusterTimeoutError`. ``None`` waits as long as it takes.

        Raises
        ------
        NodeError
            A node's ``main_fn`` raised or its process died; names the node and its output.
        """
        grace, deadline = arguments.check_shutdown(grace_secs, timeout)
        if self.status is Status.CREATED:  # InputMode.SPARK, never given data
            self._runner.teardown()
            return None
        with stopping_on_error(self._runner):
            self._runner.set_grace(grace)
        expired = f"shutdown(timeout={timeout})"
        wait_until(self._runner, lambda s: s.status is Status.FINISHED, deadline, expired)
        self._runner.teardown()
        if self._runner.failure is not None:
            raise self._runner.failure
        return self.results.get(topology.chief_role(self.roles).name)

    def train(
        self,
        data: RDD | DataFrame,
        num_epochs: int = default("num_epochs"),
        feed_timeout: float = default("feed_timeout"),
        *,
        shuffle: bool = default("shuffle"),
        equalize: bool | None = default("equalize"),
        rebalance: bool | None = default("rebalance"),
        timeout: float | None = None,
    ) -> None:
        """Start the nodes over ``data`` and feed it to the chief and workers; InputMode.SPARK.

        Returns when every chief/worker ``main_fn`` has returned (the parameter servers are
        being stopped); :meth:`shutdown` then returns the chief's value.

        Parameters
        ----------
        data : pyspark.RDD or pyspark.sql.DataFrame
            RDD elements reach ``feed.next_batch`` as they are; a DataFrame's columns as numpy
            arrays (Arrow from end to end).
        num_epochs : int
            Passes over the data. Spark computes the data once; each node keeps its share in a
            spool file in its private directory and streams later epochs from there.
        feed_timeout : float
            Seconds without progress (no data taken, none arriving) before the feed fails.
        shuffle : bool
            Shuffle each node's share (batch order and rows) between epochs.
        equalize : bool, optional
            Give every training node the same number of rows per epoch, so that synchronous
            strategies (MultiWorkerMirroredStrategy) take equal steps and never hang. Default:
            on when there is no parameter server and more than one training node. Every row
            reaches one node at most once per epoch; the few rows it holds back to keep the
            shares equal are counted in :attr:`rows_held_back` (and logged as a warning).
        rebalance : bool, optional
            Deal rows out evenly over a Spark shuffle. Default: only when the data's
            partitions do not match the training nodes one to one. Data that has one
            partition per node is fed as it is (no Spark job counts or shuffles it first).
            When equalizing and the shares turn out unequal (fed as they are, or dealt out:
            each input partition may give one node a row more), the surplus rows alone move
            from the nodes with more to those with fewer after the first pass, node to node
            (:attr:`rows_moved`), and an epoch holds back only ``rows % training nodes``
            rows. ``False``: feed as it is and hold back the surplus instead.
        timeout : float or None
            Give up after this many seconds (from the call): stop every node and raise
            :class:`~sparktf.errors.ClusterTimeoutError`, as :meth:`shutdown` does. ``None``
            waits as long as training takes.
        """
        arguments.check_data_mode("train", self.input_mode, self.status, self._runner.aborted)
        equalize, deadline = arguments.check_train(
            self.sc,
            self.roles,
            data,
            num_epochs,
            feed_timeout,
            shuffle,
            equalize,
            rebalance,
            timeout,
        )
        stage = stages.Training(self.sc, self.roles, data, rebalance, equalize, self._profile)
        self._call = launch.CallFeed(
            train_mode=True,
            feed=FeedConfig(
                num_epochs=int(num_epochs),
                feed_timeout=float(feed_timeout),
                shuffle=shuffle,
                equalize=equalize,
                exchange=stage.exchange,
                spool_max_bytes=self.settings.spool_max_bytes,
            ),
        )
        expired = f"train(timeout={timeout})"
        self._start(stage, deadline, expired)
        wait_until(
            self._runner,
            lambda s: s.training_done_at is not None or s.status is Status.FINISHED,
            deadline,
            expired,
        )
        if self.rows_held_back:
            why = (
                "by rebalance=False, which feeds each partition to its node as it is and "
                "holds back what unequal partitions cannot share evenly (leave rebalance "
                "unset to move the surplus between nodes)"
                if rebalance is False
                else "so that every worker took the same number of steps"
            )
            log.warning(
                "sparktf: %d rows were held back %s (cluster.rows_held_back)",
                self.rows_held_back,
                why,
            )

    def inference(
        self,
        data: RDD | DataFrame,
        output_schema: Any = "prediction double",
        feed_timeout: float = default("feed_timeout"),
        *,
        timeout: float | None = None,
    ) -> RDD | DataFrame:
        """Run ``main_fn`` over ``data`` with ``train_mode=False``; one output per input row.

        Each node reads its rows with ``ctx.get_data_feed(train_mode=False)`` and returns one
        output per row with ``feed.batch_results``; a node that answers fewer (or more) rows
        than it was given fails the job. Returns an RDD (RDD input) or a DataFrame with
        ``output_schema`` (DataFrame input; a DDL string or a ``StructType``) in input order,
        persisted (memory and disk) so that it outlives the nodes. It is an ordinary RDD or
        DataFrame: ``take``, ``show``, ``limit``, joins, ``union`` work on it, an RDD's
        output has the input's partitions row for row (``rdd.zip(output)``), and a lost block
        is read again from a shuffle's files, never by starting the nodes again. Every node of
        an inference cluster gets data: start it without parameter servers or an evaluator.
        ``feed_timeout``: seconds a node's feed may wait without progress before it fails.
        ``timeout`` (seconds, from the call) stops every node and raises
        :class:`~sparktf.errors.ClusterTimeoutError` once it expires.
        """
        arguments.check_data_mode("inference", self.input_mode, self.status, self._runner.aborted)
        schema, deadline = arguments.check_inference(
            self.sc, self.roles, data, output_schema, feed_timeout, timeout
        )
        stage = stages.Inference(self.sc, self.roles, data, schema, self._profile)
        self._call = launch.CallFeed(
            train_mode=False,
            feed=FeedConfig(num_epochs=1, feed_timeout=float(feed_timeout)),
            output_schema=stage.output_schema,
        )
        expired = f"inference(timeout={timeout})"
        self._start(stage, deadline, expired)
        wait_until(self._runner, lambda s: s.status is Status.FINISHED, deadline, expired)
        self._runner.teardown()
        assert stage.output is not None  # the stage ran: it set its output
        return stage.output

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.shutdown()
            return
        self._runner.abort(
            ClusterStateError(f"the with-block raised {exc_type.__name__}; every node was stopped")
        )
        self._runner.teardown()

    def __repr__(self) -> str:
        return f"<sparktf.Cluster {self.job_id} {self.status.value} nodes={len(self.roles)}>"


# ------------------------------------------------------------------------- the waits
@contextlib.contextmanager
def stopping_on_error(runner: Runner) -> Iterator[None]:
    """Any exception or interruption in the block stops every node and Spark job first."""
    try:
        yield
    except BaseException as exc:
        what = type(exc).__name__
        runner.abort(
            ClusterStateError(
                f"interrupted ({what}); every node was stopped"
                if isinstance(exc, KeyboardInterrupt)
                else f"the driver raised {what}: {exc}; every node was stopped"
            )
        )
        runner.teardown()
        raise


def wait(runner: Runner, predicate: Callable, deadline: float | None) -> bool:
    """Wait for ``predicate(state)`` (False: ``deadline`` passed first); raise the job's
    failure (after teardown)."""
    ok = runner.wait(predicate, deadline)
    if runner.failure is not None:
        runner.teardown()
        raise runner.failure
    return ok


def wait_until(runner: Runner, predicate: Callable, deadline: float | None, expired: str) -> None:
    """Wait for ``predicate(state)``; past ``deadline``, stop every node and raise a
    :class:`~sparktf.errors.ClusterTimeoutError` saying ``expired``."""
    with stopping_on_error(runner):
        if wait(runner, predicate, deadline):
            return
        runner.abort(ClusterTimeoutError(f"{expired} expired{_still_running(runner)}"))
    runner.teardown()
    if runner.failure is not None:  # else the job finished just as the deadline passed
        raise runner.failure


def _still_running(runner: Runner) -> str:
    """Which nodes a deadline found still at work: those whose main_fn had not returned (or
    not started), apart from those done or serving whose process had not exited (a
    finished worker waits for the others; a parameter server serves until the end)."""
    nodes = list(runner.state.nodes.values()) if runner.state is not None else []
    live = [n for n in nodes if n.outcome.exit is None]
    waiting = [n.name for n in live if n.state in (NodeState.PENDING, NodeState.RUNNING)]
    ending = [n.name for n in live if n.state in (NodeState.DONE, NodeState.SERVING)]
    parts = [f"the main_fn of {waiting} still running"] if waiting else []
    parts += [f"{ending} done or serving, not exited"] if ending else []
    return (
        f" with {'; '.join(parts)}; every node was stopped" if parts else "; every node was stopped"
    )


def run(
    sc: SparkContext | SparkSession,
    main_fn: Callable | str | os.PathLike,
    args: Any = None,
    num_executors: int | None = None,
    num_ps: int = default("num_ps"),
    *,
    master_node: str | None = default("master_node"),
    eval_node: bool = default("eval_node"),
    input_mode: InputMode = default("input_mode"),
    framework: str = default("framework"),
    reservation_timeout: float | None = None,
    log_to_driver: bool | None = None,
    env: dict[str, str] | None = None,
    progress: bool | None = None,
    gpus_per_node: int | None = None,
    tensorboard: bool = default("tensorboard"),
    log_dir: str | None = None,
    max_restarts: int | None = None,
    worker_restarts: int | None = None,
    heartbeat_timeout: float | None = None,
    progress_timeout: float | None = None,
    py_files: Sequence[str | os.PathLike] | None = None,
) -> Cluster:
    """Start a TensorFlow cluster on Spark executors and run ``main_fn`` on every node.

    Every setting (its default, its ``spark.sparktf.*`` key, what is valid) is in one table,
    :data:`sparktf.common.settings.TABLE`, listed in docs/reference/settings.md.

    Parameters
    ----------
    sc : pyspark.SparkContext
    main_fn : callable or str
        ``main_fn(args, ctx)`` or ``main_fn(ctx)``; runs in a fresh process on each chief, worker
        and evaluator node, with ``TF_CONFIG`` set. Parameter servers run sparktf's server.
        Or the path of a Python script on the driver, run as it is (as ``__main__``) on those
        nodes: its ``sys.exit(n)`` with ``n`` not 0 fails the node.
    args : any picklable object
        Passed to ``main_fn`` unchanged; for a script, its command-line arguments (a list of
        strings: ``sys.argv[1:]``).
    num_executors : int, optional
        Nodes in the cluster, one per Spark task slot (default: every slot the cluster has).
    num_ps : int
        Parameter servers among them.
    master_node : {"chief", "master", None}
        The job name of the node that coordinates; ``None`` for a worker-only cluster.
    eval_node : bool
        Make one node an evaluator.
    input_mode : InputMode
        ``InputMode.TENSORFLOW``: the nodes read their own data, and start now.
        ``InputMode.SPARK``: the nodes start over the data given to :meth:`Cluster.train`.
    framework : {"tensorflow", "horovod"}
        ``"horovod"``: every node trains (no parameter servers, no evaluator), and each also
        gets its Horovod rank (its ``ctx.rank``), size, local rank and the address of the Gloo
        rendezvous the chief serves, so that ``hvd.init()`` in ``main_fn`` needs no
        ``horovodrun``. Needs Horovod with Gloo on the executors (docs/guides/horovod.md).
    reservation_timeout, log_to_driver, heartbeat_timeout, progress_timeout, max_restarts
        See the settings table; unset, ``spark.sparktf.*`` then the default applies.
    worker_restarts : int, optional
        How often a worker's failed TF process is started again in place (same TF_CONFIG
        and port) while the rest of the cluster runs on; unset: 3 with parameter servers,
        else 0. Synchronous models (SyncReplicasOptimizer) need 0; see the failures guide.
    progress : bool, optional
        Show the nodes' progress on the driver (default on; see :meth:`Cluster.progress`).
    gpus_per_node : int, optional
        GPUs Spark assigns to each node's task (the executors need
        ``spark.executor.resource.gpu.*``); each chief/worker sees its own as
        ``CUDA_VISIBLE_DEVICES`` and ``ctx.gpus``, a ps or evaluator none. Unset: the GPUs
        ``spark.task.resource.gpu.amount`` gives each task, if any.
    env : dict, optional
        Extra environment variables for the node processes.
    tensorboard : bool
        The chief serves TensorBoard on ``log_dir`` while it runs; the driver prints its URL
        and :meth:`Cluster.tensorboard_url` returns it.
    py_files : list of str, optional
        With a script: ``.py`` and ``.zip`` files shipped beside it, first on its ``sys.path``.
    log_dir : str, optional
        The directory ``main_fn`` writes summaries to (``ctx.log_dir``); with TensorBoard and no
        ``log_dir``, a directory in the chief's private work dir (removed at its end).

    Returns
    -------
    Cluster
        Running (InputMode.SPARK: created, started by ``train``/``inference``); call
        :meth:`Cluster.shutdown` or use it as a context manager.
    """
    if scripts.is_script(main_fn) and os.path.isfile(cast(str, main_fn)):
        main_fn, args = scripts.from_path(main_fn, args, py_files), None
    elif py_files:
        raise ConfigError(
            "py_files ships files with a script's path (run(sc, 'train.py', py_files=[...])); "
            "for a function, ship its modules with spark-submit --py-files or sc.addPyFile"
        )
    context, settings, conf, payload, roles = preflight.check_run(
        sc,
        # a script's path is a Script now; check_run reports anything else with the rest
        cast(Callable, main_fn),
        args,
        num_executors=num_executors,
        num_ps=num_ps,
        master_node=master_node,
        eval_node=eval_node,
        input_mode=input_mode,
        framework=framework,
        reservation_timeout=reservation_timeout,
        log_to_driver=log_to_driver,
        env=env,
        progress=progress,
        gpus_per_node=gpus_per_node,
        tensorboard=tensorboard,
        log_dir=log_dir,
        max_restarts=max_restarts,
        worker_restarts=worker_restarts,
        heartbeat_timeout=heartbeat_timeout,
        progress_timeout=progress_timeout,
    )
    cluster = Cluster(context, roles, payload, settings, conf)
    log.info(
        "sparktf: %s has %d nodes: %s", cluster.job_id, len(roles), ", ".join(r.name for r in roles)
    )
    if settings.input_mode is InputMode.TENSORFLOW:
        cluster._start(stages.nodes_only(context, roles, cluster._profile))
    return cluster
