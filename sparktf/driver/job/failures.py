"""Which failure ends an attempt, as a typed error: when a node counts as failed, the
:class:`~sparktf.errors.NodeError` that names it, and what Spark said of the job holding the
nodes (:class:`JobFailure`), read once.

Pure: no sockets, no threads, no Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparktf.common import messages
from sparktf.common.procs import describe_exit
from sparktf.driver.job.limits import Limits
from sparktf.driver.job.records import NodeRecord
from sparktf.errors import (
    FeedError,
    NodeError,
    ReservationTimeoutError,
    SparkJobError,
    SparkTFError,
)

#: Exceptions that only say the other end of a node's connection went away.
SYMPTOMS = ("BrokenPipeError", "ConnectionResetError", "ConnectionAbortedError")


#: How sparktf words a Spark Connect client's interrupted operation (interruptAll,
#: interruptTag, interruptOperation: a notebook's cancel); :class:`JobFailure` reads it as a
#: cancel.
CONNECT_CANCELLED = (
    "Spark Connect operation cancelled: the client interrupted it (interruptAll, "
    "interruptTag or interruptOperation: a notebook's cancel)"
)


@dataclass(frozen=True)
class JobFailure:
    """What Spark said of the failed job holding the nodes, read once when it ended.

    Spark reaches the driver as text only (py4j): this is the one place it is read."""

    text: str
    #: Someone else than sparktf cancelled it (cancelJobGroup, the Spark UI's kill).
    cancelled: bool = False
    #: Why Spark says an executor under a task of the job was lost, if it was.
    executor_lost: str | None = None

    @classmethod
    def read(cls, text: str) -> JobFailure:
        cancelled = bool(re.match(r"Job \d+ cancelled", text)) or text == CONNECT_CANCELLED
        return cls(text, cancelled, _executor_lost(text))


def _executor_lost(text: str) -> str | None:
    """What Spark says of an executor lost under a task of the job (``ExecutorLostFailure
    (...) Reason: ...``: on YARN, say, "Container killed by YARN for exceeding physical memory
    limits ... Consider boosting spark.executor.memoryOverhead")."""
    found = re.search(r"ExecutorLostFailure \(([^)]*)\)\s*(?:Reason:\s*(.*))?", text)
    if not found:
        return None
    return (found.group(2) or found.group(1)).strip().rstrip(".") or None


def is_symptom(error: dict) -> bool:
    """Whether an error report only says that the node's other side went away (its barrier
    task, or its TF process): the other side's own report, if it sends one, is the cause."""
    return error.get("exc_type") in SYMPTOMS or error.get("reason") == FeedError.BROKEN


def node_failed(
    n: NodeRecord, now: float, limits: Limits, job_running: bool, may_restart: bool = False
) -> bool:
    """Whether ``n`` has failed by now (``job_running``: the Spark job holding it runs;
    ``may_restart``: its failed process would be restarted in place if its supervisor asked)."""
    live, out = n.liveness, n.outcome
    settle = limits.error_settle
    if n.inplace.restart_wanted is not None and not (live.lost or live.hung):
        return False  # restarted in place as soon as its old process's channel ends
    if live.lost and job_running and out.failed_at is not None and now - out.failed_at < settle:
        return False  # its executor may be lost: Spark's job error says why, at once
    if live.lost or live.hung:
        return True
    if out.error is not None and is_symptom(out.error) and _since(out.error_at, now) < settle:
        return False  # a broken connection: its cause may still be on its way
    if out.exit is not None and out.exit["code"] != 0:
        # An exit with an error code (not a signal) usually follows the node's own error
        # report, which comes on the node's channel, not the supervisor's: wait for that
        # channel's end (or the settle time) so the report, not the bare code, is the reason.
        # Also before the channel has been read at all: a main_fn that fails at once
        # exits before the driver has read the connection that carries its hello and error.
        return (
            out.error is not None
            or out.exit["code"] < 0
            or live.closed
            or _since(out.exit_at, now) >= settle
        )
    if out.error is not None:
        if may_restart and out.exit is None and _since(out.error_at, now) < limits.kill_wait:
            # Its supervisor asks for the restart once the process has exited, which a large
            # process takes longer than the settle time to do: wait for the request (or the
            # exit report), as long as a killed worker's supervisor is given.
            return False
        return out.exit is not None or _since(out.error_at, now) >= settle
    if out.exit is not None and not out.has_result:
        # Exited cleanly: its last messages may still be in flight on its own channel.
        if live.closed or _since(out.exit_at, now) >= settle:
            n.mark_failed(now)
            return True
    return False


def _since(at: float | None, now: float) -> float:
    return 0.0 if at is None else now - at


def job_error(failure: JobFailure) -> SparkJobError:
    """The Spark job failed (or was cancelled) before any node reported why."""
    if failure.cancelled:  # by someone else than sparktf
        return SparkJobError(
            "the Spark job holding the TensorFlow nodes was cancelled (cancelJobGroup, "
            "cancelJobsWithTag, cancelAllJobs or the Spark UI's kill); every node was "
            "stopped:\n  " + failure.text,
            cancelled=True,
        )
    return SparkJobError("the Spark job holding the TensorFlow nodes failed:\n  " + failure.text)


def exits_unreported(missing: tuple[str, ...]) -> SparkJobError:
    return SparkJobError(
        f"the Spark job ended but nodes {list(missing)} never "
        "reported their exit; see the executor logs"
    )


def reservation_timeout(
    pending: tuple[str, ...], limit: float, lost: dict[str, str] | None = None
) -> ReservationTimeoutError:
    """``lost``: the pending nodes whose barrier task reached the rendezvous and was sent
    every address, by host: silent since, their host lost or partitioned (restartable)."""
    if lost and set(lost) == set(pending):
        where = ", ".join(f"{n} on {h}" for n, h in lost.items())
        return ReservationTimeoutError(
            f"nodes {list(pending)} did not start within reservation_timeout={limit:g}s: "
            f"{where} fell silent after the rendezvous (its barrier task sent its address and "
            "was sent every node's, then nothing was heard of it): a lost host or a network "
            "partition between it and the driver (with max_restarts the cluster restarts on "
            "the hosts Spark can give)",
            restartable=True,
        )
    return ReservationTimeoutError(
        f"nodes {list(pending)} did not start within reservation_timeout="
        f"{limit:g}s; check the executor logs, or raise "
        "spark.sparktf.reservationTimeout"
    )


def restartable(failure: SparkTFError) -> bool:
    """Whether ``failure``'s kind allows a whole-cluster restart (``max_restarts``): a node's
    failure, the Spark job's (not a user's cancel), or nodes lost after the rendezvous."""
    if isinstance(failure, ReservationTimeoutError):
        return failure.restartable
    return isinstance(failure, (NodeError, SparkJobError)) and not getattr(
        failure, "cancelled", False
    )


#: Where a node's error report says it failed, as its NodeError's reason says it.
_WHERE = {
    "result": "its return value",
    "feed": "its data feed",
    "log_dir": "copying its log_dir to HDFS",
    "task": "its Spark barrier task failed",
    "control": "its control channel refused a frame that failed its MAC",
    "network": "it cannot reach another node's TensorFlow port",
}


#: A TensorFlow task named in full (``/job:worker/replica:0/task:1``), as TensorFlow's
#: coordination service and MWMS's health check name a peer they no longer hear.
_TF_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
#: How recently before a node's error the driver must have heard a peer for it to count as
#: alive (heartbeats come every second or so).
HEARD_WITHIN = 5.0


def peers_heard(n: NodeRecord, nodes: dict[str, NodeRecord]) -> str:
    """Where ``n``'s error names TensorFlow peers it no longer hears (its coordination
    service's "tasks are unhealthy (stopped sending heartbeats)", MWMS's "is down", or a
    failed RPC to the coordination service, whose leader is the chief, else worker:0; TF's
    default) while the
    driver still heard them then: a note that says they are alive and the network between
    the two hosts is the cause (TensorFlow says the tasks crashed); "" otherwise."""
    error, error_at = n.outcome.error, n.outcome.error_at
    if error is None or error_at is None:
        return ""
    message = error.get("message", "")
    named = {f"{job}:{index}" for job, index in _TF_TASK.findall(message)}
    if "CoordinationService/" in message:  # its RPC to the coordination service's leader
        named.add("chief:0" if "chief:0" in nodes else "worker:0")
    alive = []
    for name in sorted(named - {n.name}):
        peer = nodes.get(name)
        if peer is None or peer.outcome.exit is not None or peer.liveness.lost:
            continue
        live = peer.liveness
        heard = max(live.last_beat or 0.0, live.supervisor_heard_at or 0.0)
        if heard and heard >= error_at - HEARD_WITHIN:
            alive.append(f"{name} (on {peer.host})")
    if not alive:
        return ""
    return (
        f"; TensorFlow on {n.name} lost {', '.join(alive)}, which the driver still heard: "
        f"{'they are' if len(alive) > 1 else 'it is'} alive, and {n.name}'s host "
        f"({n.host}) cannot reach {'them' if len(alive) > 1 else 'it'}: a network partition "
        "or a firewall between the executors' hosts, not a crash"
    )


def node_error(
    n: NodeRecord, others: list[str], job: JobFailure | None = None, note: str = ""
) -> NodeError:
    """The typed error for a failed node, with its reason and the tail of its output (and,
    for a node lost with its executor, why Spark says the executor was lost; ``note``: what
    the driver knows beside, as :func:`peers_heard` says)."""
    out, restarts = n.outcome, n.inplace.restarts
    tail = list(out.exit["tail"]) if out.exit and out.exit.get("tail") else list(n.tail)
    again = (
        f" (its TF process had been restarted in place {restarts} time"
        f"{'s' if restarts > 1 else ''}: spark.sparktf.workerRestarts)"
        if restarts
        else ""
    )
    error = out.error
    if error is not None:
        where = error.get("where")
        if where == "exit":
            who = "the script" if error.get("exc_type") == "ScriptExit" else "main_fn"
            reason = f"{who} called sys.exit({error.get('code')})"
        elif where == "task":  # its cause is in no output of the node's: say it first
            reason = f"{_WHERE['task']}, not main_fn: {error['exc_type']}: {error['message']}"
        else:
            reason = _WHERE.get(where or "", "main_fn raised")
        return NodeError(
            n.name,
            n.host,
            reason + again + note,
            exc_type=error["exc_type"],
            exc_message=error["message"],
            traceback_text=error["traceback"],
            output_tail=tail,
            others=others,
        )
    return NodeError(n.name, n.host, _reason(n, job) + again, output_tail=tail, others=others)


def _reason(n: NodeRecord, job: JobFailure | None) -> str:
    """Why a node that reported no error failed."""
    live, out = n.liveness, n.outcome
    if live.hung:
        return live.hung
    if live.lost:
        lost = job.executor_lost if job is not None else None
        if not lost:
            return (
                "lost contact with the node: its executor, Spark task or supervisor died "
                "(see that executor's logs)"
            )
        reason = f"lost with its executor: {lost}"
        if "memory" in lost and "memoryOverhead" not in lost:
            reason += (
                ". The TensorFlow process counts against the container's memory: "
                "raise spark.executor.memoryOverhead"
            )
        return reason
    if live.silent is not None:  # its supervisor killed it, to restart it in place
        return (
            f"{live.silent}: its TensorFlow process was stopped or frozen, and its supervisor "
            "killed it (SIGKILL) to restart it in place"
        )
    if out.exit is not None and out.exit["code"] != 0:
        return f"its TensorFlow process {describe_exit(out.exit['code'])}"
    if not live.connected:
        return "its TensorFlow process exited before it connected to the driver"
    return (
        "its TensorFlow process exited without reporting main_fn's result (did "
        "main_fn call os._exit?)"
    )


def unread_feed(waiting: list[str]) -> dict:
    """The error of a training node whose main_fn returned without opening its data feed
    while ``waiting`` (the nodes reading theirs) wait for its rows under equalization."""
    return messages.make(
        "error",
        where="feed",
        exc_type="FeedError",
        traceback="",
        message=f"main_fn returned without reading its data feed, while "
        f"{', '.join(waiting)} {'waits' if len(waiting) == 1 else 'wait'} for its "
        "rows: with equalize (the default "
        "without parameter servers) every training node's share sets how many "
        "rows each may take. Read the feed on every training node (ctx."
        "get_data_feed() until should_stop()), or pass equalize=False to "
        "cluster.train()",
    )
