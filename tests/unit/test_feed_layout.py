"""train()'s choice between feeding the data as it is and dealing it out over a shuffle, from
what Spark knows of its partitions (sparktf.driver.layout.decide): no Spark needed."""

import pytest

from sparktf.driver.layout import Known, decide
from sparktf.errors import ConfigError

CACHED = Known(2, "cached DataFrame")
UNKNOWN = Known(None, "a shuffle adaptive execution may resize (ENSURE_REQUIREMENTS)")
UNION = Known(2, "RDD", ready=False)


@pytest.mark.parametrize(
    "known, nodes, trainers, rebalance, shuffled, said",
    [
        (CACHED, 2, 2, None, False, "feeding 2 partitions as they are (cached DataFrame, 2 "),
        (CACHED, 2, 2, False, False, "feeding 2 partitions as they are (cached DataFrame"),
        (CACHED, 2, 2, True, True, "shuffling into 2 partitions: rebalance=True"),
        (Known(5, "spark.range"), 2, 2, None, True, "spark.range: 5 partition(s) for 2 "),
        (UNKNOWN, 2, 2, None, True, "unknown until Spark runs the data (a shuffle adaptive"),
        (CACHED, 3, 2, None, True, "3 nodes of which 2 train"),
        (Known(3, "RDD"), 3, 2, None, True, "3 nodes of which 2 train"),
        (UNION, 2, 2, None, True, "cannot run a barrier stage straight over it"),
        (UNION, 2, 2, False, False, "feeding 2 partitions as they are (RDD"),  # Spark says why
    ],
)
def test_the_data_is_fed_as_it_is_only_when_spark_knows_it_fits(
    known, nodes, trainers, rebalance, shuffled, said
):
    decision = decide(known, nodes, trainers, rebalance)
    assert decision.rebalance is shuffled
    assert said in decision.why


@pytest.mark.parametrize(
    "known, nodes, trainers, hint",
    [
        (UNKNOWN, 2, 2, "repartition(n) or cache it in 2 partitions"),
        (Known(5, "a file scan's splits"), 2, 2, "repartition(2)"),
        (CACHED, 3, 2, "a ps or an evaluator takes no rows"),
    ],
)
def test_rebalance_false_that_cannot_be_honoured_says_what_to_change(known, nodes, trainers, hint):
    with pytest.raises(ConfigError, match="rebalance=False cannot be honoured") as err:
        decide(known, nodes, trainers, False)
    assert hint in str(err.value) and "leave rebalance unset" in str(err.value)
