"""A Python script run as it is on every node: ``sparktf.run(spark, "train.py", args=[...])``.

The driver reads the script and the files to ship with it (``py_files``: modules, packages as
``.zip``) into a :class:`Script`, a frozen, picklable value that travels in the job's payload in
place of a ``main_fn``. On each node it is called with the node's ``ctx``: it writes the files
into a private folder of the node's work dir, puts that folder (and every ``.zip``) first on
``sys.path``, sets ``sys.argv`` to the script's path and its arguments, and runs the script as
``__main__`` (``runpy``), with ``TF_CONFIG`` already set. Its ``sys.exit(n)`` ends the node
as a ``main_fn``'s would: 0 or none is success, anything else a failure that names the code
(:class:`ScriptExit`).

Both sides import it; it imports the standard library and :mod:`sparktf.errors` only.
"""

from __future__ import annotations

import os
import runpy
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sparktf.errors import ConfigError, ConfigTypeError

#: What a script may be shipped with: Python modules, and packages or modules zipped.
SHIPPABLE = (".py", ".zip", ".egg")


class ScriptExit(SystemExit):
    """A script's ``sys.exit(n)`` with ``n`` not 0: its node's failure, reported as the
    script's (no traceback through runpy and sparktf: the code says it all)."""


@dataclass(frozen=True)
class Script:
    """A script and the files it needs, as the driver read them."""

    name: str
    source: bytes
    argv: tuple[str, ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()

    def __call__(self, ctx: Any) -> None:
        folder = tempfile.mkdtemp(prefix="script-", dir=getattr(ctx, "work_dir", None))
        path = os.path.join(folder, self.name)
        for name, data in ((self.name, self.source), *self.files):
            fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        zips = [os.path.join(folder, n) for n, _ in self.files if not n.endswith(".py")]
        saved_argv, saved_path = sys.argv, list(sys.path)
        sys.argv = [path, *self.argv]
        sys.path[:0] = [folder, *zips]
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            if exc.code is None or exc.code == 0:
                return None
            raise ScriptExit(exc.code) from None
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
        return None

    def __repr__(self) -> str:  # what a log line or an error shows: no file contents
        return f"Script({self.name!r}, argv={list(self.argv)!r})"


def _read(path: Any, what: str) -> tuple[str, bytes]:
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigTypeError(f"{what} must be a path (str), got {type(path).__name__}: {path!r}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ConfigError(f"{what} {path!r} is not a file here (on the driver); give its path")
    with open(path, "rb") as f:
        return os.path.basename(path), f.read()


def is_script(main_fn: Any) -> bool:
    """Whether ``run()`` was given a script's path rather than a function."""
    return isinstance(main_fn, (str, os.PathLike))


def from_path(path: Any, args: Any = None, py_files: Sequence[Any] | None = None) -> Script:
    """The :class:`Script` at ``path`` (a ``.py`` file on the driver) with its command-line
    ``args`` (a list of strings) and ``py_files``; ConfigError saying what to change."""
    name, source = _read(path, "the script")
    if not name.endswith(".py"):
        raise ConfigError(f"the script {os.fspath(path)!r} must be a Python file (.py)")
    if args is None:
        args = []
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise ConfigTypeError(
            "args of a script are its command-line arguments, a list of strings such as "
            f"['--epochs', '3'], got {type(args).__name__}: {args!r}"
        )
    bad = [a for a in args if not isinstance(a, str)]
    if bad:
        raise ConfigTypeError(f"a script's args must all be strings; these are not: {bad!r}")
    files: dict[str, bytes] = {}
    for item in py_files or ():
        file_name, data = _read(item, "a py_files entry")
        if not file_name.endswith(SHIPPABLE):
            raise ConfigError(
                f"py_files entry {os.fspath(item)!r} must be one of {', '.join(SHIPPABLE)}"
            )
        if file_name == name or file_name in files:
            raise ConfigError(f"py_files names {file_name!r} twice (or as the script itself)")
        files[file_name] = data
    return Script(name, source, tuple(args), tuple(files.items()))
