"""The control channel's messages, in one catalogue used by all three sides.

Every message on the control channel (:mod:`sparktf.common.protocol`) is a dict whose ``"type"`` is
one of the names below. Three kinds of peer connect to the driver, each named in its ``hello``
(the words are the glossary's, docs/glossary.md):

* ``node``: the TensorFlow process (:mod:`sparktf.node`);
* ``supervisor``: its supervisor (:mod:`sparktf.task.supervisor`);
* ``task``: the Spark barrier task (:mod:`sparktf.task.barrier`), only to say why it fails.

:func:`make` builds a message and checks its fields against the catalogue, so a sender cannot
drift from what the receiver reads. Imports nothing but the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Each kind of peer, as its hello names it (the hello's ``peer`` field; not a TF role).
NODE, SUPERVISOR, TASK = "node", "supervisor", "task"
PEERS = (NODE, SUPERVISOR, TASK)


@dataclass(frozen=True)
class Message:
    """One kind of control message: who sends it, to whom, with which fields."""

    type: str
    sender: str
    receiver: str
    fields: tuple[str, ...]
    doc: str


_ALL = [
    Message(
        "hello",
        "node|supervisor|task",
        "driver",
        ("peer", "node", "host"),
        "first message of every connection: peer is the peer's kind (node, supervisor, task), "
        "node its node's name; supervisors and nodes add pid and port, a node its "
        "incarnation, a supervisor whether it restarts its worker in place (restartable)",
    ),
    Message(
        "address",
        "task",
        "driver",
        ("port",),
        "the rendezvous: the port the task reserved for its node's TF server (its host "
        "is the hello's)",
    ),
    Message(
        "addresses",
        "driver",
        "task",
        ("addresses",),
        "the rendezvous: every node's host:port in rank order, once every task sent its",
    ),
    Message(
        "log",
        "supervisor",
        "driver",
        ("stream", "line"),
        "one line the TF process wrote to stdout or stderr",
    ),
    Message(
        "exit",
        "supervisor",
        "driver",
        ("code", "aborted", "tail"),
        "the TF process exited with code (negative: killed by that signal); last lines. "
        "Sent after every log line of the process, on the same connection",
    ),
    Message(
        "heartbeat",
        "node",
        "driver",
        ("step", "rows"),
        "alive, every heartbeat_interval; the step and metrics of ctx.report, rows fed and "
        "the feed's epoch",
    ),
    Message(
        "state",
        "node",
        "driver",
        ("state",),
        "the node now only serves (ps, or a worker in ctx.serve()): 'serving'",
    ),
    Message(
        "done",
        "node",
        "driver",
        ("value", "value_type"),
        "main_fn returned: its value pickled on the node (bytes, read by result_value), "
        "and the value's type; the process stays up until 'stop'",
    ),
    Message(
        "error",
        "node|task",
        "driver",
        ("where", "exc_type", "message", "traceback"),
        "main_fn raised (where='main_fn') or called sys.exit with an error ('exit', and "
        "the code's repr), its result, feed or Hadoop log_dir failed ('result', 'feed', "
        "'log_dir'), or the barrier task failed ('task')",
    ),
    Message(
        "feed_progress",
        "node",
        "driver",
        ("received", "ended"),
        "InputMode.SPARK with equalize: rows this node's partition has delivered so far; "
        "where it takes moved rows (exchange), whether its share stopped early (stopped)",
    ),
    Message(
        "feed_done",
        "node",
        "driver",
        ("held_back", "results"),
        "the node's feed closed: rows equalization held back, inference results sent",
    ),
    Message(
        "tensorboard",
        "node",
        "driver",
        ("url", "log_dir", "error"),
        "the chief's TensorBoard answers at url (None and an error if it failed)",
    ),
    Message(
        "training_done",
        "driver",
        "node",
        (),
        "every chief/worker main_fn has returned (ctx.training_done())",
    ),
    Message(
        "stop",
        "driver",
        "node",
        (),
        "end ctx.serve() and let a finished node exit: the job is over",
    ),
    Message(
        "feed_bound",
        "driver",
        "node",
        ("bound", "final"),
        "equalize: rows every training node may hand out this epoch; final once known; "
        "whether a share has ended (ended); with the final bound, the rows this node "
        "gives [[taker, address, rows], ...] (give) or takes [[giver, rows], ...] (take); "
        "before that, the fewest rows another training node has reported (others)",
    ),
    Message(
        "tokens",
        "driver",
        "node",
        ("data",),
        "a secure cluster's Hadoop delegation tokens as the driver holds them now (Hadoop's "
        "token storage bytes, sealed under the job's secret: protocol.seal_payload, for "
        "TOKENS_PURPOSE): those Spark obtained since the node started "
        "(sparktf.driver.credentials); the node makes them its HADOOP_TOKEN_FILE_LOCATION",
    ),
    Message("abort", "driver", "supervisor", (), "stop the TF process and everything below it now"),
    Message(
        "restart",
        "supervisor",
        "driver",
        ("code", "tail"),
        "the worker's TF process failed (exit code, last lines): may it be started again in "
        "place (workerRestarts)? The driver answers 'resume'",
    ),
    Message(
        "resume",
        "driver",
        "supervisor",
        ("go", "count", "limit", "why"),
        "the answer to 'restart': start the TF process again (go, the count-th restart of "
        "limit) or not (why), then report its exit as usual",
    ),
    Message(
        "kill",
        "driver",
        "supervisor",
        ("why", "incarnation"),
        "the worker's TF process sent no heartbeat for heartbeat_timeout (why): SIGKILL it "
        "(stopped or frozen, it would never exit), then ask to 'restart' it as for any exit; "
        "only the process of that incarnation (one started since is left alone)",
    ),
]

CATALOGUE: dict[str, Message] = {m.type: m for m in _ALL}
#: What a ``tokens`` message's payload is sealed for (protocol.seal_payload's ``purpose``).
TOKENS_PURPOSE = b"delegation tokens"
#: Fields a message may carry beyond the catalogue's (for the hello: its pid and port).
_OPTIONAL = {
    "hello": ("pid", "port", "incarnation", "restartable"),
    "heartbeat": (
        "epoch",
        "epoch_rows",
        "metrics",
        "feed_secs",
        "cpu",
        "collective",
        "reports",  # every ctx.report with metrics since the last: [(step, time, {k: v})]
    ),
    "feed_progress": ("exchange", "stopped"),
    "feed_bound": ("ended", "give", "take", "others"),
    "error": ("code", "reason"),
    # the node's GPUs and its executor's, as [entry, UUID] pairs (sparktf.common.gpus.claim)
    "address": ("gpus", "gpu_pool"),
    # other GPUs for nodes given one another node of their host has: {node: [entry, ...]}
    "addresses": ("gpus",),
}


def make(type_: str, **fields) -> dict:
    """A message of ``type_`` with exactly the catalogue's fields (``ValueError`` otherwise)."""
    spec = CATALOGUE.get(type_)
    if spec is None:
        raise ValueError(f"unknown control message {type_!r}; known: {sorted(CATALOGUE)}")
    extra = set(fields) - set(spec.fields) - set(_OPTIONAL.get(type_, ()))
    missing = set(spec.fields) - set(fields)
    if extra or missing:
        raise ValueError(
            f"control message {type_!r} takes fields {spec.fields}; "
            f"missing {sorted(missing)}, unexpected {sorted(extra)}"
        )
    return {"type": type_, **fields}


