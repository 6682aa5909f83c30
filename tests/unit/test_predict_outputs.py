"""What ``sparktf.predict`` writes (``outputs._output_plan``): which outputs of the signature,
as which types, into which columns, read from its arguments on the driver; every mismatch
named at once with what to change. Pure: no Spark, no TensorFlow."""

import pytest

from sparktf.batch_prediction import outputs
from sparktf.batch_prediction.outputs import _Outputs

COLUMNS = ["id", "features"]


@pytest.mark.parametrize(
    "col, typ, key, plan",
    [
        ("prediction", "double", None, _Outputs((None,), ("double",), ("prediction",))),
        ("p", "array<float>", "probs", _Outputs(("probs",), ("array<float>",), ("p",))),
        (["p"], "long", "label", _Outputs(("label",), ("long",), ("p",))),
        (
            "out",
            ["long", "array<float>"],
            ["label", "probs"],
            _Outputs(("label", "probs"), ("long", "array<float>"), ("out",), struct=True),
        ),
        ("out", "double", ["a", "b"], _Outputs(("a", "b"), ("double", "double"), ("out",), True)),
        (
            ["l", "p"],
            ["int", "array<double>"],
            ["label", "probs"],
            _Outputs(("label", "probs"), ("int", "array<double>"), ("l", "p")),
        ),
        (
            ("l", "p"),
            "float",
            ("label", "probs"),
            _Outputs(("label", "probs"), ("float", "float"), ("l", "p")),
        ),
    ],
)
def test_outputs_are_read_from_the_arguments(col, typ, key, plan):
    problems = []
    assert outputs._output_plan(col, typ, key, COLUMNS, problems) == plan
    assert problems == []


@pytest.mark.parametrize(
    "col, typ, key, says",
    [
        (
            "p",
            "string",
            None,
            ["output_type must be one of ['float', 'double', 'int', 'long', 'array<float>'"],
        ),
        ("p", "array<str>", None, ["output_type must be one of"]),
        ("p", ["long", "double"], "label", ["output_type lists 2 types for 1 output (['label'])"]),
        ("p", ["long", "double", "float"], ["a", "b"], ["output_type lists 3 types for 2 outputs"]),
        (
            ["a", "b"],
            "double",
            None,
            [
                "output_col names 2 columns for 1 output: name the "
                "signature's outputs to write in output_key"
            ],
        ),
        (
            ["a", "b", "c"],
            "double",
            ["x", "y"],
            [
                "output_col names 3 columns for 2 outputs: give "
                "one column per output_key, or one name for a "
                "struct column"
            ],
        ),
        ("id", "double", None, ["output_col 'id' is already a column"]),
        (["id", "features"], "double", ["a", "b"], ["output_col ['id', 'features'] are already"]),
        (
            ["a", "a"],
            "double",
            ["x", "y"],
            ["output_col must be a name or a list of distinct names"],
        ),
        ("p", "double", ["x", "x"], ["output_key must be a name or a list of distinct names"]),
        ("p", "double", [], ["output_key must be"]),
        ("p", "double", 3, ["output_key must be"]),
        (7, "double", None, ["output_col must be"]),
        ("", "double", None, ["output_col must be"]),
        (
            "id",
            "int8",
            3,
            ["output_col 'id' is already", "output_key must be", "output_type must be"],
        ),
    ],
)
def test_outputs_that_do_not_add_up_are_named_with_what_to_change(col, typ, key, says):
    problems = []
    assert outputs._output_plan(col, typ, key, COLUMNS, problems) is None
    assert len(problems) == len(says), problems
    for problem, said in zip(sorted(problems), sorted(says)):
        assert problem.startswith(said), problem


@pytest.mark.parametrize(
    "typ, spark, arrow",
    [
        ("float", "float", "float"),
        ("double", "double", "double"),
        ("int", "int", "int32"),
        ("long", "bigint", "int64"),
        ("array<float>", "array<float>", "list<item: float>"),
        ("array<double>", "array<double>", "list<item: double>"),
        ("array<int>", "array<int>", "list<item: int32>"),
        ("array<long>", "array<bigint>", "list<item: int64>"),
    ],
)
def test_each_output_type_is_the_spark_and_arrow_type_of_its_name(typ, spark, arrow):
    assert outputs._spark_type(typ).simpleString() == spark
    assert str(outputs._arrow_type(typ)) == arrow


def test_the_plan_crosses_to_the_executors_as_plain_data():
    import pickle

    plan = _Outputs(("label", "probs"), ("long", "array<float>"), ("out",), True)
    assert pickle.loads(pickle.dumps(plan)) == plan
