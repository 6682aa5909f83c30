"""``import tensorflow`` without its eager Keras import, for processes that run no Keras code:
``sparktf.predict``'s Python workers (a SavedModel signature) and parameter servers (a server).

``import tensorflow`` (2.16 and later) ends by importing ``keras.src.optimizers`` (or
``tf_keras.src.optimizers`` under TF_USE_LEGACY_KERAS) "so that optimizers register at load
time". That runs Keras 3's whole package __init__: every layer, matplotlib, IPython, pandas,
scikit-learn wrappers, about half of the import (3.7 s -> 1.9 s on the 2-core test machine).
TensorFlow wraps that import in try/except ImportError; here it is refused and nothing else
changes: tf.keras stays TF's lazy loader (Keras is imported on first use), and a later
``import keras`` works as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

#: The packages ``import tensorflow`` imports only for their optimizers' registration.
_EAGER_KERAS = ("keras", "tf_keras")
_LOCK = threading.Lock()


class _Refused(importlib.abc.Loader):
    """A loader that declines: the import raises ImportError, which TensorFlow expects."""

    def __init__(self, name: str) -> None:
        self.name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> NoReturn:
        raise ImportError(
            f"{self.name} is not imported along with TensorFlow here (sparktf.common.tfimport)",
            name=self.name,
        )

    def exec_module(self, module: ModuleType) -> None:
        raise ImportError(self.name, name=self.name)


class _KerasDeferred(importlib.abc.MetaPathFinder):
    """Finds ``keras``/``tf_keras`` where they are (``importlib.util.find_spec`` still tells
    TensorFlow their directories, which it needs for ``tf.keras``) but refuses to load them."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in _EAGER_KERAS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _Refused(name)
        return spec


def tensorflow_without_keras() -> Any:
    """The ``tensorflow`` module, imported without its eager Keras import if not yet imported."""
    if "tensorflow" in sys.modules or any(name in sys.modules for name in _EAGER_KERAS):
        import tensorflow as tf  # already there, or Keras is: nothing to save

        return tf
    with _LOCK:
        finder = _KerasDeferred()
        sys.meta_path.insert(0, finder)
        try:
            import tensorflow as tf
        finally:
            sys.meta_path.remove(finder)
    return tf
