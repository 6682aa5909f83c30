"""Run a function on a module as soon as it is imported in this (node) process.

How the other patches of :mod:`sparktf.node.patches` adjust a TensorFlow module without
importing TensorFlow before ``main_fn`` does.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

_HOOKS: dict[str, list[Callable]] = {}  # module name -> patches, in the order asked


def after_import(name: str, patch: Callable) -> None:
    """Call ``patch(module)`` once module ``name`` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
        return
    _HOOKS.setdefault(name, []).append(patch)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in _HOOKS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(
            module: ModuleType,
        ) -> None:  # this spec's own loader instance: nothing else changes
            run(module)
            for patch in _HOOKS.pop(name, ()):
                patch(module)

        loader.exec_module = exec_module
        return spec


def wrap(
    owner: Any, name: str, make: Callable[[Callable], Callable], everywhere: bool = False
) -> None:
    """Replace ``owner.<name>`` (a module's function, a class's method) with ``make(original)``,
    once: nothing where ``owner`` has no such attribute (another TensorFlow) or it is sparktf's
    already. ``everywhere``: also in every module that holds the original by name
    (:func:`replace_everywhere`)."""
    original = getattr(owner, name, None) if owner is not None else None
    if original is None or getattr(original, "_sparktf", False):
        return
    new = make(original)
    new._sparktf = True  # type: ignore[attr-defined]  # (a mark on the function)
    if everywhere:
        replace_everywhere(owner, name, new)
    else:
        setattr(owner, name, new)


def replace_everywhere(module: Any, name: str, new: Any) -> None:
    """Set ``module.<name>`` to ``new`` and every loaded module's own reference to the old
    function too (TensorFlow's ``tf.*`` API modules import its functions by name). Only the
    modules' own dicts are looked at: an attribute lookup could start a lazy module's import."""
    old = module.__dict__.get(name)
    setattr(module, name, new)
    for mod in list(sys.modules.values()):
        names = getattr(mod, "__dict__", None)
        if isinstance(names, dict) and old is not None and names.get(name) is old:
            names[name] = new
