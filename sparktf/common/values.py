"""Numbers as users pass them: numpy's integers and floats (and any other registered
``numbers.Integral`` / ``numbers.Real``) count as the plain numbers they are, a bool never does.

Every argument check of the driver, the nodes and :func:`sparktf.predict` reads counts and
seconds through these two functions and keeps the plain ``int`` / ``float`` they return, so a
count computed with numpy travels to the nodes, the messages and the logs as a plain number.
"""

from __future__ import annotations

import math
import numbers
from typing import Any


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
