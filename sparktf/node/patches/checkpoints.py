"""An evaluator's ``tf.train.checkpoints_iterator`` ends once training is over.

TensorFlow's way to evaluate beside training follows the checkpoints the chief writes with
``tf.train.checkpoints_iterator``: tf-keras' ``SidecarEvaluator`` with ``max_evaluations=None``
(as the ParameterServerStrategy guide writes it) waits for the next checkpoint for ever, and so
does a plain ``for path in tf.train.checkpoints_iterator(model_dir): ...``. Nothing in such a
program learns that training has ended, so on sparktf the evaluator's ``main_fn`` never returned
and the job never finished.

In an evaluator's process, :func:`install` makes the iterator (``tf.train`` and
``tf.compat.v1.train`` alike) look for new checkpoints in slices of :data:`SLICE` seconds and
end at the first slice without one that starts after the driver has said training is done: the
chief's last checkpoint, written before its ``main_fn`` returned, is still yielded first. A
``timeout`` and ``timeout_fn`` given keep their meaning. TensorFlow is not imported here:
the patch is applied when its module is imported (or at once if it already is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from sparktf.node.runtime import NodeRuntime

import functools
import time

from sparktf.node.patches import on_import

MODULE = "tensorflow.python.training.checkpoint_utils"
#: Seconds of each wait for a new checkpoint (TensorFlow polls every second within it).
SLICE = 2.0


def install(runtime: NodeRuntime) -> None:
    """``checkpoints_iterator`` in this process ends once ``runtime`` hears training is done."""
    on_import.after_import(MODULE, lambda module: _patch(module, runtime))


def _patch(module, runtime) -> None:
    # tf.train and tf.compat.v1.train hold it too: replaced there as well (everywhere).
    on_import.wrap(
        module, "checkpoints_iterator", lambda original: _ending(original, runtime), everywhere=True
    )


def _ending(original, runtime):
    """``original`` (TensorFlow's ``checkpoints_iterator``), ending once training is over."""

    @functools.wraps(original)
    def checkpoints_iterator(
        checkpoint_dir: str,
        min_interval_secs: float = 0,
        timeout: float | None = None,
        timeout_fn: Callable[[], bool] | None = None,
    ) -> Iterator[str]:
        since = time.monotonic()  # the start of the current wait for a checkpoint
        last_look = False  # training is over: one more slice looks for its last checkpoint

        def slice_over() -> bool:
            """True ends the iteration: training is over, or the caller's timeout says so."""
            nonlocal since, last_look
            if runtime.training_done.is_set():
                # The slice that just ended may have looked before the chief's last save,
                # so one more slice starts with a look of its own.
                if last_look:
                    return True
                last_look = True
                return False
            if timeout is not None and time.monotonic() - since >= timeout:
                since = time.monotonic()
                return timeout_fn is None or bool(timeout_fn())
            return False

        wait = timeout if timeout is not None and timeout < SLICE else SLICE
        for path in original(
            checkpoint_dir, min_interval_secs, timeout=wait, timeout_fn=slice_over
        ):
            yield path
            since = time.monotonic()

    return checkpoints_iterator
