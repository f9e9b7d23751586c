"""dstack's `Range[T]` (core/models/resources.py): an inclusive interval of ints or floats with
optional bounds.

Accepted forms: `N` (min = max = N), `"a.."`, `"..b"`, `"a..b"` (spaces ignored) and
`{min, max}`. An empty range (`".."`, `{}`) and min > max are errors. Bounds here are counts
and sizes, so they must also be non-negative (a drover rule; dstack leaves that to the fields).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from contracts.dstack.fields import (
    MAX_NUMBER,
    Problems,
    check_keys,
    expect_mapping,
    expect_str,
    join,
    number,
    show,
)
from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits

N = TypeVar("N", int, float)

_INT = re.compile(r"^\d{1,16}$")


@dataclass(frozen=True, slots=True)
class Range(Generic[N]):
    """`min..max`, inclusive; a None bound is open. At least one bound is set."""

    min: N | None = None
    max: N | None = None

    def __post_init__(self) -> None:
        if self.min is None and self.max is None:
            raise ValidationError("range: empty range '..' (set min, max or both)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValidationError(f"range: min {self.min} is greater than max {self.max}")

    def contains(self, value: float) -> bool:
        """Inclusive on both ends; an open bound accepts everything on its side."""
        if self.min is not None and value < self.min:
            return False
        return self.max is None or value <= self.max

    @property
    def exact(self) -> bool:
        return self.min is not None and self.min == self.max

    def __str__(self) -> str:
        low = "" if self.min is None else number(self.min)
        high = "" if self.max is None else number(self.max)
        return low if self.exact else f"{low}..{high}"


def intersect(a: Range[N], b: Range[N]) -> Range[N] | None:
    """The overlap of two ranges (dstack `Range.intersect`), None when they are disjoint."""
    low = a.min if b.min is None else b.min if a.min is None else max(a.min, b.min)
    high = a.max if b.max is None else b.max if a.max is None else min(a.max, b.max)
    if low is not None and high is not None and low > high:
        return None
    return Range(low, high)


def parse_range(value: object, where: str, bound: Callable[[object, str], N]) -> Range[N]:
    """Parse any accepted form, reading each bound with `bound(raw, where)`."""
    at_min = at_max = where
    if isinstance(value, str):
        text = expect_str(value, where).replace(" ", "")
        if text.count("..") > 1:
            raise ValidationError(f"{where}: expected 'a..b', got {show(value)}")
        if ".." in text:
            raw_min, _, raw_max = text.partition("..")
            if not raw_min and not raw_max:
                raise ValidationError(f"{where}: empty range in {show(value)}")
            pair: tuple[object, object] = (raw_min or None, raw_max or None)
        else:
            pair = (text, text)
    elif isinstance(value, Mapping):
        data = expect_mapping(value, where)
        at_min, at_max = join(where, "min"), join(where, "max")
        unknown = check_keys(data, ("min", "max"), where)
        if unknown:
            raise ValidationError(unknown)
        pair = (data.get("min"), data.get("max"))
        if pair == (None, None):
            raise ValidationError(f"{where}: empty range in {show(value)}")
    else:
        pair = (value, value)
    problems = Problems()
    low = None if pair[0] is None else problems.run(lambda: bound(pair[0], at_min))
    if pair[1] is pair[0]:
        high = low
    else:
        high = None if pair[1] is None else problems.run(lambda: bound(pair[1], at_max))
    problems.raise_if_any()
    if low is not None and high is not None and low > high:
        shown = f"min {number(low)} is greater than max {number(high)}"
        raise ValidationError(f"{where}: {shown} in {show(value)}")
    return Range(low, high)


def int_bound(value: object, where: str) -> int:
    """A non-negative integer, given as an int or a digit string."""
    if isinstance(value, str) and _INT.match(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{where}: expected a non-negative integer, got {show(value)}")
    if not 0 <= value <= MAX_NUMBER:
        raise ValidationError(f"{where}: {value} is out of range 0..{MAX_NUMBER}")
    return value


def parse_int_range(value: object, where: str) -> Range[int]:
    """`Range[int]`: `2`, `"2.."`, `"..8"`, `"1..2"`, `{min: 1, max: 2}`."""
    return parse_range(value, where, int_bound)


install_fast_inits(__name__)
