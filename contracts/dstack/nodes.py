"""dstack's `FleetNodesSpec` (core/models/fleets.py): how many instances a fleet holds.

`nodes` is an int `N` (min = target = max = N), a range string `"a..b"` / `"..b"` / `"a.."`, or
`{min, target, max}`. A missing min is 0, a missing target equals min, a missing max is
unlimited. Valid iff 0 <= min <= target <= max. HEAD provisions `target` instances and grows up
to `max`; only instances above `min` are idle-terminated. Drover bounds every count by
MAX_NODES so that no input can ask for unbounded work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from contracts.dstack.fields import (
    MAX_NODES,
    Problems,
    check_keys,
    expect_mapping,
    expect_str,
    join,
    show,
)
from contracts.dstack.ranges import int_bound
from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits


@dataclass(frozen=True, slots=True)
class FleetNodesSpec:
    min: int = 0
    target: int = 0
    max: int | None = None  # None: unlimited

    def __post_init__(self) -> None:
        problems = [
            f"nodes: {name} {value} is out of range 0..{MAX_NODES}"
            for name, value in (("min", self.min), ("target", self.target), ("max", self.max))
            if value is not None and not 0 <= value <= MAX_NODES
        ]
        problems += _order_problems(self.min, self.target, self.max, "nodes", "")
        if problems:
            raise ValidationError(problems)

    def __str__(self) -> str:
        high = "" if self.max is None else str(self.max)
        return f"{self.min}..{high} (target {self.target})"


def _order_problems(low: int, target: int, high: int | None, where: str, shown: str) -> list[str]:
    suffix = f" in {shown}" if shown else ""
    problems = []
    if low > target:
        problems.append(f"{where}: min {low} is greater than target {target}{suffix}")
    if high is not None and low > high:
        problems.append(f"{where}: min {low} is greater than max {high}{suffix}")
    elif high is not None and target > high:
        problems.append(f"{where}: target {target} is greater than max {high}{suffix}")
    return problems


def _count(value: object, where: str) -> int:
    """A node count 0..MAX_NODES, given as an int or a digit string."""
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= MAX_NODES:
        raise ValidationError(f"{where}: {value} is out of range 0..{MAX_NODES}")
    count = int_bound(value, where)
    if count > MAX_NODES:
        raise ValidationError(f"{where}: {count} is out of range 0..{MAX_NODES}")
    return count


def parse_nodes(value: object, where: str = "nodes") -> FleetNodesSpec:
    """A FleetNodesSpec from `N`, `"a..b"`, `"..b"`, `"a.."` or `{min, target, max}`."""
    problems = Problems()
    if isinstance(value, Mapping):
        data = expect_mapping(value, where)
        for problem in check_keys(data, ("min", "target", "max"), where):
            problems.add(problem)
        given = {key: data[key] for key in ("min", "target", "max") if data.get(key) is not None}
        raw = {key: problems.run(_count, item, join(where, key)) for key, item in given.items()}
        low = raw.get("min") or 0
        target = raw.get("target")
        target = low if target is None else target
        high = raw.get("max")
    elif isinstance(value, str):
        text = expect_str(value, where).replace(" ", "")
        if text == "..":
            raise ValidationError(f"{where}: empty range in {show(value)}")
        if text.count("..") > 1:
            raise ValidationError(f"{where}: expected 'a..b', 'a..' or '..b', got {show(value)}")
        raw_min, dots, raw_max = text.partition("..")
        low = (problems.run(_count, raw_min, where) or 0) if raw_min else 0
        high = problems.run(_count, raw_max, where) if raw_max else None
        target = low
        if not dots:
            high = low
    else:
        high = low = target = _count(value, where)
    problems.raise_if_any()
    order = _order_problems(low, target, high, where, show(value))
    if order:
        raise ValidationError(order)
    return FleetNodesSpec(min=low, target=target, max=high)


install_fast_inits(__name__)
