"""Field checks shared by the dstack parsers: input limits, typed getters that name the field
path and the bad value, unknown-key reports, durations, env maps and pass-through plain data.

Every parser in this package reports problems as strings `"<path>: <what> <value>"`; a
`Problems` collector gathers them so that one document reports all of its problems at once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, ParamSpec, TypeVar

from contracts.errors import ValidationError

T = TypeVar("T")
P = ParamSpec("P")

MAX_STRING = 1000
MAX_ITEMS = 1000
MAX_NODES = 100_000
MAX_NUMBER = 10**15
MAX_DURATION_S = 100 * 365 * 86400
MAX_PLAIN_NODES = 10_000
MAX_PLAIN_DEPTH = 32

_DURATION = re.compile(r"^(\d{1,12}) *([smhdw])$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
NAME = re.compile(r"^[a-z][a-z0-9-]{1,40}$")
"""dstack's resource names (fleets, runs): lower case, a letter first, 2 to 41 characters."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")


def show(value: object) -> str:
    """`repr(value)`, cut to 60 characters so that a huge input never floods an error."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def number(value: float) -> str:
    """A count or size for messages: `16`, `0.5`, `1000000` (never `1e+06`)."""
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e16):
        return str(int(value))
    return repr(value)


def join(where: str, key: object) -> str:
    """The path of `key` inside `where`: `join("resources", "gpu") == "resources.gpu"`."""
    return f"{where}.{key}" if where else str(key)


class Problems:
    """Collects problem strings; `run` turns a raised ValidationError into collected ones."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, problem: str) -> None:
        self.items.append(problem)

    def run(self, parse: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """`parse(*args, **kwargs)`, or None with its problems collected."""
        try:
            return parse(*args, **kwargs)
        except ValidationError as exc:
            self.items.extend(exc.problems)
            return None

    def raise_if_any(self) -> None:
        if self.items:
            raise ValidationError(self.items)


def optional(
    data: Mapping[str, Any],
    key: str,
    where: str,
    parse: Callable[[object, str], T],
    problems: Problems,
) -> T | None:
    """`parse(data[key], "<where>.<key>")`, None when the key is absent or null (or bad: the
    problem is then collected)."""
    raw = data.get(key)
    if raw is None:
        return None
    return problems.run(parse, raw, join(where, key))


def expect_mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"{where}: expected a mapping, got {show(value)}")
    if len(value) > MAX_ITEMS:
        raise ValidationError(f"{where}: at most {MAX_ITEMS} keys, got {len(value)}")
    bad = [key for key in value if not isinstance(key, str)]
    if bad:
        raise ValidationError(f"{where}: keys must be strings, got {show(bad[0])}")
    return value


def check_keys(data: Mapping[str, Any], allowed: Collection[str], where: str) -> list[str]:
    """One problem per key of `data` outside `allowed`, each listing the allowed ones."""
    names = ", ".join(sorted(allowed))
    return [
        f"{join(where, key)}: unknown field (allowed: {names})"
        for key in data
        if key not in allowed
    ]


