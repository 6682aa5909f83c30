"""The TensorFlow node process: forked from the node's supervisor (:func:`main_in_fork`), or
``python -m sparktf.node PARENT_PID`` with the :class:`~sparktf.common.spec.NodeSpec` pickled on
stdin (a pipe from its parent, so trusted) when ``SPARKTF_NODE_EXEC=1``. It sets TF_CONFIG
and the thread-pool variables, connects to the driver, then either serves (parameter servers)
or runs ``main_fn``, reports the result or the error, and exits. It never imports pyspark.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
import traceback

from sparktf.common import gpus, keepalive, messages, procs, protocol, scripts, tfimport
from sparktf.common.shipped import BroadcastBytes
from sparktf.common.spec import NodeSpec
from sparktf.errors import ConfigError
from sparktf.node import horovod_env, patches, reach
from sparktf.node.context import NodeContext
from sparktf.node.runtime import NodeRuntime


def node_environment(spec: NodeSpec) -> dict[str, str]:
    """Environment variables a node's process gets before any user code runs."""
    cpus = str(spec.num_cpus)
    env = {
        "TF_CONFIG": json.dumps(spec.tf_config, sort_keys=True),
        "TF_NUM_INTRAOP_THREADS": cpus,
        "TF_NUM_INTEROP_THREADS": str(max(2, spec.num_cpus)),
        "OMP_NUM_THREADS": cpus,
        "SPARKTF_NODE": spec.name,
    }
    if spec.role.job in ("ps", "worker"):
        # ParameterServerStrategy asks workers and ps to fail fast on unreachable peers.
        env["GRPC_FAIL_FAST"] = "use_caller"
    env.update(gpus.node_environment(spec.role.job, spec.gpus, os.environ, dict(spec.launch.env)))
    for key, value in spec.launch.hadoop_env:  # sparktf.fs defaults from the driver
        if not os.environ.get(key):
            env[key] = value
    env.update(dict(spec.launch.env))
    return env


def _call_main(spec: NodeSpec, ctx: NodeContext):
    payload = spec.launch.payload
    try:
        if isinstance(payload, BroadcastBytes):  # unpickled on the executor as its bytes
            raise TypeError("main_fn's payload is still a reference to a broadcast")
        main_fn, args, n_params = pickle.loads(payload)
    except Exception as exc:
        raise ConfigError(
            f"main_fn could not be loaded in the node process ({type(exc).__name__}: {exc}); "
            "define it in the driver script or ship its module with --py-files"
        ) from exc
    try:
        return main_fn(ctx) if n_params == 1 else main_fn(args, ctx)
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:  # sys.exit(), as absl.app.run ends: success
            return None
        raise


def _report_error(chan: protocol.Channel, exc: BaseException, where: str) -> None:
    if isinstance(exc, scripts.ScriptExit):  # the script's own word: no runpy traceback
        text = f"the script called sys.exit({exc.code!r})\n"
    else:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    print(text, file=sys.stderr, end="", flush=True)
    if where == "main_fn" and isinstance(exc, SystemExit):  # sys.exit(3), sys.exit("why")
        chan.send(messages.error("exit", exc, text, code=repr(exc.code)))
        return
    note = _known_cause(exc)
    if note:
        print(f"sparktf: {note}", file=sys.stderr, flush=True)
    chan.send(messages.error(where, exc, text, note=note))


#: Keras 3's own package (tf-keras's is tf_keras/src).
_KERAS3_SRC = os.sep + os.path.join("keras", "src") + os.sep


#: How Keras 3's model.fit fails under a TF2 multi-worker strategy in TensorFlow 2.21, by the
#: strategy: words of TensorFlow's error.
_KERAS3_FAILS = (
    ("PerReplica", "MultiWorkerMirroredStrategy"),
    ("ClusterCoordinator.create_per_worker_dataset", "ParameterServerStrategy"),
)


def _known_cause(exc: BaseException) -> str | None:
    """What a failure TensorFlow reports in its own terms means, and what to change."""
    text = str(exc)
    strategy = next((name for words, name in _KERAS3_FAILS if words in text), None)
    if strategy and any(
        _KERAS3_SRC in f.filename and "tf_keras" not in f.filename
        for f in traceback.extract_tb(exc.__traceback__)
    ):
        return (
            f"Keras 3 cannot train under {strategy} in TensorFlow 2.21 (the error above "
            "is how its model.fit fails): build the model with tf-keras, import tf_keras "
            "as keras (or tf.keras with run(env={'TF_USE_LEGACY_KERAS': '1'}))"
        )
    if "Disallowed task type" in text and "'master'" in text:
        return (
            "master_node='master' names the chief's job 'master', as TF1 programs "
            "(Estimator, between-graph sessions) expect; TF2 strategies take 'chief': run "
            "with master_node='chief' (the default)"
        )
    return None


