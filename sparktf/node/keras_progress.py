"""The Keras callback behind ``ctx.keras_callback()``: reports ``fit``'s step and logs to the
driver, whichever Keras the model is built with.

TensorFlow 2.21 has two: Keras 3 (``import keras``, TensorFlow's default ``tf.keras``) and
tf-keras (``import tf_keras``, or ``tf.keras`` under ``TF_USE_LEGACY_KERAS=1``). Their fit()
calls callbacks differently (tf-keras asks each one ``_implements_train_batch_hooks()``,
Keras 3 does not), and a callback made for one crashed in the other. Which one a ``main_fn``
uses cannot be read from the process: ``import tensorflow`` and ``import tf_keras`` both
import Keras 3 too (TensorFlow registers its optimizers at load time), and a daemon that
preloads ``tf_keras`` (``SPARKTF_PRELOAD``) has it without Keras 3 while the model may be
Keras 3's. So :class:`SparkTFProgress` answers both protocols and learns which Keras it
serves from the model Keras gives it (``set_model``); ``keras=`` makes it a subclass of that
Keras's own ``Callback`` instead.

Under ParameterServerStrategy tf-keras refuses callbacks with batch hooks ("Batch-level
Callbacks are not supported with ParameterServerStrategy"): there the callback says it has
none and reports once an epoch.

Runs in the TF process; imports Keras only when ``keras=`` names it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sparktf.errors import ConfigTypeError

Report = Callable[..., None]

#: What ``keras=`` may name.
KERAS_NAMES = ("tf_keras", "keras")


def numbers_of(logs: Any) -> dict[str, float]:
    """The numeric entries of Keras' logs, as floats (strings and the like left out)."""
    return {
        k: float(v)
        for k, v in (logs or {}).items()
        if not isinstance(v, (str, bytes)) and hasattr(v, "__float__")
    }


def is_tf_keras(model: Any) -> bool:
    """Whether ``model`` is a tf-keras model (a class of its, or a user's subclass of one)."""
    return any(c.__module__.split(".")[0] == "tf_keras" for c in type(model).__mro__)


def coordinated(model: Any) -> bool:
    """Whether ``model`` trains under ParameterServerStrategy (a ClusterCoordinator runs its
    steps: tf-keras allows epoch-level callbacks only)."""
    strategy = getattr(model, "distribute_strategy", None)
    if strategy is None:
        return False
    return bool(getattr(strategy, "_should_use_with_coordinator", False)) or (
        "ParameterServerStrategy" in type(strategy).__name__
    )


def summed_replicas(model: Any) -> int:
    """How many replicas a batch's logs are summed over: tf-keras sums them over every replica
    (its 'auto' reduction off TPUs; under MultiWorkerMirroredStrategy, over every worker): an
    accuracy of 1.98 on two workers. Their mean is what the user expects (the epoch's logs,
    recomputed from the synced metrics, are right as they are). Keras 3: 1."""
    strategy = getattr(model, "distribute_strategy", None)
    if strategy is None or not is_tf_keras(model):
        return 1
    if getattr(model, "distribute_reduction_method", "auto") not in ("auto", "sum"):
        return 1
    if "TPU" in type(strategy).__name__:
        return 1
    return int(getattr(strategy, "num_replicas_in_sync", 1) or 1)


class _Reporting:
    """What the callback does, under either Keras: the step and logs every ``every_n_steps``
    batches, and at each epoch's end (with ``epoch_done``)."""

    model: Any
    params: dict

    def _start(self, report: Report, every_n_steps: int) -> None:
        self._report = report
        self._every = every_n_steps
        self._batches = 0  # this epoch's
        self.step = 0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._batches = 0

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._batches += 1
        self.step += 1
        if self.step % self._every == 0:
            values = numbers_of(logs)
            replicas = summed_replicas(self.model)
            if replicas > 1:
                values = {k: v / replicas for k, v in values.items()}
            self._report(step=self.step, **values)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if not self._batches:  # no batch hooks (ParameterServerStrategy): fit's steps
            self.step += int((getattr(self, "params", None) or {}).get("steps") or 0)
        self._report(step=self.step, epoch_done=epoch + 1, **numbers_of(logs))

    # tf-keras asks these once the model is set; Keras 3 calls every hook regardless.
    def _implements_train_batch_hooks(self):
        return not coordinated(self.model)

    def _implements_test_batch_hooks(self):
        return False

    def _implements_predict_batch_hooks(self):
        return False


