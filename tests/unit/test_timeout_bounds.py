"""Every timeout sparktf takes is a finite number of seconds: ``inf``, NaN, negatives and
absurd values (past 1e9 s, where the standard library's waits overflow: ``settimeout(inf)``
raises OverflowError deep inside; under a millisecond, a wait that is none) are refused when
the job starts, each naming its setting (argument and Spark conf). 0 is refused where it is
no timeout, and means "off" only where the setting says so. Pure: no Spark job."""

import math

import pytest

from sparktf.common import settings
from sparktf.common.settings import Settings
from sparktf.driver import arguments

#: Every setting of the table that is a number of seconds.
TIMEOUTS = [
    s
    for s in settings.TABLE
    if s.check in (settings.seconds, settings.seconds_or_zero, settings.seconds_or_off)
]
BAD = [math.inf, -math.inf, math.nan, -1, -0.5, 1e10, 1e300]


def test_the_table_has_its_timeouts():
    names = {s.name for s in TIMEOUTS}
    assert {"reservation_timeout", "heartbeat_timeout", "feed_timeout", "stop_grace"} <= names


@pytest.mark.parametrize("setting", TIMEOUTS, ids=lambda s: s.name)
@pytest.mark.parametrize("value", BAD, ids=repr)
def test_inf_negative_and_absurd_timeouts_are_refused_naming_the_setting(setting, value):
    with pytest.raises(settings._Invalid):
        setting.check(value)
    if setting.arg == "run":
        with pytest.raises(ValueError, match=f"{setting.name} must be"):
            Settings.resolve(**{setting.name: value})
    if setting.conf:
        key = f"spark.sparktf.{setting.conf}"
        with pytest.raises(ValueError, match=key):
            Settings.resolve({key: repr(value) if not math.isinf(value) else str(value)})


@pytest.mark.parametrize("setting", TIMEOUTS, ids=lambda s: s.name)
def test_zero_is_refused_unless_it_means_off_or_no_wait(setting):
    if setting.check is settings.seconds:
        with pytest.raises(settings._Invalid):
            setting.check(0)
        with pytest.raises(settings._Invalid):
            setting.check(1e-6)  # a wait that is none
    elif setting.check is settings.seconds_or_off:
        assert setting.check(0) is None  # documented: 0 turns it off
        assert any(w in setting.doc for w in ("0: off", "0 or unset: off", "0: warn only"))
    else:
        assert setting.check(0) == 0  # stop_grace: SIGKILL at once


@pytest.mark.parametrize("value", [*BAD, 0, 1e-6])
def test_the_calls_timeouts_are_bounded_too(value):
    problems = []
    assert arguments.deadline(value, problems) is None
    assert problems and problems[0].startswith("timeout must be")
    with pytest.raises(ValueError, match="timeout must be"):
        arguments.check_shutdown(0, value)
    assert any(
        p.startswith("feed_timeout must be")
        for p in arguments.feed_problems(None, None, 1, value, False, False, None)
    )


@pytest.mark.parametrize("value", [math.inf, math.nan, -1, 1e10])
def test_shutdowns_grace_is_bounded(value):
    with pytest.raises(ValueError, match="grace_secs must be"):
        arguments.check_shutdown(value, None)


def test_sane_timeouts_still_pass():
    s = Settings.resolve(
        {"spark.sparktf.stopGrace": "0"}, reservation_timeout=0.5, heartbeat_timeout=0
    )
    assert (s.reservation_timeout, s.heartbeat_timeout, s.stop_grace) == (0.5, None, 0)
    assert arguments.check_shutdown(2, 3600)[0] == 2
