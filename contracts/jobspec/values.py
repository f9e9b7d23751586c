"""Scalar coercion shared by the HCL and JSON front ends, with Nomad's typing rules.

HCL durations are Go duration strings ("30s", "1h30m") or bare numbers of nanoseconds, as in
jobspec2's decodeDuration; JSON durations are Go `time.Duration`, i.e. integer nanoseconds.
Records hold seconds (`*_s` fields). HCL, like cty, turns numbers and bools into strings where
a string is expected; nothing is turned into a number: `count = "3"` is an error.
"""

from __future__ import annotations

import re
from typing import Any

from contracts.jobspec.schema import Kind
from contracts.jobspec.where import Problems, Where, bad_value

NS_PER_S = 1_000_000_000

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION = re.compile(r"([0-9]*\.?[0-9]*)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds: "1h30m" -> 5400.0. Raises ValueError."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _DURATION.match(s, pos)
        if m is None or m.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def _hint(value: Any) -> str:
    if isinstance(value, str) and "${" in value:
        return " (drover does not evaluate HCL expressions or variables)"
    return ""


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _as_str(value: Any, hcl: bool) -> str | None:
    if isinstance(value, str):
        return value
    if hcl and isinstance(value, bool):
        return "true" if value else "false"
    if hcl and isinstance(value, int | float):
        return str(value)
    return None


# The integer kinds and their least value (None: any).
INT_FLOOR = {Kind.INT: None, Kind.POS_INT: 1, Kind.NONNEG_INT: 0}
# Kinds whose values of exactly this Python type `coerce_scalar` returns unchanged, in JSON
# and HCL alike: a walk takes them as they are, without a JSON path or a call per field.
AS_IS: dict[Kind, type] = {Kind.STR: str, Kind.INT: int, Kind.BOOL: bool}


def coerce_scalar(
    kind: Kind,
    value: Any,
    where: Where,
    problems: Problems,
    *,
    hcl: bool,
    choices: tuple[str, ...] = (),
) -> Any:
    """The typed value, or None after recording a problem naming where and what."""
    if kind in INT_FLOOR:
        number = _as_int(value)
        floor = INT_FLOOR[kind]
        if number is None or (floor is not None and number < floor):
            problems.errors.append(bad_value(where, kind.value, value, _hint(value)))
            return None
        return number
    if kind is Kind.BOOL:
        if not isinstance(value, bool):
            problems.errors.append(bad_value(where, kind.value, value, _hint(value)))
            return None
        return value
    if kind is Kind.DURATION:
        return _duration(value, where, problems, hcl=hcl)
    text = _as_str(value, hcl)
    if text is None:
        problems.errors.append(bad_value(where, "a string", value))
        return None
    if kind is Kind.CHOICE and text not in choices:
        problems.errors.append(where.at(f'"{text}" is not one of {", ".join(choices)}'))
        return None
    return text


def _duration(value: Any, where: Where, problems: Problems, *, hcl: bool) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) / NS_PER_S
    if hcl and isinstance(value, str):
        try:
            return parse_go_duration(value)
        except ValueError:
            pass
    expected = 'a duration like "30s" or "5m"' if hcl else "a duration in nanoseconds"
    problems.errors.append(bad_value(where, expected, value, _hint(value)))
    return None


def coerce_strings(
    value: Any, where: Where, problems: Problems, *, hcl: bool
) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        problems.errors.append(bad_value(where, Kind.STRS.value, value, _hint(value)))
        return None
    out: list[str] = []
    for i, item in enumerate(value):
        text = _as_str(item, hcl)
        if text is None:
            problems.errors.append(bad_value(where.index(i), "a string", item))
            return None
        out.append(text)
    return tuple(out)


def coerce_str_map(
    value: Any, where: Where, problems: Problems, *, hcl: bool
) -> dict[str, str] | None:
    if not isinstance(value, dict):
        problems.errors.append(bad_value(where, Kind.STR_MAP.value, value))
        return None
    out: dict[str, str] = {}
    for key, item in value.items():
        text = _as_str(item, hcl)
        if text is None:
            problems.errors.append(bad_value(where.child(str(key)), "a string", item))
            continue
        out[str(key)] = text
    return out
