"""Placement rules shared by jobs, groups, tasks and device requests."""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.fast_init import install_fast_inits

# Operators Nomad accepts in `constraint` and `affinity` blocks.
CONSTRAINT_OPERATORS = frozenset(
    {
        "=",
        "==",
        "is",
        "!=",
        "not",
        "<",
        "<=",
        ">",
        ">=",
        "regexp",
        "version",
        "semver",
        "set_contains",
        "set_contains_all",
        "set_contains_any",
        "is_set",
        "is_not_set",
        "distinct_hosts",
        "distinct_property",
    }
)
AFFINITY_OPERATORS = CONSTRAINT_OPERATORS - {"distinct_hosts", "distinct_property"}


@dataclass(frozen=True, slots=True)
class Constraint:
    l_target: str = ""
    r_target: str = ""
    operand: str = "="

    def __str__(self) -> str:
        if self.operand in ("distinct_hosts", "is_set", "is_not_set"):
            return f"{self.l_target} {self.operand}".strip()
        return f"{self.l_target} {self.operand} {self.r_target}"


@dataclass(frozen=True, slots=True)
class Affinity:
    l_target: str = ""
    r_target: str = ""
    operand: str = "="
    weight: int = 50

    def __str__(self) -> str:
        return f"{self.l_target} {self.operand} {self.r_target} ({self.weight})"


@dataclass(frozen=True, slots=True)
class SpreadTarget:
    value: str = ""
    percent: int = 0


@dataclass(frozen=True, slots=True)
class Spread:
    attribute: str = ""
    weight: int = 50
    spread_target: tuple[SpreadTarget, ...] = field(default_factory=tuple)


install_fast_inits(__name__)
