"""Go-style durations ("10s", "500ms", "1h30m"), the form Nomad job files use for times."""

from __future__ import annotations

import re

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign, as Go accepts
    "μs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# Two-letter units first, so "5ms" is not read as five minutes followed by junk.
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go `time.ParseDuration` string; raises ValueError.

    Unlike Go, a sign is not accepted: every duration drover reads must be non-negative.
    """
    if text == "0":
        return 0.0
    total, pos = 0.0, 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(text):
        raise ValueError(f"invalid duration {text!r}")
    return total


def duration_seconds(value: object) -> float:
    """A config value that is a duration string or a number of seconds; raises ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f'expected a duration such as "10s", got {value!r}')
    seconds = parse_duration(value) if isinstance(value, str) else float(value)
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"invalid duration {value!r}")
    return seconds