def hello(peer: str, node: str, host: str | None, **extra) -> dict:
    """The ``hello`` of a ``peer`` (:data:`PEERS`) for the node named ``node``."""
    return make("hello", peer=peer, node=node, host=host, **extra)


def error(
    where: str, exc: BaseException, traceback_text: str = "", note: str | None = None, **extra: Any
) -> dict:
    """An ``error`` message for ``exc``, raised at ``where`` (``note``: a line sparktf adds to
    its message; ``extra``: more fields)."""
    message = str(exc) if note is None else f"{exc}\n{note}"
    reason = getattr(exc, "reason", None)  # a FeedError's, e.g. FeedError.BROKEN
    if isinstance(reason, str):
        extra.setdefault("reason", reason)
    return make(
        "error",
        where=where,
        exc_type=type(exc).__name__,
        message=message,
        traceback=traceback_text,
        **extra,
    )


#: While rows still flow to some training node, every other one hears of the feeds at least
#: this often (seconds): a node's held-back progress report goes out anyway, and the driver
#: re-sends an unchanged bound to a node waiting on it. ``feed_timeout`` thus counts only the
#: time in which no node's rows flow (an idle timeout).
FLOW_EVERY = 0.5


#: The largest return value (pickled) a main_fn may send the driver, in MiB, unless the
#: node's environment sets SPARKTF_MAX_RESULT_MB.
MAX_RESULT_MB = 512


def done(value: Any, max_mb: float | None = None) -> dict:
    """The ``done`` message for main_fn's return ``value``, pickled here, on the node: a value
    the driver cannot unpickle then fails the job naming its type (:func:`result_value`),
    not the channel that carries it. ``ValueError`` if it is larger than ``max_mb`` MiB; the
    pickling's own error if it cannot be pickled."""
    import pickle

    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    limit = MAX_RESULT_MB if max_mb is None else max_mb
    if len(data) > limit * (1 << 20):
        raise ValueError(
            f"main_fn's return value (a {type_name(value)}) pickles to "
            f"{len(data) / (1 << 20):.1f} MiB, more than the {limit:g} MiB a result may be "
            "(SPARKTF_MAX_RESULT_MB in the node's environment): write large results to a "
            "shared path (HDFS, ctx.absolute_path) and return that path"
        )
    return make("done", value=data, value_type=type_name(value))


def result_value(message: dict) -> Any:
    """main_fn's return value from a ``done`` message; :class:`ResultUnreadable` if the
    driver cannot unpickle it (its class is on the executors' path only)."""
    import pickle

    try:
        return pickle.loads(message["value"])
    except Exception as exc:
        raise ResultUnreadable(
            f"main_fn returned a {message.get('value_type')}, which cannot be unpickled on "
            f"the driver ({type(exc).__name__}: {exc}): its class is on the executors' path "
            "only. Return plain data (numbers, strings, lists, dicts, numpy arrays), or put "
            "the class's module on the driver's path too (--py-files, sc.addPyFile)"
        ) from None


class ResultUnreadable(Exception):
    """A ``done`` message whose value the driver cannot unpickle."""


def type_name(value: Any) -> str:
    """``value``'s type as ``module.Qualname`` (builtins without the module)."""
    kind = type(value)
    module = getattr(kind, "__module__", "")
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
