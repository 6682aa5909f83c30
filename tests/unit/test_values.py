"""Numbers as users pass them (sparktf.common.plain_numbers): counts, seconds, steps, metrics."""

import math

import numpy as np
import pytest

from sparktf.common import plain_numbers


class _Holder:
    """A scalar as tensor libraries hold one: no numbers ABC, only the conversions."""

    def __init__(self, value, dtype):
        self.value, self.dtype, self.shape = value, dtype, ()

    def __float__(self):
        return float(self.value)

    def __int__(self):
        return int(self.value)


@pytest.mark.parametrize(
    "given, expected",
    [
        (7, 7),
        (np.int64(7), 7),
        (np.array(7), 7),
        (np.uint8(3), 3),
        (12.0, 12),
        (np.float32(5.0), 5),
        (_Holder(9, np.dtype("int64")), 9),
        (2**60, 2**60),
        (_Holder(2**60 + 1, np.dtype("int64")), 2**60 + 1),
    ],
)
def test_a_step_may_be_any_scalar_that_holds_an_int(given, expected):
    got = plain_numbers.step(given)
    assert got == expected and type(got) is int


@pytest.mark.parametrize(
    "given, fragment",
    [
        (True, "step must be an int, got True"),
        ("7", "step must be an int, got '7'"),
        (None, "must be an int"),
        (1.5, "must be an int, got 1.5"),
        (float("nan"), "must be an int"),
        (np.array([1, 2]), "shape (2,): one value only"),
        (np.bool_(True), "must be an int"),
        (object(), "must be an int or a scalar tensor/array that holds one, got object"),
    ],
)
def test_a_step_that_is_not_one_whole_number_is_a_type_error_that_says_so(given, fragment):
    with pytest.raises(TypeError) as err:
        plain_numbers.step(given)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    "given, expected",
    [
        (0.5, 0.5),
        (np.float32(0.25), 0.25),
        (np.array(1.5), 1.5),
        (3, 3.0),
        (_Holder(0.75, np.dtype("float32")), 0.75),
        (float("inf"), float("inf")),
    ],
)
def test_a_metric_may_be_any_scalar_that_holds_a_number(given, expected):
    got = plain_numbers.metric(given, "loss")
    assert got == expected and type(got) is float


def test_a_nan_metric_is_kept_and_a_string_is_refused():
    assert math.isnan(plain_numbers.metric(float("nan"), "loss"))
    with pytest.raises(TypeError, match="ctx.report: metric 'loss' must be a number, got '0.1'"):
        plain_numbers.metric("0.1", "ctx.report: metric 'loss'")
