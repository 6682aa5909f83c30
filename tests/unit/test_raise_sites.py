"""Every error a user can meet derives from SparkTFError: a scan of sparktf's raise sites.

The scan parses every module under sparktf/ (no imports) and finds each ``raise X(...)`` (or
``raise X``) whose ``X`` is one of Python's built-in exceptions, and each exception class that
derives from built-in exceptions alone. Either is refused unless it is on an allow-list below,
keyed by module and function (or class) name, with the reason it never reaches a user as it
is: a protocol Python itself expects (``AttributeError`` from ``__getattr__``), an internal
invariant, or an error caught and turned into a sparktf one on the way. Bad input a user can
give raises a sparktf error that is still what it was: :class:`sparktf.ConfigError` (a
``ValueError``) or :class:`sparktf.ConfigTypeError` (a ``ValueError`` and a ``TypeError``).
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import os
from pathlib import Path

import pytest

import sparktf
from sparktf import errors, fs

ROOT = Path(sparktf.__file__).parent

BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}

_INVARIANT = (
    "an invariant of data sparktf builds itself (roles from assign_roles after run()'s "
    "preflight reported bad arguments as ConfigError; addresses from the barrier tasks)"
)

#: (module, function or Class.method, exception) -> why the built-in exception is right there.
#: The function may be a pattern (fnmatch). An entry that matches no raise site fails too.
ALLOWED_RAISES: dict[tuple[str, str, str], str] = {
    ("sparktf", "__getattr__", "AttributeError"): (
        "a module's __getattr__ must raise AttributeError: hasattr, getattr's default and "
        "'from sparktf import name' rely on it"
    ),
    ("sparktf.compat.tfcluster", "TFCluster.__getattr__", "AttributeError"): (
        "an object's __getattr__ must raise AttributeError (copy and pickle probe for "
        "attributes before 'cluster' is set)"
    ),
    ("sparktf.common.tfimport", "_Refused.*", "ImportError"): (
        "import machinery: a loader refuses a module with ImportError, which is what "
        "'import keras' must raise in a process that keeps Keras out"
    ),
    ("sparktf.common.feedwire", "_payload", "ConnectionError"): (
        "a peer's oversized data frame ends that connection; every reader catches it with "
        "the connection's other failures (the node's feed reader as FeedError BROKEN, the "
        "task's reply reader, the row exchange)"
    ),
    ("sparktf.common.protocol.channel", "Channel.recv", "ConnectionError"): (
        "an oversized control frame ends that connection, as a reset would; the control "
        "server and the node's channel threads catch OSError"
    ),
    ("sparktf.common.protocol.gatekeeper", "Gatekeeper._advance", "ConnectionError"): (
        "caught in the same function (the connection is refused and counted)"
    ),
    ("sparktf.common.protocol.sockets", "recv_before", "TimeoutError"): (
        "socket semantics (socket.timeout is TimeoutError) for a handshake past its deadline; "
        "the callers drop that connection"
    ),
    ("sparktf.common.messages", "make", "ValueError"): (
        "sparktf's own senders building a message the catalogue does not allow: a bug in "
        "sparktf, never input"
    ),
    ("sparktf.common.messages", "done", "ValueError"): (
        "raised on the node and caught there (node.process._result_message), which reports "
        "it: the user meets the driver's NodeError naming the size and the limit"
    ),
    ("sparktf.common.topology", "NodeRole.__post_init__", "ValueError"): _INVARIANT,
    ("sparktf.common.topology", "split_address", "ValueError"): _INVARIANT,
    ("sparktf.common.topology", "cluster_spec", "ValueError"): _INVARIANT,
    ("sparktf.common.topology", "tf_config", "ValueError"): _INVARIANT,
    ("sparktf.common.topology", "chief_role", "ValueError"): _INVARIANT,
    ("sparktf.common.settings", "default", "KeyError"): (
        "sparktf's code reads its own defaults by name when its modules load: an unknown "
        "name is a bug, found at import"
    ),
    ("sparktf.common.settings", "Settings.resolve", "TypeError"): (
        "run() passes only its own keyword arguments: an unknown name is sparktf's bug, as "
        "Python's TypeError for an unexpected keyword argument would be"
    ),
    ("sparktf.fs.backends", "_Backend.*", "NotImplementedError"): "an abstract base's methods",
    ("sparktf.fs.backends", "_Libhdfs.delete", "OSError"): (
        "called through fs.backends._call, which raises HadoopFSError naming the path"
    ),
    ("sparktf.task.feeder", "feed", "TimeoutError"): (
        "caught a few lines below, in the same function, and raised as the feed's "
        "TaskFeedError (_took_no_data)"
    ),
    ("sparktf.task.readback", "_send_draining", "TimeoutError"): (
        "control flow to task.feeder.feed, which raises the feed's TaskFeedError for it"
    ),
    ("sparktf.task.readback", "_send_draining", "BrokenPipeError"): (
        "control flow to task.feeder.feed: the TF process stopped reading, an early stop"
    ),
    ("sparktf.node.process", "_call_main", "TypeError"): (
        "caught in the same function with pickle.loads' own errors, and raised as ConfigError "
        "(main_fn could not be loaded)"
    ),
    ("sparktf.node.process", "_start_tensorboard", "OSError"): (
        "caught in the same function with TensorBoard's own start failures: the driver is told "
        "TensorBoard could not start"
    ),
    ("sparktf.session", "quiet_spark_logs", "RuntimeError"): (
        "caught in the same function, which logs it at debug and leaves Spark's logging alone"
    ),
}

#: (module, class) -> why an exception class of sparktf's derives from built-ins alone.
ALLOWED_CLASSES: dict[tuple[str, str], str] = {
    ("sparktf.common.scripts", "ScriptExit"): (
        "a script's sys.exit(n) inside its node's process (a SystemExit); the node reports it "
        "and the user meets a NodeError naming the code"
    ),
    ("sparktf.common.messages", "ResultUnreadable"): (
        "raised by result_value and caught by the driver's JobState, which fails the job "
        "with a NodeError naming the value's type"
    ),
    ("sparktf.common.protocol.exceptions", "ChannelClosed"): (
        "the peer closed the connection: a ConnectionError (an OSError) the channels' readers "
        "catch as the connection's end"
    ),
    ("sparktf.common.protocol.exceptions", "TurnedAway"): (
        "the driver turned a connection away (busy, or the handshake late): protocol.connect "
        "catches it and tries again"
    ),
    ("sparktf.common.settings", "_Invalid"): (
        "one setting's check failing inside Settings.resolve, which collects them into one "
        "ConfigError"
    ),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _raised_name(node: ast.Raise) -> str | None:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return exc.id if isinstance(exc, ast.Name) else None


def _visit(node: ast.AST, module: str, scope: tuple[str, ...], raises: list, classes: list) -> None:
    """Collect ``node``'s raises of built-in exceptions and its exception classes that derive
    from built-ins alone, each with its module and scope (``Class.method``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            bases = [b.id if isinstance(b, ast.Name) else None for b in child.bases]
            if bases and all(b in BUILTIN_EXCEPTIONS for b in bases):
                classes.append((module, ".".join((*scope, child.name)), child.lineno))
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _visit(child, module, (*scope, child.name), raises, classes)
            continue
        if isinstance(child, ast.Raise) and child.exc is not None:
            name = _raised_name(child)
            if name in BUILTIN_EXCEPTIONS:
                raises.append((module, ".".join(scope) or "<module>", name, child.lineno))
        _visit(child, module, scope, raises, classes)


def _scan() -> tuple[list[tuple[str, str, str, int]], list[tuple[str, str, int]]]:
    """Every raise of a built-in exception (module, scope, name, line) and every exception
    class deriving from built-ins alone (module, class, line), under sparktf/."""
    raises: list[tuple[str, str, str, int]] = []
    classes: list[tuple[str, str, int]] = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        _visit(tree, _module_name(path), (), raises, classes)
    return raises, classes


RAISES, CLASSES = _scan()


def _allowed(module: str, scope: str, name: str) -> tuple[str, str, str] | None:
    for key in ALLOWED_RAISES:
        if key[0] == module and key[2] == name and fnmatch.fnmatchcase(scope, key[1]):
            return key
    return None


def test_the_scan_finds_raise_sites():
    """The scan sees sparktf's raises at all (a broken walk would pass every check)."""
    assert len({module for module, *_ in RAISES}) > 5
    assert ("sparktf.fs.backends", "_Backend.info", "NotImplementedError") in {
        r[:3] for r in RAISES
    }


def test_every_builtin_exception_raised_is_on_the_allow_list():
    refused = [
        f"{module.replace('.', '/')}.py:{line}: {scope} raises {name}"
        for module, scope, name, line in RAISES
        if _allowed(module, scope, name) is None
    ]
    assert not refused, (
        "built-in exceptions a user may meet: raise a sparktf.errors type that is still the "
        "built-in (ConfigError is a ValueError, ConfigTypeError also a TypeError), or add "
        "the site to ALLOWED_RAISES with the reason no user meets it:\n  " + "\n  ".join(refused)
    )


def test_every_allowed_raise_site_still_exists():
    used = {_allowed(module, scope, name) for module, scope, name, _ in RAISES}
    stale = sorted(set(ALLOWED_RAISES) - used)
    assert not stale, f"allow-list entries that match no raise site any more: {stale}"


def test_every_exception_class_derives_from_sparktf_error_or_is_allowed():
    found = {(module, cls) for module, cls, _ in CLASSES} - {("sparktf.errors", "SparkTFError")}
    refused = sorted(found - set(ALLOWED_CLASSES))
    assert not refused, (
        "exception classes outside SparkTFError's tree: derive them from a sparktf.errors "
        f"type, or add them to ALLOWED_CLASSES with the reason no user meets them: {refused}"
    )
    stale = sorted(set(ALLOWED_CLASSES) - found)
    assert not stale, f"allow-list entries that match no class any more: {stale}"


# -------------------------------------------------------- the new types, through the public API
@pytest.mark.parametrize("builtin", [TypeError, ValueError, sparktf.SparkTFError])
def test_a_path_of_the_wrong_type_is_a_config_type_error_and_still_a_type_error(builtin):
    with pytest.raises(builtin, match="path must be a non-empty str or os.PathLike, got 42"):
        fs.exists(42)
    with pytest.raises(sparktf.ConfigTypeError):
        fs.read_bytes(None)


def test_a_bad_mode_or_direction_is_a_config_error_and_still_a_value_error(tmp_path):
    with pytest.raises(sparktf.ConfigError, match="supports 'rb' and 'wb', not 'r'") as info:
        with fs.open(os.fspath(tmp_path / "x"), "r"):
            pass
    assert isinstance(info.value, ValueError) and isinstance(info.value, sparktf.SparkTFError)
    with pytest.raises(ValueError, match="direction must be 'up' or 'down'"):
        fs.SyncedDir(os.fspath(tmp_path), direction="sideways")


def test_tfnode_given_something_else_than_ctx_is_a_config_type_error():
    with pytest.raises(TypeError, match="TFNode: pass ctx.mgr") as info:
        sparktf.TFNode.DataFeed("not a ctx")
    assert isinstance(info.value, sparktf.ConfigTypeError)


@pytest.mark.parametrize("value", ["7", True, 1.5, [1, 2]])
def test_a_step_that_is_no_int_is_a_config_type_error(value):
    from sparktf.common import plain_numbers

    with pytest.raises(TypeError, match=r"ctx.report: step must be an int") as info:
        plain_numbers.step(value, "ctx.report: step")
    assert isinstance(info.value, sparktf.SparkTFError)


def test_config_type_error_is_exported_and_in_the_tree():
    assert sparktf.ConfigTypeError is errors.ConfigTypeError
    assert issubclass(errors.ConfigTypeError, errors.ConfigError)
    assert sparktf.ReservationTimeoutError is errors.ReservationTimeoutError
