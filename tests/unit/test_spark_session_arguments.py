"""sparktf.spark_session's arguments are checked before anything starts: each bad one is a
ConfigError that names it and what to pass instead (no JVM: the unit tier forbids one)."""

import pytest

import sparktf


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"app_name": ""}, "app_name must be a non-empty str"),
        ({"app_name": 3}, "app_name must be a non-empty str"),
        ({"conf": [("spark.master", "local[1]")]}, "conf must be a mapping"),
        ({"conf": {"master": "local[1]"}}, "'master' is not a Spark setting"),
        ({"conf": {"spark.executor.cores": [2]}}, "must be a str, int, float or bool"),
        ({"py_files": ["/no/such/module.py"]}, "'/no/such/module.py' does not exist"),
        ({"py_files": [3]}, "py_files must be paths"),
        ({"preload": 5}, "preload must be module names"),
        ({"preload": ("tensor flow",)}, "preload must be module names"),
        ({"warm_up": "all"}, "warm_up must be True, False, 'dataframes', 'rdds' or 'both'"),
        ({"warm_up": 1}, "warm_up must be True, False"),
        ({"log_level": "LOUD"}, "log_level must be one of OFF, FATAL, ERROR, WARN"),
        ({"master": ""}, "master must be a Spark master URL such as 'local[2]'"),
    ],
)
def test_a_bad_argument_is_named_before_spark_starts(kwargs, says):
    with pytest.raises(sparktf.ConfigError, match="sparktf.spark_session: .*" + _re(says)):
        sparktf.spark_session(**kwargs)


def _re(text):
    import re

    return re.escape(text)


def test_the_arguments_that_are_good_become_spark_settings(tmp_path):
    from sparktf.session import _start_up_arguments

    module = tmp_path / "helper.py"
    module.write_text("X = 1\n")
    files, modules, kinds, opts = _start_up_arguments(
        "app",
        {"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": False},
        str(module),  # one path alone, as a str
        "tensorflow, tf_keras",
        "both",
        "error",
    )
    assert files == [str(module)]
    assert modules == ("tensorflow", "tf_keras")
    assert kinds == ("dataframes", "rdds")
    assert opts == {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
    assert _start_up_arguments("app", None, (), None, False, None)[1:] == (None, (), {})
