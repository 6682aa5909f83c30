"""The driver's partition rules that need no Spark."""

import pytest

from sparktf.driver.job import feedbound


@pytest.mark.parametrize(
    "counts,moved",
    [
        ([500, 500], 0),
        ([501, 500], 0),  # the odd row: held back, it cannot be split
        ([502, 500], 1),
        ([501, 499], 1),  # 1,000 rows over 2 nodes: none held back
        ([50000, 50040], 20),
        ([0, 0], 0),
        ([10, 0], 5),
        ([334, 333, 333], 0),
        ([335, 333, 332], 1),
    ],
)
def test_shares_move_rows_unless_only_the_remainder_would_be_held_back(counts, moved):
    target, moves = feedbound.moves(counts)
    assert sum(rows for _, _, rows in moves) == moved
    assert feedbound.held_back(counts) == sum(counts) % len(counts)


@pytest.mark.parametrize(
    "counts",
    [
        [1000, 10],
        [10, 1000],
        [0, 7],
        [7, 0, 0],
        [5, 5, 20],
        [300, 0, 0, 1],
        [3, 3, 3],
        [1, 2],
        [0, 0],
        [100, 1, 1, 1, 97],
    ],
)
def test_moves_equalize_the_shares_and_hold_back_less_than_a_row_per_node(counts):
    target, moves = feedbound.moves(counts)
    assert target == sum(counts) // len(counts)
    given = [0] * len(counts)
    taken = [0] * len(counts)
    for giver, taker, rows in moves:
        assert rows > 0 and giver != taker
        assert counts[giver] > target > counts[taker] or counts[taker] < target
        given[giver] += rows
        taken[taker] += rows
    for i, c in enumerate(counts):
        assert not (given[i] and taken[i])  # a node gives or takes, never both
        assert c + taken[i] - given[i] >= target  # every share reaches the target
        assert given[i] <= max(0, c - target) and c + taken[i] <= max(c, target)
    assert sum(c + taken[i] - given[i] - target for i, c in enumerate(counts)) == sum(counts) % len(
        counts
    )  # held back: fewer than one row per node


def test_moves_are_none_for_equal_shares_and_in_rank_order_otherwise():
    assert feedbound.moves([4, 4, 4]) == (4, [])
    assert feedbound.moves([10, 0, 2]) == (4, [(0, 1, 4), (0, 2, 2)])
    assert feedbound.moves([0, 9, 9]) == (6, [(1, 0, 3), (2, 0, 3)])
