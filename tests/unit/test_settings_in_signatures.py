"""Each setting is written once, in :data:`sparktf.common.settings.TABLE`; the calls that take
settings as arguments agree with it. For ``sparktf.run``, ``Cluster.train`` and
``Cluster.inference``: the parameters that are settings are exactly the table's rows of that
call, each defaults to the table's default (or to None, "unset", where the Spark conf may set
it), and the docstring documents each. Read by AST: no import of pyspark."""

import ast
import os

import pytest

from sparktf.common import settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, "sparktf", "driver", "cluster.py")
#: The parameters of each call that are not settings: the data, the function, the call's own
#: deadline, a script's files.
NOT_SETTINGS = {
    "run": {"sc", "main_fn", "args", "py_files"},
    "train": {"self", "data", "timeout"},
    "inference": {"self", "data", "output_schema", "timeout"},
}


def _function(name):
    tree = ast.parse(open(CLUSTER).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise AssertionError(f"no {name} in {CLUSTER}")


def _parameters(fn):
    """name -> its default's source (None: no default)."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = {p.arg: d for p, d in zip(positional, defaults)}
    out.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults)})
    return {name: (None if d is None else ast.unparse(d)) for name, d in out.items()}


@pytest.mark.parametrize("call", sorted(settings.CALLS))
def test_a_calls_setting_parameters_are_the_tables_rows_with_its_defaults(call):
    fn = _function(call)
    params = _parameters(fn)
    rows = {s.name: s for s in settings.TABLE if s.arg in settings.CALLS[call]}
    assert set(params) - NOT_SETTINGS[call] == set(rows)
    wrong = {
        name: params[name]
        for name, s in rows.items()
        if params[name] != f"default('{name}')"
        and not (params[name] == "None" and (s.conf or s.default is None))
    }
    assert wrong == {}, "defaults not read from the table: " + repr(wrong)
    doc = ast.get_docstring(fn) or ""
    assert [n for n in rows if n not in doc] == []


def test_every_row_of_a_call_is_checked_by_the_table_with_the_argument_named():
    checked, problems = settings.call_problems(
        "train",
        {"num_epochs": 0, "feed_timeout": 5, "shuffle": "no", "equalize": 1, "rebalance": None},
    )
    assert problems == [
        "num_epochs must be an int >= 1, got 0",
        "shuffle must be True or False, got 'no'",
        "equalize must be True, False or None, got 1",
    ]
    assert checked == {"feed_timeout": 5.0, "rebalance": None}