def _log_dir(spec: NodeSpec) -> str | None:
    if spec.launch.log_dir:
        return spec.launch.log_dir
    if spec.launch.tensorboard and spec.work_dir:
        return os.path.join(spec.work_dir, "tensorboard")
    return None


#: Seconds between copies of a Hadoop log_dir's local mirror to HDFS while main_fn runs.
LOG_SYNC_SECS = 5.0


def _mirror_log_dir(ctx: NodeContext):
    """A Hadoop ``log_dir``: TensorFlow writes summaries to a local mirror (``ctx.log_dir``)
    that is copied there every LOG_SYNC_SECS and when main_fn returns (None otherwise)."""
    if not ctx.log_dir:
        return None  # without importing sparktf.fs: ~10 ms of CPU per node, every job
    from sparktf import fs

    if not fs.is_hadoop(ctx.log_dir):
        return None
    # Made now, before main_fn: a NameNode that is down or a directory that cannot be written
    # fails the node within seconds, not after all of training at the first copy.
    fs.makedirs(ctx.log_dir)
    mirror = fs.SyncedDir(ctx.log_dir, interval=LOG_SYNC_SECS, download_first=False)
    ctx.log_dir = mirror.__enter__()
    return mirror


def _start_tensorboard(
    spec: NodeSpec, ctx: NodeContext, chan: protocol.Channel
) -> threading.Thread | None:
    """TensorBoard on ``ctx.log_dir``, a child of this process; its URL goes to the driver
    from the returned thread (None: it could not start, and the driver was told)."""
    from sparktf.node import tensorboard

    output = os.path.join(spec.work_dir or ".", "tensorboard.out")
    log_dir = ctx.log_dir
    try:
        if log_dir is None:  # tensorboard=True gives the chief one: its own, at least
            raise OSError("the chief has no log_dir to show")
        proc, reservation = tensorboard.start(log_dir, spec.host, output, spec.launch.port_range)
    except OSError as exc:
        chan.send(
            messages.make(
                "tensorboard",
                url=None,
                log_dir=log_dir,
                error=f"TensorBoard could not start: {exc}",
            )
        )
        return None
    announcer = threading.Thread(
        target=tensorboard.announce,
        name="sparktf-tensorboard",
        daemon=True,
        args=(proc, reservation, spec.host, log_dir, output, chan.send),
    )
    announcer.start()
    return announcer


def run(spec: NodeSpec) -> int:
    """A node's life, step by step: its environment, its channel to the driver and its
    ``ctx``; a Hadoop ``log_dir`` mirrored and TensorBoard started (chief); ``main_fn`` run (a
    ps serves); the feed closed and the log copied; the result sent; then up until the driver
    says the job is over. 0 then; 1 when a step failed (the driver is told which)."""
    os.environ.update(node_environment(spec))
    chan = _connect(spec)
    runtime = NodeRuntime(spec, chan)
    ctx = _context(spec, runtime)
    runtime.start()
    if not _peers_answer(spec, chan, runtime):
        return 1
    try:
        log_mirror = _mirror_log_dir(ctx)
    except BaseException as exc:
        _report_error(chan, exc, "log_dir")
        return 1
    announcer = None
    if spec.launch.tensorboard and ctx.is_chief:
        announcer = _start_tensorboard(spec, ctx, chan)
    where = "main_fn"
    try:
        if spec.role.job == "ps":
            _serve(ctx, runtime, log_mirror)
            value = None
        else:
            value = _train(spec, ctx, runtime)
        _warn_feed_unread(spec, ctx, runtime)
        where = "feed"
        _close_feed(runtime, chan)
        where = "log_dir"
        if log_mirror is not None:
            log_mirror.__exit__(None, None, None)
    except BaseException as exc:
        _report_error(chan, exc, where)
        return 1
    _wait_for_tensorboard(announcer)
    done = _result_message(chan, runtime, value)
    if done is None:
        return 1
    chan.send(done)
    # Stay up (with any TF server main_fn started in this process) until the driver says the
    # job is over: a peer that starts late may still need this node's server, as in classic
    # between-graph training without device filters, where every session reaches every task.
    runtime.stop.wait()
    return 0


def _peers_answer(spec: NodeSpec, chan: protocol.Channel, runtime: NodeRuntime) -> bool:
    """Whether every other node's TF port answers (False: this node failed, the driver told,
    naming the silent peer and the setting), before main_fn: a firewall that drops a peer's
    packets fails the job within seconds instead of TensorFlow retrying for minutes
    (:mod:`sparktf.node.reach`). An evaluator is in no TF_CONFIG cluster: nothing to try."""
    if spec.name not in reach.peers(spec.cluster_spec, ""):
        return True
    exc = reach.check(spec.name, spec.cluster_spec, spec.launch.port_range, runtime.stop)
    if exc is None:
        return True
    _report_error(chan, exc, "network")
    return False


