"""Cron specs of periodic jobs: checking them and finding the next launch.

The schedule arithmetic (ranges, steps, names, `L`, days of month OR days of week, and the
daylight-saving rules of Debian cron for specs in a time zone) is cronsim's, a small and
well-kept library; ours is Nomad's dialect around it. Nomad parses specs with
hashicorp/cronexpr: five fields or an `@` macro are what its docs and users write, and are
what drover accepts (cronexpr's six- and seven-field forms, with a year and seconds, are
refused with an error that says so).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from contracts.launch import CRON_MACROS, PeriodicConfig

NS_PER_S = 1_000_000_000


class CronSpecError(ValueError):
    """A spec or time zone that cannot be used; the message names it."""


def expand(spec: str) -> str:
    """The five-field form of `spec` (macros expanded); raises CronSpecError."""
    text = spec.strip()
    if text.startswith("@"):
        if text.lower() not in CRON_MACROS:
            raise CronSpecError(
                f"Invalid cron spec {spec!r}: unknown macro (one of {', '.join(CRON_MACROS)})"
            )
        return CRON_MACROS[text.lower()]
    fields = text.split()
    if len(fields) != 5:
        raise CronSpecError(
            f"Invalid cron spec {spec!r}: expected five fields (minute hour day-of-month"
            f" month day-of-week) or an @macro, got {len(fields)}"
        )
    return " ".join(fields)


@lru_cache(maxsize=1024)
def _checked(spec: str) -> str:
    expanded = expand(spec)
    try:
        CronSim(expanded, datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC")))
    except CronSimError as exc:
        raise CronSpecError(f"Invalid cron spec {spec!r}: {exc}") from None
    return expanded


def check_spec(spec: str) -> None:
    """Raise CronSpecError if `spec` is not a cron spec drover can schedule."""
    _checked(spec)


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` ("" is UTC); raises CronSpecError."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise CronSpecError(f"Invalid time zone {name!r}") from None


def next_launch(config: PeriodicConfig, after_ns: int) -> int | None:
    """The first launch strictly after `after_ns` (unix ns) any of the specs gives, in the
    config's time zone; None if none ever comes (e.g. `0 0 31 2 *`) or no spec is set."""
    tz = zone(config.time_zone)
    after = datetime.fromtimestamp(after_ns / NS_PER_S, tz)
    launches = []
    for spec in config.crons:
        try:
            launches.append(next(CronSim(_checked(spec), after)))
        except (StopIteration, CronSimError):
            continue
    if not launches:
        return None
    return int(min(launches).timestamp()) * NS_PER_S
