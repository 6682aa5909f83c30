"""The driver's partition rules that need no Spark."""

import pytest

from sparktf.driver import partition


@pytest.mark.parametrize("counts,ok", [
    ([500, 500], True), ([501, 500], True), ([502, 500], True), ([503, 500], False),
    ([50000, 50040], True), ([50000, 50120], False), ([0, 0], True), ([10, 0], False)])
def test_partitions_equal_enough_are_fed_without_a_shuffle(counts, ok):
    assert partition.tolerable(counts) is ok