def _default(method):
    """Marks a hook as not overridden, as both Kerases' ``utils.default`` do (they read
    ``_is_default``): fit() skips what no callback implements."""
    method._is_default = True
    return method


class SparkTFProgress(_Reporting):
    """Reports fit()'s step and logs to the sparktf driver. A callback to Keras 3 and to
    tf-keras alike: it has both one's and the other's attributes and hooks, and learns which
    Keras it serves from the model (:meth:`set_model`)."""

    def __init__(self, report: Report, every_n_steps: int = 1) -> None:
        self.model = None
        self.params: dict = {}
        self.validation_data = None  # tf-keras' Callback attributes
        self._chief_worker_only = None
        self._supports_tf_logs = False
        self._start(report, every_n_steps)

    def set_params(self, params: dict) -> None:
        self.params = params

    def set_model(self, model: Any) -> None:
        self.model = model

    @_default
    def on_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        pass

    @_default
    def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
        pass

    @_default
    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        pass

    @_default
    def on_test_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        pass

    @_default
    def on_test_batch_end(self, batch: int, logs: dict | None = None) -> None:
        pass

    @_default
    def on_predict_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        pass

    @_default
    def on_predict_batch_end(self, batch: int, logs: dict | None = None) -> None:
        pass

    def on_train_begin(self, logs: dict | None = None) -> None:
        pass

    def on_train_end(self, logs: dict | None = None) -> None:
        pass

    def on_test_begin(self, logs: dict | None = None) -> None:
        pass

    def on_test_end(self, logs: dict | None = None) -> None:
        pass

    def on_predict_begin(self, logs: dict | None = None) -> None:
        pass

    def on_predict_end(self, logs: dict | None = None) -> None:
        pass


_SUBCLASSES: dict[type, type] = {}
_LOCK = threading.Lock()


def _subclass(base: type) -> type:
    """``SparkTFProgress`` as a subclass of ``base`` (a Keras's ``Callback``), made once."""
    with _LOCK:
        if base not in _SUBCLASSES:

            def __init__(self, report: Report, every_n_steps: int = 1) -> None:
                base.__init__(self)  # type: ignore[misc]  # (the Keras base chosen at run time)
                self._start(report, every_n_steps)

            _SUBCLASSES[base] = type(
                "SparkTFProgress",
                (_Reporting, base),
                {"__init__": __init__, "__doc__": SparkTFProgress.__doc__},
            )
        return _SUBCLASSES[base]


def _callback_base(keras: Any) -> type:
    """The ``Callback`` class of ``keras``: a Keras module (``tf_keras``, ``keras``,
    ``tf.keras``) or its name."""
    module: Any = keras
    if isinstance(keras, str):
        if keras not in KERAS_NAMES:
            raise ConfigTypeError(
                f"keras must be the Keras module your model is built with (tf_keras, keras, "
                f"tf.keras) or one of the names {', '.join(KERAS_NAMES)}; got {keras!r}"
            )
        module = importlib.import_module(keras)
    base = getattr(getattr(module, "callbacks", None), "Callback", None)
    if not isinstance(module, ModuleType) or not isinstance(base, type):
        raise ConfigTypeError(
            "keras must be the Keras module your model is built with (tf_keras, keras, "
            f"tf.keras) or one of the names {', '.join(KERAS_NAMES)}; got {keras!r}, which "
            "has no callbacks.Callback"
        )
    return base


def keras_callback(report: Report, every_n_steps: int = 1, keras: Any = None) -> Any:
    """A callback that reports to ``report`` (``ctx.report``): for either Keras when ``keras``
    is None, else a subclass of ``keras.callbacks.Callback``."""
    if keras is None:
        return SparkTFProgress(report, every_n_steps)
    return _subclass(_callback_base(keras))(report, every_n_steps)