def expect_str(value: object, where: str, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{where}: expected a string, got {show(value)}")
    if len(value) > MAX_STRING:
        raise ValidationError(f"{where}: at most {MAX_STRING} characters, got {len(value)}")
    if pattern is not None and not pattern.match(value):
        raise ValidationError(f"{where}: {show(value)} does not match {pattern.pattern}")
    return value


def expect_choice(value: object, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(f"{where}: expected one of {', '.join(choices)}, got {show(value)}")
    return value


def expect_int(value: object, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{where}: expected an integer, got {show(value)}")
    if not low <= value <= high:
        raise ValidationError(f"{where}: {value} is out of range {low}..{high}")
    return value


def expect_number(value: object, where: str) -> float:
    """A finite, non-negative int or float no larger than MAX_NUMBER."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{where}: expected a number, got {show(value)}")
    if not math.isfinite(value) or not 0 <= value <= MAX_NUMBER:
        raise ValidationError(f"{where}: {show(value)} is out of range 0..{MAX_NUMBER}")
    return float(value)


def expect_str_list(
    value: object, where: str, pattern: re.Pattern[str] | None = None
) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValidationError(f"{where}: expected a list of strings, got {show(value)}")
    if len(value) > MAX_ITEMS:
        raise ValidationError(f"{where}: at most {MAX_ITEMS} items, got {len(value)}")
    problems = Problems()
    items: list[str] = []
    for i, item in enumerate(value):
        text = problems.run(expect_str, item, f"{where}[{i}]", pattern)
        if text is not None:
            items.append(text)
    problems.raise_if_any()
    return tuple(items)


def expect_str_map(value: object, where: str) -> dict[str, str]:
    """A map of strings; number values are turned into strings (YAML reads `rack: 1` as 1)."""
    data = expect_mapping(value, where)
    problems = Problems()
    result: dict[str, str] = {}
    for key, item in data.items():
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            problems.add(f"{join(where, key)}: expected a string, got {show(item)}")
        else:
            result[key] = problems.run(expect_str, str(item), join(where, key)) or ""
    problems.raise_if_any()
    return result


def parse_duration(value: object, where: str) -> int:
    """dstack's Duration: int seconds, a digit string, or `<n><s|m|h|d|w>` (e.g. `5m`, `3d`)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValidationError(f"{where}: expected a duration such as 5m or 3d, got {show(value)}")
    if isinstance(value, str):
        text = expect_str(value, where).strip()
        if text.isdigit() and len(text) <= 12:
            value = int(text)
        else:
            match = _DURATION.match(text)
            if match is None:
                raise ValidationError(
                    f"{where}: expected a duration such as 30s, 5m, 1h, 3d or 2w, got {show(value)}"
                )
            value = int(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if not 0 <= value <= MAX_DURATION_S:
        raise ValidationError(f"{where}: {show(value)} is out of range 0..{MAX_DURATION_S} seconds")
    return value


def parse_env(value: object, where: str) -> dict[str, str]:
    """A `{NAME: value}` map or dstack's list form `["A=1", "B"]`; a bare `B` (or a null value)
    maps to "" (dstack takes it from the client's environment, which a parser cannot see)."""
    problems = Problems()
    env: dict[str, str] = {}
    if isinstance(value, list | tuple):
        for i, item in enumerate(expect_str_list(value, where)):
            name, _, text = item.partition("=")
            if not _ENV_NAME.match(name):
                problems.add(f"{where}[{i}]: bad variable name in {show(item)}")
            env[name] = text
    else:
        for name, item in expect_mapping(value, where).items():
            if not _ENV_NAME.match(name):
                problems.add(f"{where}: bad variable name {show(name)}")
            if item is None:
                env[name] = ""
            elif isinstance(item, bool) or not isinstance(item, str | int | float):
                problems.add(f"{join(where, name)}: expected a string or number, got {show(item)}")
            else:
                env[name] = problems.run(expect_str, str(item), join(where, name)) or ""
    problems.raise_if_any()
    return env


def plain_data(value: object, where: str) -> Any:
    """A copy of JSON-like data (str, number, bool, null, lists, string-keyed maps), bounded in
    size (MAX_PLAIN_NODES values) and depth (MAX_PLAIN_DEPTH)."""
    budget = [MAX_PLAIN_NODES]

    def copy(item: object, path: str, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise ValidationError(f"{where}: more than {MAX_PLAIN_NODES} values")
        if depth > MAX_PLAIN_DEPTH:
            raise ValidationError(f"{path}: nested deeper than {MAX_PLAIN_DEPTH} levels")
        if item is None or isinstance(item, bool | int):
            return item
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValidationError(f"{path}: expected a finite number, got {show(item)}")
            return item
        if isinstance(item, str):
            return expect_str(item, path)
        if isinstance(item, list | tuple):
            if len(item) > MAX_ITEMS:
                raise ValidationError(f"{path}: at most {MAX_ITEMS} items, got {len(item)}")
            return [copy(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item)]
        if isinstance(item, Mapping):
            data = expect_mapping(item, path)
            return {k: copy(v, join(path, k), depth + 1) for k, v in data.items()}
        raise ValidationError(f"{path}: expected plain data, got {show(item)}")

    return copy(value, where, 0)
