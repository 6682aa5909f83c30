"""The settings table: every key checked the same way from an argument or the Spark conf,
every error naming the key; the docs' settings page lists exactly the table. No Spark needed."""

import pathlib
import re

import pytest

from sparktf.common import messages
from sparktf.common.settings import TABLE, InputMode, Settings, markdown_table
from sparktf.errors import ConfigError

SETTINGS_PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference" / "settings.md"


def test_defaults_leave_the_topology_to_the_slot_count():
    s = Settings.resolve({})
    assert s.num_executors is None and s.num_ps == 0 and s.master_node == "chief"
    assert s.input_mode is InputMode.TENSORFLOW
    assert (s.reservation_timeout, s.heartbeat_timeout, s.progress_timeout) == (120.0, 30.0, None)
    assert s.max_restarts == 0 and s.env == () and s.log_to_driver is True


def test_none_is_a_value_for_master_node_and_unset_for_conf_keys():
    s = Settings.resolve(
        {"spark.sparktf.heartbeatTimeout": "7"}, master_node=None, heartbeat_timeout=None
    )
    assert s.master_node is None and s.heartbeat_timeout == 7.0


def test_numpy_numbers_count_as_the_plain_numbers_they_are():
    import numpy as np

    s = Settings.resolve(
        {},
        num_executors=np.int64(3),
        num_ps=np.uint8(1),
        reservation_timeout=np.float32(60),
        heartbeat_timeout=np.int16(5),
    )
    assert (s.num_executors, s.num_ps, s.reservation_timeout, s.heartbeat_timeout) == (
        3,
        1,
        60.0,
        5.0,
    )
    assert type(s.num_executors) is int and type(s.reservation_timeout) is float
    for bad in (
        {"num_executors": np.bool_(True)},
        {"num_ps": True},
        {"num_ps": np.float64(1)},
        {"reservation_timeout": np.float64("nan")},
        {"heartbeat_timeout": False},
    ):
        with pytest.raises(ConfigError):
            Settings.resolve({}, **bad)


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({"reservation_timeout": "60"}, "reservation_timeout must be a positive number of seconds"),
        ({"num_executors": "4"}, "num_executors must be an int >= 1 or None, got '4'"),
        ({"num_executors": 0}, "num_executors must be an int >= 1"),
        ({"num_ps": 1.0}, "num_ps must be an int >= 0"),
        ({"env": [("A", "1")]}, "env must map str to str"),
        ({"env": {"A": 1}}, "env must map str to str"),
        ({"env": {"TF_CONFIG": "{}"}}, "env must not set TF_CONFIG"),
        ({"env": {"SPARKTF_NODE": "x", "A": "1"}}, "env must not set SPARKTF_NODE"),
        ({"master_node": "boss"}, "master_node must be one of 'chief', 'master' or None"),
        ({"eval_node": "yes"}, "eval_node must be True or False"),
        ({"input_mode": "spark"}, "input_mode must be sparktf.InputMode"),
        ({"heartbeat_timeout": -1}, "heartbeat_timeout must be a number of seconds >= 0"),
        ({"progress_timeout": True}, "progress_timeout must be a number of seconds >= 0"),
        ({"max_restarts": 1.5}, "max_restarts must be an int >= 0"),
        ({"log_dir": ""}, "log_dir must be a non-empty path"),
        ({"log_to_driver": 1}, "log_to_driver must be True or False"),
    ],
)
def test_a_bad_argument_names_its_key_and_what_is_valid(args, fragment):
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        Settings.resolve({}, **args)


@pytest.mark.parametrize(
    "conf, fragment",
    [
        ({"spark.sparktf.reservationTimeout": "soon"}, "spark.sparktf.reservationTimeout must be"),
        ({"spark.sparktf.heartbeatTimeout": "-3"}, "spark.sparktf.heartbeatTimeout must be"),
        ({"spark.sparktf.logToDriver": "maybe"}, "spark.sparktf.logToDriver must be true or false"),
        ({"spark.sparktf.tailLines": "0"}, "spark.sparktf.tailLines must be an int >= 1"),
        ({"spark.sparktf.maxRestarts": "2.5"}, "spark.sparktf.maxRestarts must be an int >= 0"),
    ],
)
def test_a_bad_spark_conf_value_gets_the_same_check_and_names_the_conf_key(conf, fragment):
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        Settings.resolve(conf)


def test_conf_values_are_typed_and_zero_turns_a_timeout_off():
    s = Settings.resolve(
        {
            "spark.sparktf.reservationTimeout": "45",
            "spark.sparktf.heartbeatTimeout": "0",
            "spark.sparktf.progressTimeout": "12.5",
            "spark.sparktf.logToDriver": "FALSE",
            "spark.sparktf.maxRestarts": "2",
            "spark.sparktf.spoolMaxBytes": "1000000",
        }
    )
    assert s.reservation_timeout == 45.0 and s.heartbeat_timeout is None
    assert s.progress_timeout == 12.5 and s.log_to_driver is False
    assert s.max_restarts == 2 and s.spool_max_bytes == 1000000


def test_an_argument_beats_the_conf():
    s = Settings.resolve({"spark.sparktf.reservationTimeout": "45"}, reservation_timeout=5)
    assert s.reservation_timeout == 5.0


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as err:
        Settings.resolve(
            {"spark.sparktf.tailLines": "x"}, num_ps=-1, env=[], reservation_timeout="60"
        )
    assert len(err.value.problems) == 4


def test_the_settings_page_lists_exactly_the_settings_table():
    text = SETTINGS_PAGE.read_text()
    assert markdown_table() in text, (
        "regenerate docs/reference/settings.md: python3 bin/gen_docs.py"
    )
    for s in TABLE:
        if s.conf:
            assert f"spark.sparktf.{s.conf}" in text


def test_every_control_message_is_in_the_catalogue_with_its_fields():
    assert messages.make("stop") == {"type": "stop"}
    with pytest.raises(ValueError, match="unknown control message"):
        messages.make("halt")
    with pytest.raises(ValueError, match="missing \\['final'\\]"):
        messages.make("feed_bound", bound=3)
    with pytest.raises(ValueError, match="unexpected \\['extra'\\]"):
        messages.make("heartbeat", step=1, rows=2, extra=3)


def test_log_dir_takes_a_path_object(tmp_path):
    assert Settings.resolve({}, log_dir=tmp_path / "logs").log_dir == str(tmp_path / "logs")


@pytest.mark.parametrize("bad", ["host:1234", "two words", "a/b", "5"])
def test_a_control_host_must_be_a_bare_host(bad):
    with pytest.raises(ConfigError, match="spark.sparktf.controlHost must be a host name"):
        Settings.resolve({"spark.sparktf.controlHost": bad})


def test_a_control_host_may_be_an_ipv6_address():
    assert Settings.resolve({"spark.sparktf.controlHost": "fe80::1"}).control_host == "fe80::1"
