"""Constraint operators and target resolution (Nomad's `checkConstraint` / `resolveTarget`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

from contracts import Node
from contracts.resources import NodeDeviceResource

# Targets whose value is unique per node: a group constrained on them cannot be judged by
# computed node class, so its evaluations are "escaped" and unblock on any capacity change.
_UNIQUE_PREFIXES = ("${node.unique.", "${attr.unique.", "${meta.unique.", "${unique.")


def is_escaped(target: str) -> bool:
    return target.startswith(_UNIQUE_PREFIXES)


def resolve_node_target(target: str, node: Node) -> tuple[str | None, bool]:
    """Resolve `${attr.x}`-style targets against a node; anything else is a literal."""
    if not target.startswith("${"):
        return target, True
    if not target.endswith("}"):
        return None, False
    path = target[2:-1]
    if path == "node.unique.id":
        return node.id, True
    if path == "node.datacenter":
        return node.datacenter, True
    if path == "node.unique.name":
        return node.name, True
    if path == "node.class":
        return node.node_class, True
    if path == "node.pool":
        return node.node_pool, True
    if path.startswith("attr."):
        value = node.attributes.get(path[5:])
        return value, value is not None
    if path.startswith("meta."):
        value = node.meta.get(path[5:])
        return value, value is not None
    return None, False


def resolve_device_target(target: str, device: NodeDeviceResource) -> tuple[str | None, bool]:
    if not target.startswith("${"):
        return target, True
    path = target[2:-1]
    if path == "device.vendor":
        return device.vendor, True
    if path == "device.type":
        return device.type, True
    if path == "device.model":
        return device.name, True
    if path == "device.ids":
        return ",".join(i.id for i in device.instances), True
    if path.startswith("device.attr."):
        value = device.attributes.get(path[12:])
        return value, value is not None
    return None, False


def check_constraint(
    operand: str, lval: str | None, rval: str | None, lfound: bool, rfound: bool
) -> bool:
    check = _OPERATORS.get(operand)
    if check is None:
        return False  # Nomad: an unknown operand never matches
    return check(lval, rval, lfound, rfound)


def _equal(lval: str | None, rval: str | None, lfound: bool, rfound: bool) -> bool:
    return lfound and rfound and lval == rval


def _not_equal(lval: str | None, rval: str | None, lfound: bool, rfound: bool) -> bool:
    return (lval if lfound else None) != (rval if rfound else None)


def _ordering(op: str) -> Callable[[str | None, str | None, bool, bool], bool]:
    def check(lval: str | None, rval: str | None, lfound: bool, rfound: bool) -> bool:
        if not (lfound and rfound) or lval is None or rval is None:
            return False
        order = _compare(lval, rval)
        if order is None:
            return False
        if op == "<":
            return order < 0
        if op == "<=":
            return order <= 0
        if op == ">":
            return order > 0
        return order >= 0

    return check


def _sign(a: float | str, b: float | str) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


def _compare(lval: str, rval: str) -> int | None:
    """-1, 0 or 1: as int64 if both parse, else float, else units, else lexical (Nomad's order);
    None when both carry units of different kinds."""
    try:
        return _sign(int(lval), int(rval))
    except ValueError:
        pass
    try:
        return _sign(float(lval), float(rval))
    except ValueError:
        pass
    lunit, runit = parse_quantity(lval), parse_quantity(rval)
    if lunit is not None and runit is not None:
        if lunit[1] != runit[1]:
            return None  # bytes against hertz: not comparable (Nomad's Attribute.Compare)
        return _sign(lunit[0], runit[0])
    return _sign(lval, rval)


def _regexp(lval: str | None, rval: str | None, lfound: bool, rfound: bool) -> bool:
    if not (lfound and rfound) or lval is None or rval is None:
        return False
    pattern = compiled_regexp(rval)
    return pattern is not None and pattern.search(lval) is not None


@lru_cache(maxsize=1024)
def compiled_regexp(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _split_set(value: str) -> set[str]:
    return {part.strip() for part in value.split(",") if part.strip()}


def _set_contains_all(lval: str | None, rval: str | None, lfound: bool, rfound: bool) -> bool:
    if not (lfound and rfound) or lval is None or rval is None:
        return False
    return _split_set(rval) <= _split_set(lval)


def _set_contains_any(lval: str | None, rval: str | None, lfound: bool, rfound: bool) -> bool:
    if not (lfound and rfound) or lval is None or rval is None:
        return False
    return bool(_split_set(rval) & _split_set(lval))


def _version(strict: bool) -> Callable[[str | None, str | None, bool, bool], bool]:
    def check(lval: str | None, rval: str | None, lfound: bool, rfound: bool) -> bool:
        if not (lfound and rfound) or lval is None or rval is None:
            return False
        return version_matches(lval, rval, strict=strict)

    return check


def _passthrough(lval: str | None, rval: str | None, lfound: bool, rfound: bool) -> bool:
    return True  # enforced by their own iterators (distinct_hosts / distinct_property)


_OPERATORS: dict[str, Callable[[str | None, str | None, bool, bool], bool]] = {
    "=": _equal,
    "==": _equal,
    "is": _equal,
    "!=": _not_equal,
    "not": _not_equal,
    "<": _ordering("<"),
    "<=": _ordering("<="),
    ">": _ordering(">"),
    ">=": _ordering(">="),
    "regexp": _regexp,
    "version": _version(strict=False),
    "semver": _version(strict=True),
    "set_contains": _set_contains_all,
    "set_contains_all": _set_contains_all,
    "set_contains_any": _set_contains_any,
    "is_set": lambda lval, rval, lfound, rfound: lfound,
    "is_not_set": lambda lval, rval, lfound, rfound: not lfound,
    "distinct_hosts": _passthrough,
    "distinct_property": _passthrough,
}


# ---------------------------------------------------------------------------------------------
# Versions: go-version style constraints ("version") and strict semver ("semver").

_IDENT = r"[0-9A-Za-z~-]+(?:\.[0-9A-Za-z~-]+)*"
# go-version's VersionRegexp: any number of segments; a prerelease that starts with a letter
# may leave out the dash ("1.0beta1").
_VERSION_RE = re.compile(
    rf"^v?(\d+(?:\.\d+)*)(?:-({_IDENT})|([A-Za-z~][0-9A-Za-z~-]*(?:\.[0-9A-Za-z~-]+)*))?"
    rf"(?:\+{_IDENT})?$"
)
# go-version's SemverRegexp (used by Nomad's semver constraints): the dash is required.
_SEMVER_RE = re.compile(rf"^v?(\d+(?:\.\d+)*)(?:-({_IDENT}))?()(?:\+{_IDENT})?$")
_CONSTRAINT_RE = re.compile(r"^\s*(=|!=|>=|<=|>|<|~>)?\s*(\S+)\s*$")


class Version(NamedTuple):
    segments: tuple[int, ...]  # padded to at least three, as go-version does
    given: int  # how many segments the text had (the pessimistic operator needs it)
    prerelease: str
    key: tuple[object, ...]  # total order: segments (trailing zeros dropped), then prerelease


def parse_version(text: str, strict: bool = False) -> Version | None:
    match = (_SEMVER_RE if strict else _VERSION_RE).match(text.strip())
    if match is None:
        return None
    given = tuple(int(g) for g in match.group(1).split("."))
    segments = given + (0,) * (3 - len(given))
    stripped = list(segments)
    while stripped and stripped[-1] == 0:
        stripped.pop()
    pre = match.group(2) or match.group(3) or ""
    # A prerelease sorts before the release; numeric identifiers compare numerically and
    # below alphanumeric ones; a longer list of equal identifiers sorts higher (semver 11).
    pre_key: tuple[object, ...] = (
        (0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
        if pre
        else (1,)
    )
    return Version(segments, len(given), pre, (tuple(stripped), pre_key))


def version_matches(value: str, constraint: str, strict: bool = False) -> bool:
    """Nomad's checkVersionMatch: the value is parsed leniently; `strict` selects Nomad's
    semver constraints (semver 2.0 ordering, no `~>`) over go-version's, where a prerelease
    only satisfies a range whose bound is a prerelease of the same version."""
    version = parse_version(value)
    if version is None:
        return False
    for part in constraint.split(","):
        match = _CONSTRAINT_RE.match(part)
        if match is None:
            return False
        op, text = match.group(1) or "=", match.group(2)
        if strict and op == "~>":
            return False
        bound = parse_version(text, strict)
        if bound is None:
            return False
        if not _version_check(op, version, bound, strict):
            return False
    return True


def _prerelease_ok(version: Version, bound: Version) -> bool:
    """go-version's prereleaseCheck."""
    if bound.prerelease and version.prerelease:
        return version.key[0] == bound.key[0]
    return not version.prerelease


def _version_check(op: str, version: Version, bound: Version, strict: bool) -> bool:
    v, c = version.key, bound.key
    if op == "=":
        return v == c
    if op == "!=":
        return v != c
    if op == "~>":
        return _pessimistic(version, bound)
    if not strict and not _prerelease_ok(version, bound):
        return False
    if op == ">":
        return v > c
    if op == ">=":
        return v >= c
    if op == "<":
        return v < c
    return v <= c


def _pessimistic(version: Version, bound: Version) -> bool:
    """go-version's constraintPessimistic: at least `bound`, with every given segment but the
    last one equal ("~> 1.2" is >= 1.2, < 2.0; "~> 1.2.3" is >= 1.2.3, < 1.3)."""
    if not _prerelease_ok(version, bound) or (bound.prerelease and not version.prerelease):
        return False
    if version.key < bound.key:
        return False
    cs = len(bound.segments)
    if cs > len(version.segments):
        return False
    if version.segments[: bound.given - 1] != bound.segments[: bound.given - 1]:
        return False
    return bound.segments[cs - 1] <= version.segments[cs - 1]


# ---------------------------------------------------------------------------------------------
# Unit-aware quantities for device attributes ("40 GiB", "1.5 GHz").

_UNITS: dict[str, tuple[float, str]] = {
    "b": (1, "bytes"),
    "kb": (1e3, "bytes"),
    "kib": (1024, "bytes"),
    "mb": (1e6, "bytes"),
    "mib": (1024**2, "bytes"),
    "gb": (1e9, "bytes"),
    "gib": (1024**3, "bytes"),
    "tb": (1e12, "bytes"),
    "tib": (1024**4, "bytes"),
    "hz": (1, "hertz"),
    "khz": (1e3, "hertz"),
    "mhz": (1e6, "hertz"),
    "ghz": (1e9, "hertz"),
    "w": (1, "watts"),
    "kw": (1e3, "watts"),
    "mw": (1e-3, "watts"),
}
_QUANTITY_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$")


def parse_quantity(text: str) -> tuple[float, str] | None:
    match = _QUANTITY_RE.match(text)
    if match is None:
        return None
    unit = _UNITS.get(match.group(2).lower())
    if unit is None:
        return None
    return float(match.group(1)) * unit[0], unit[1]
