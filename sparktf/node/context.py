"""The ``ctx`` handed to ``main_fn``: who this node is and what it can do.

A small public facade: plain facts about the node, and methods that act through the node's
:class:`~sparktf.node.runtime.NodeRuntime` (its channel to the driver, events, feed, server).
Runs inside the TensorFlow node process. It never imports pyspark; tensorflow is imported
only by the methods that need it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparktf.common import plain_numbers
from sparktf.common.settings import checked, count
from sparktf.common.topology import NodeRole, chief_role, num_training_nodes
from sparktf.errors import ConfigError, ConfigTypeError

if TYPE_CHECKING:
    from sparktf.common.spec import FeedConfig
    from sparktf.node.feed import DataFeed


@dataclass
class NodeContext:
    """What ``main_fn(args, ctx)`` knows about its node and cluster.

    Attributes
    ----------
    job_name, task_index : str, int
        This node's TensorFlow task (``"worker"``, 1).
    cluster_spec : dict
        Every job mapped to its tasks' ``"host:port"`` addresses.
    tf_config : dict
        The TF_CONFIG also set in ``os.environ["TF_CONFIG"]``.
    num_workers : int
        Nodes that train: chief/master plus workers.
    rank : int
        This node's Spark partition id (0 is the chief, or worker 0 without one).
    host, port : str, int
        This node's address (the port is reserved for its TensorFlow server).
    num_cpus : int
        CPUs of the Spark task; TensorFlow's thread pools are sized to it.
    attempt : int
        0 for the first launch of the cluster, 1 after the first restart (``max_restarts``).
    """

    job_name: str
    task_index: int
    cluster_spec: dict
    tf_config: dict
    rank: int
    host: str
    port: int
    num_cpus: int
    attempt: int = 0
    #: InputMode.SPARK: True while training (cluster.train), False for inference; else None.
    train_mode: bool | None = None
    #: Where to write TensorBoard summaries: ``run(log_dir=...)``, or with ``tensorboard=True``
    #: and no log_dir, a directory on the chief's machine (None otherwise).
    log_dir: str | None = None
    #: This node's private scratch directory (0700), removed when the node ends.
    work_dir: str | None = None
    #: The GPU ids this node's TensorFlow sees (``CUDA_VISIBLE_DEVICES``): those Spark assigned
    #: to its task; none for a parameter server or the evaluator, or without GPU scheduling.
    gpus: tuple = ()
    _runtime: Any = field(default=None, repr=False)  # NodeRuntime

    @property
    def role(self) -> NodeRole:
        return NodeRole(self.job_name, self.task_index)

    @property
    def name(self) -> str:
        """``"job:index"``, the tag on this node's log lines."""
        return self.role.name

    @property
    def num_workers(self) -> int:
        return num_training_nodes(self.cluster_spec)

    @property
    def executor_id(self) -> int:
        """TensorFlowOnSpark's name for :attr:`rank` (also ``worker_num``), so a ``main_fn``
        written for it runs as it is."""
        return self.rank

    @property
    def worker_num(self) -> int:
        """TensorFlowOnSpark's older name for :attr:`rank`."""
        return self.rank

    @property
    def mgr(self) -> NodeContext:
        """What TensorFlowOnSpark's helpers take as its queue manager
        (``TFNode.DataFeed(ctx.mgr)``): on sparktf, this context (:mod:`sparktf.compat.tfnode`)."""
        return self

    @property
    def defaultFS(self) -> str:
        """The driver's Hadoop ``fs.defaultFS`` (``"file://"`` without one), as
        TensorFlowOnSpark's ``ctx.defaultFS``."""
        from sparktf import fs

        return fs.default_fs() or "file://"

    @property
    def working_dir(self) -> str:
        """The driver's working directory, against which :meth:`absolute_path` resolves a
        relative path on a local default file system (TensorFlowOnSpark's ``ctx.working_dir``)."""
        from sparktf import fs

        return fs.working_dir()

    @property
    def is_chief(self) -> bool:
        """True on the chief (or master; worker 0 when the cluster has neither)."""
        return self.role == chief_role(self.cluster_spec)

    def cluster_resolver(self) -> Any:
        """A ``tf.distribute.cluster_resolver.TFConfigClusterResolver`` for this node."""
        import tensorflow as tf

        return tf.distribute.cluster_resolver.TFConfigClusterResolver()

    def server_config(self) -> Any:
        """A ``tf.compat.v1.ConfigProto`` with thread pools sized to this task's CPUs."""
        import tensorflow as tf

        return tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=self.num_cpus,
            inter_op_parallelism_threads=max(2, self.num_cpus),
        )

    def start_server(self) -> Any:
        """Start (once) and return this node's TensorFlow server on its reserved port.

        The same object as ``tf.compat.v1.train.Server``; use its ``target`` for a
        ``MonitoredTrainingSession`` in between-graph training.
        """
        if self._runtime.server is None:
            import tensorflow as tf

            self._runtime.server = tf.distribute.Server(
                tf.train.ClusterSpec(self.cluster_spec),
                job_name=self.job_name,
                task_index=self.task_index,
                protocol="grpc",
                config=self.server_config(),
                start=True,
            )
        return self._runtime.server

    def start_cluster_server(self, num_gpus: int = 1, rdma: bool = False) -> tuple:
        """TensorFlowOnSpark's ``ctx.start_cluster_server``: ``(tf.train.ClusterSpec, server)``
        for this node (the server of :meth:`start_server`). GPUs are the ones Spark assigned
        this node's task (:attr:`gpus`), whatever ``num_gpus`` says; ``rdma=True`` (the
        ``grpc+verbs`` protocol) does not exist in TensorFlow 2 and is refused."""
        if rdma:
            raise ConfigError(
                "start_cluster_server(rdma=True): TensorFlow 2 has no grpc+verbs "
                "(RDMA) protocol; pass rdma=False"
            )
        import tensorflow as tf

        server = self.start_server()
        return tf.train.ClusterSpec(self.cluster_spec), server

    def release_port(self) -> None:
        """TensorFlowOnSpark's ``ctx.release_port()``: nothing to do here. sparktf holds this
        node's port so that only TensorFlow's server can bind it (:mod:`sparktf.common.ports`):
        start the server whenever you like."""

    def serve(self) -> None:
        """Run this node's TensorFlow server until the job's training is over.

        This is what parameter servers do (sparktf calls it for them); workers of a TF2
        ``ParameterServerStrategy`` cluster call it as their whole ``main_fn``. Returns once every
        chief/worker that trains has returned, or the driver stops the job.
        """
        os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
        self.start_server()
        self._runtime.report_state("serving")
        self._runtime.stop.wait()

    def get_data_feed(
        self,
        train_mode: bool = True,
        input_mapping: dict | None = None,
        *,
        qname_in: str = "input",
        qname_out: str = "output",
        start_epoch: int = 0,
    ) -> DataFeed:
        """This node's share of the data given to ``cluster.train`` or ``cluster.inference``.

        Parameters
        ----------
        train_mode : bool
            True under ``cluster.train``, False under ``cluster.inference`` (then send one output
            per row with ``feed.batch_results``).
        input_mapping : dict, optional
            For a DataFrame: column -> key in the batches ``next_batch`` returns; only these
            columns are converted. Default: every column, under its own name.
        qname_in, qname_out : str
            TensorFlowOnSpark's queue names, accepted so that its calls run as written: a
            node has one feed, so they must be ``"input"`` and ``"output"``.
        start_epoch : int
            The epoch (0 first) training resumes at, as main_fn's checkpoint says (after a
            restart, ``max_restarts``): the feed delivers only epochs ``start_epoch`` to
            ``num_epochs - 1`` of ``cluster.train(data, num_epochs)``, and Spark's pass over
            the partition is the first of them. Every training node must resume at the same
            epoch (read it from the same checkpoint); ``num_epochs``: nothing is left, the
            feed ends at once. :meth:`restore_latest` returns it where a checkpoint is saved once an
            epoch.

        Returns
        -------
        sparktf.node.feed.DataFeed
        """
        from sparktf.node.feed import DataFeed, FeedError

        self._check_feed_call(train_mode, qname_in, qname_out)
        runtime = self._runtime
        if runtime.feed is not None:
            return runtime.feed
        if runtime.spec.feed_path is None:
            raise FeedError(f"{self.name} gets no data: only the chief and the workers do")
        if train_mode != self.train_mode:
            called = "cluster.train" if self.train_mode else "cluster.inference"
            raise FeedError(
                f"get_data_feed(train_mode={train_mode}) but the data came from "
                f"{called}(); use train_mode={self.train_mode}"
            )
        spec = runtime.spec
        config, total = self._epochs_left(spec.launch.feed, start_epoch)
        if config is None:  # data from Spark comes with its feed's settings
            raise FeedError(f"{self.name}'s launch has no feed settings for its data")
        if self.work_dir is None:  # a node's scratch directory: where epoch 1 is spooled
            raise FeedError(f"{self.name} has no work directory to keep its feed in")
        runtime.feed = DataFeed(
            spec.feed_path,
            train_mode=self.train_mode,
            input_mapping=input_mapping,
            config=config,
            spool_dir=self.work_dir,
            report=runtime.send,
            bound=runtime.bound,
            peer=(spec.name, spec.host, spec.launch.secret, spec.launch.port_range),
            first_epoch=start_epoch,
        )
        if start_epoch >= total:
            runtime.feed.terminate()  # every epoch was trained before the restart
        return runtime.feed

    def _check_feed_call(self, train_mode: bool, qname_in: str, qname_out: str) -> None:
        """get_data_feed's arguments, and whether this cluster has data to feed at all."""
        from sparktf.errors import ConfigError
        from sparktf.node.feed import FeedError

        if self.train_mode is None:
            raise FeedError(
                "get_data_feed() needs InputMode.SPARK: start the cluster with "
                "sparktf.run(..., input_mode=sparktf.InputMode.SPARK) and give "
                "it data with cluster.train(data) or cluster.inference(data)"
            )
        if (qname_in, qname_out) != ("input", "output"):
            raise ConfigError(
                f"get_data_feed: a node has one feed; qname_in/qname_out must be "
                f"'input'/'output' (TensorFlowOnSpark's defaults), got "
                f"{qname_in!r}/{qname_out!r}"
            )
        if not isinstance(train_mode, bool):
            raise ConfigError(
                f"get_data_feed: train_mode must be True or False (True under "
                f"cluster.train, False under cluster.inference), got "
                f"{train_mode!r}"
            )

    def _epochs_left(
        self, config: FeedConfig | None, start_epoch: int
    ) -> tuple[FeedConfig | None, int]:
        """The feed's settings for a feed that resumes at ``start_epoch`` (it feeds only the
        epochs left), and ``num_epochs`` of ``cluster.train``; a ConfigError for a
        ``start_epoch`` that is no epoch of it."""
        total = config.num_epochs if config is not None else 1
        if isinstance(start_epoch, bool) or not isinstance(start_epoch, int):
            raise ConfigError(f"start_epoch must be an int, got {start_epoch!r}")
        if not 0 <= start_epoch <= total or (start_epoch and not self.train_mode):
            raise ConfigError(
                f"start_epoch must be from 0 to num_epochs={total} (under cluster.train), "
                f"got {start_epoch}"
            )
        if start_epoch and config is not None:
            left = total - start_epoch
            config = dataclasses.replace(config, num_epochs=max(1, left))
            print(
                f"sparktf: {self.name}'s feed resumes at epoch {start_epoch + 1} of {total}: "
                f"{left} epoch{'' if left == 1 else 's'} left to feed",
                file=sys.stderr,
                flush=True,
            )
        return config, total

    def restore_latest(self, checkpoint: Any, directory: str) -> int:
        """Restore ``checkpoint`` (a ``tf.train.Checkpoint``) from the newest checkpoint in
        ``directory`` (local or ``hdfs://``) and return how often it had been saved (0: there
        was none): the epochs done where it is saved once an epoch, for
        ``get_data_feed(start_epoch=...)``. See :func:`sparktf.node.resume.restore_latest`."""
        from sparktf.node import resume

        return resume.restore_latest(checkpoint, directory, self.work_dir)

    def absolute_path(self, path: str) -> str:
        """``path`` as a full URI, as TensorFlowOnSpark's ``ctx.absolute_path``: a URI stays as
        it is; an absolute path goes on the driver's ``fs.defaultFS``; a relative one under the
        user's home there (``hdfs://nn:8020/user/<name>/path``). Where the default file system
        is local, a local absolute ``file://`` path. Read and write such paths with
        :mod:`sparktf.fs` (TensorFlow has no ``hdfs://``)."""
        from sparktf import fs

        return fs.absolute_path(path)

    def report_progress(self, step: int) -> None:
        """Tell the driver how far training is (e.g. the global step); sent with the next
        heartbeat. With ``run(..., progress_timeout=T)``, a node whose step (and fed rows) stop
        changing for ``T`` seconds is declared hung. Cheap: call it every step. ``step`` may
        be an int or a scalar that holds one (``optimizer.iterations``, a numpy integer)."""
        self._runtime.step = plain_numbers.step(step, "ctx.report_progress: step")

    def report(self, step: int | None = None, **metrics: float) -> None:
        """Tell the driver how far training is and how it goes: ``ctx.report(step=120,
        loss=0.31, accuracy=0.9)``. Sent with the next heartbeat (every second); the driver's
        progress bar or log lines show it, and ``cluster.progress()`` returns it. Cheap: call
        it every step. ``step`` also counts as progress for ``progress_timeout``.
        :meth:`keras_callback` calls it for a Keras ``fit``. Values may be plain numbers or
        scalars that hold one, as a custom training loop has them: numpy numbers, eager tensors
        (``ctx.report(step=optimizer.iterations, loss=loss)``), ``tf.Variable`` objects."""
        reported = {
            k: plain_numbers.metric(v, f"ctx.report: metric {k!r}") for k, v in metrics.items()
        }
        if step is not None:
            self._runtime.step = plain_numbers.step(step, "ctx.report: step")
        self._runtime.metrics = {**self._runtime.metrics, **reported}
        if reported:
            self._runtime.reports.append((self._runtime.step, time.time(), reported))

    def keras_callback(self, every_n_steps: int = 1, keras: Any = None) -> Any:
        """A Keras callback that reports the step and the logs (``loss``, metrics) to the
        driver (:meth:`report`) every ``every_n_steps`` batches and at each epoch's end:
        ``model.fit(..., callbacks=[ctx.keras_callback()])``. It works with Keras 3 and with
        tf-keras alike (whatever ``TF_USE_LEGACY_KERAS`` says): it learns which from the
        model. ``keras`` (the module your model is built with: ``tf_keras``, ``keras``,
        ``tf.keras``, or its name) makes it a subclass of that Keras's ``Callback``. Under
        ParameterServerStrategy, where tf-keras allows no batch-level callback, it reports
        once an epoch. See :mod:`sparktf.node.keras_progress`."""
        from sparktf.node import keras_progress

        every_n_steps = checked("every_n_steps", every_n_steps, count(1), ConfigTypeError)

        def report(**values: Any) -> None:
            self.report(**values)  # looked up at each call, as a user may wrap ctx.report

        return keras_progress.keras_callback(report, every_n_steps, keras)

    def training_done(self) -> bool:
        """True once every chief/worker ``main_fn`` has returned (e.g. for an evaluator loop)."""
        return self._runtime.training_done.is_set()

    def wait_for_training_done(self, timeout: float | None = None) -> bool:
        """Block until :meth:`training_done`, or ``timeout`` seconds; returns whether it is."""
        if timeout is not None and plain_numbers.real(timeout) is None:
            raise ConfigTypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
        return self._runtime.training_done.wait(None if timeout is None else float(timeout))
