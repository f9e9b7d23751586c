"""Cron specs of periodic jobs: Nomad's dialect (five fields or @macros) and next launches."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from contracts.cron import NS_PER_S, CronSpecError, check_spec, expand, next_launch, zone
from contracts.launch import PeriodicConfig


def ns(*args: int, tz: str = "UTC") -> int:
    return int(datetime(*args, tzinfo=zone(tz)).timestamp()) * NS_PER_S  # type: ignore[misc]


def test_macros_expand_to_five_fields() -> None:
    assert expand("@hourly") == "0 * * * *"
    assert expand("@DAILY") == "0 0 * * *"
    assert expand("  */5   * * * * ") == "*/5 * * * *"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("@sometimes", "unknown macro"),
        ("* * * *", "expected five fields"),
        ("0 0 0 * * * 2030", "got 7"),
        ("61 * * * *", "Invalid cron spec '61 * * * *'"),
        ("0 0 31 2 *", "Invalid cron spec"),
    ],
)
def test_bad_specs_are_named(spec: str, words: str) -> None:
    with pytest.raises(CronSpecError, match=re.escape(words)):
        check_spec(spec)


def test_the_next_launch_is_strictly_after_and_the_earliest_of_the_specs() -> None:
    config = PeriodicConfig(("0 * * * *", "30 8 * * *"))
    assert next_launch(config, ns(2026, 11, 27, 8, 7)) == ns(2026, 11, 27, 8, 30)
    assert next_launch(config, ns(2026, 11, 27, 8, 30)) == ns(2026, 11, 27, 9, 0)
    assert next_launch(PeriodicConfig(()), ns(2026, 1, 1)) is None


def test_a_time_zone_shifts_the_launch_and_keeps_local_time_across_daylight_saving() -> None:
    config = PeriodicConfig(("0 9 * * *",), time_zone="Europe/Berlin")
    # 09:00 in Berlin: 08:00 UTC in winter, 07:00 UTC in summer.
    assert next_launch(config, ns(2026, 1, 10)) == ns(2026, 1, 10, 8, 0)
    assert next_launch(config, ns(2026, 7, 10)) == ns(2026, 7, 10, 7, 0)
    assert next_launch(config, ns(2026, 7, 10)) == ns(2026, 7, 10, 9, 0, tz="Europe/Berlin")


def test_an_unknown_time_zone_is_named() -> None:
    with pytest.raises(CronSpecError, match="Invalid time zone 'Mars/Olympus'"):
        zone("Mars/Olympus")
    assert zone("") == zone("UTC") and datetime(2026, 1, 1, tzinfo=UTC)
