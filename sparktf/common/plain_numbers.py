"""Numbers as users pass them, taken as the plain ``int`` and ``float`` they are: numpy's integers
and floats (and any other registered ``numbers.Integral`` / ``numbers.Real``) count, a bool never
does.

Every argument check of the driver, the nodes and :func:`sparktf.predict` reads counts and
seconds through these two functions and keeps the plain ``int`` / ``float`` they return, so a
count computed with numpy travels to the nodes, the messages and the logs as a plain number.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from sparktf.errors import ConfigTypeError


def integer(value: Any) -> int | None:
    """``value`` as a plain ``int`` if it is an integer (not a bool), else ``None``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return None


def real(value: Any) -> float | None:
    """``value`` as a plain ``float`` if it is a real number (not a bool, not NaN), else
    ``None``."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
        return None if math.isnan(number) else number
    return None


def step(value: Any, what: str = "step") -> int:
    """A training step as a plain ``int``: an int, or a scalar that holds one, as a training
    loop has it at hand (a numpy integer or 0-d array, an eager tensor, ``optimizer.iterations``
    and other integer ``tf.Variable`` objects, a float with an integer value). ``TypeError`` for
    anything else (a bool, a string, a fraction, a tensor with more than one value, a graph
    tensor that needs a session run first) saying what was given
    (:class:`~sparktf.errors.ConfigTypeError`, a ``TypeError``)."""
    number = _scalar(value, what, "an int")
    if number != number or number in (math.inf, -math.inf) or number != int(number):
        raise ConfigTypeError(f"{what} must be an int, got {value!r}")
    return int(number)


def metric(value: Any, what: str) -> float:
    """A reported metric as a plain ``float``: any real number or scalar that holds one (numpy
    numbers and 0-d arrays, eager tensors, ``tf.Variable`` objects); NaN and infinities are kept
    (a diverging loss is worth seeing). ``TypeError`` for a bool, a string or anything that
    is not one number."""
    return float(_scalar(value, what, "a number"))


def _scalar(value: Any, what: str, kind: str):
    if isinstance(value, (bool, str, bytes)) or value is None:
        raise ConfigTypeError(f"{what} must be {kind}, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    dtype = getattr(value, "dtype", None)
    if dtype is not None and "bool" in str(dtype):  # a numpy/TF boolean scalar
        raise ConfigTypeError(f"{what} must be {kind}, got {value!r}")
    try:
        if getattr(dtype, "is_integer", False) or getattr(dtype, "kind", "") in ("i", "u"):
            return int(value)  # exact, even above 2**53
        return float(value)
    except Exception as exc:
        try:
            dims = tuple(getattr(value, "shape", ()))
        except Exception:
            dims = None
        hint = (
            f" (shape {dims}: one value only)"
            if dims
            else " (a graph tensor? pass the value that running it gave)"
            if type(value).__name__ == "SymbolicTensor" or dims is None
            else ""
        )
        raise ConfigTypeError(
            f"{what} must be {kind} or a scalar tensor/array that holds one, got "
            f"{type(value).__name__}{hint}: {exc}"
        ) from None