def _connect(spec: NodeSpec) -> protocol.Channel:
    """The node's channel to the driver, its hello sent."""
    chan = protocol.connect(
        spec.launch.driver_address, spec.launch.secret, spec.launch.connect_timeout
    )
    keepalive.watch_peer(chan.sock)  # a driver's host that falls silent: exit within 30 s
    chan.send(
        messages.hello(
            messages.NODE,
            spec.name,
            spec.host,
            pid=os.getpid(),
            port=spec.port,
            incarnation=spec.incarnation,
        )
    )
    return chan


def _context(spec: NodeSpec, runtime: NodeRuntime) -> NodeContext:
    """The ``ctx`` handed to ``main_fn``."""
    return NodeContext(
        job_name=spec.role.job,
        task_index=spec.role.index,
        cluster_spec=spec.cluster_spec,
        tf_config=spec.tf_config,
        rank=spec.rank,
        host=spec.host,
        port=spec.port,
        num_cpus=spec.num_cpus,
        attempt=spec.launch.attempt,
        train_mode=spec.launch.train_mode,
        gpus=gpus.visible(spec.role.job, spec.gpus, os.environ, dict(spec.launch.env)),
        log_dir=_log_dir(spec),
        work_dir=spec.work_dir,
        _runtime=runtime,
    )


def _serve(ctx: NodeContext, runtime: NodeRuntime, log_mirror) -> None:
    """A parameter server: sparktf's own server, nothing to finish but a log copy."""
    if log_mirror is None:
        runtime.leave_on_stop()  # 'stop' may well come before TF's import ends
    if not runtime.stop.is_set():
        tfimport.tensorflow_without_keras()  # no user code, so no Keras (half of it)
        ctx.serve()


def _train(spec: NodeSpec, ctx: NodeContext, runtime: NodeRuntime):
    """A chief, worker or evaluator: TensorFlow's patches installed (:mod:`sparktf.node.patches`),
    then ``main_fn``; its return value."""
    patches.install(spec, runtime)
    if spec.launch.framework == "horovod" and ctx.role.trains:
        horovod_env.prepare(ctx, spec.launch.rendezvous_timeout)
    return _call_main(spec, ctx)


def _warn_feed_unread(spec: NodeSpec, ctx: NodeContext, runtime: NodeRuntime) -> None:
    """A training node fed by ``train()`` whose ``main_fn`` never opened its feed: say so."""
    if runtime.feed is None and spec.feed_path is not None and ctx.train_mode:
        print(
            "sparktf: main_fn returned without opening its data feed: this node's share "
            "of the data given to train() was not read and not trained on: cluster.train() "
            "splits the data over the chief and every worker, so read it on each of them "
            "with ctx.get_data_feed() (until feed.should_stop())",
            file=sys.stderr,
            flush=True,
        )


def _close_feed(runtime: NodeRuntime, chan: protocol.Channel) -> None:
    """The data feed closed, and the driver told what it held back and sent."""
    if runtime.feed is None:
        return
    runtime.feed.close()
    chan.send(
        messages.make(
            "feed_done",
            held_back=runtime.feed.rows_held_back,
            results=runtime.feed.results_sent,
        )
    )


def _wait_for_tensorboard(announcer: threading.Thread | None) -> None:
    """A main_fn shorter than TensorBoard's start: its URL (or why it did not start) still
    reaches the driver before the result, instead of never."""
    if announcer is not None:
        from sparktf.node import tensorboard

        announcer.join(tensorboard.START_TIMEOUT + 5)


def _result_message(chan: protocol.Channel, runtime: NodeRuntime, value) -> dict | None:
    """The ``done`` message for ``main_fn``'s return value, after a last heartbeat; None if
    the value cannot be sent (the driver was told why)."""
    try:
        runtime.beat()  # the last step, metrics and rows, before the driver hears 'done'
        limit = os.environ.get("SPARKTF_MAX_RESULT_MB")
        return messages.done(value, float(limit) if limit else None)
    except ValueError as exc:
        _report_error(chan, exc, "result")
    except Exception as exc:
        err = TypeError(
            f"main_fn's return value cannot be pickled: {type(exc).__name__}: "
            f"{exc}; return plain data (numbers, strings, lists, dicts, arrays)"
        )
        _report_error(chan, err, "result")
    return None


def main() -> None:
    """``python -m sparktf.node PARENT_PID``, the spec pickled on stdin."""
    procs.die_with_parent(signal.SIGKILL, int(sys.argv[1]))
    spec: NodeSpec = pickle.load(sys.stdin.buffer)
    sys.stdin.close()
    _main(spec)


def main_in_fork(spec: NodeSpec, parent: int) -> None:
    """The TF process forked from its supervisor (the usual way): same as :func:`main`."""
    procs.die_with_parent(signal.SIGKILL, parent)
    _main(spec)


def _main(spec: NodeSpec) -> None:
    try:
        code = run(spec)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    # TF servers and collective threads cannot be shut down in-process; leave at once.
    os._exit(code)


if __name__ == "__main__":
    main()
