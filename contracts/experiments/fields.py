"""Value checks for experiment files: each check turns one YAML value into its typed form or
raises `Bad` with what was expected; `Node` reads a mapping's keys through them and collects
the problems as `"<field path>: <what>"`, so one file reports all of its problems at once.

The checks are plain functions of one value so that a policy's sweep values go through the
same check as the setting itself."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

from contracts.jobspec.values import parse_go_duration

MAX_TEXT = 500
MAX_NUMBER = 1e15

Check = Callable[[Any], Any]


class Bad(ValueError):
    """A value that does not fit; the message says what was expected."""


def show(value: object) -> str:
    """`repr(value)`, cut to 60 characters so that a huge input never floods an error."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def join(path: str, key: object) -> str:
    """`join("policies[2]", "kind") == "policies[2].kind"`; an int key is an index."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _real(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Bad(f"expected a number, got {show(value)}")
    number = float(value)
    if not math.isfinite(number) or abs(number) > MAX_NUMBER:
        raise Bad(f"expected a finite number, got {show(value)}")
    return number


def number(*, minimum: float | None = None, positive: bool = False) -> Check:
    def check(value: Any) -> float:
        result = _real(value)
        if positive and result <= 0:
            raise Bad(f"expected a number > 0, got {show(value)}")
        if minimum is not None and result < minimum:
            raise Bad(f"expected a number >= {minimum:g}, got {show(value)}")
        return result

    return check


def integer(*, minimum: int | None = None, maximum: int | None = None) -> Check:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Bad(f"expected a whole number, got {show(value)}")
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise Bad(f"expected a whole number, got {show(value)}")
        result = int(value)
        if minimum is not None and result < minimum:
            raise Bad(f"expected a whole number >= {minimum}, got {show(value)}")
        if maximum is not None and result > maximum:
            raise Bad(f"expected a whole number <= {maximum}, got {show(value)}")
        return result

    return check


def duration(*, positive: bool = False) -> Check:
    """Seconds, from a number of seconds or a Go duration string ("90s", "5m", "1h30m")."""

    def check(value: Any) -> float:
        if isinstance(value, str):
            try:
                seconds = parse_go_duration(value)
            except ValueError:
                raise Bad(
                    f'expected seconds or a duration such as "30s" or "5m", got {show(value)}'
                ) from None
        else:
            try:
                seconds = _real(value)
            except Bad:
                raise Bad(
                    f'expected seconds or a duration such as "30s" or "5m", got {show(value)}'
                ) from None
        if seconds < 0 or (positive and seconds == 0) or seconds > MAX_NUMBER:
            bound = "> 0" if positive else ">= 0"
            raise Bad(f"expected a duration {bound}, got {show(value)}")
        return seconds

    return check


def text(*, pattern: Callable[[str], object] | None = None, hint: str = "") -> Check:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise Bad(f"expected a non-empty string, got {show(value)}")
        if len(value) > MAX_TEXT:
            raise Bad(f"expected at most {MAX_TEXT} characters, got {len(value)}")
        if pattern is not None and not pattern(value):
            raise Bad(f"{show(value)} is not {hint}")
        return value

    return check


def choice(options: Collection[str]) -> Check:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise Bad(f"{show(value)} is not one of {', '.join(options)}")
        return value

    return check


def optional(inner: Check) -> Check:
    """`inner`, or None for YAML's null."""

    def check(value: Any) -> Any:
        return None if value is None else inner(value)

    return check


def plain(value: Any) -> Any:
    """Plain YAML data (mappings with string keys, lists, scalars), bounded in depth."""
    return _plain(value, 0)


def _plain(value: Any, depth: int) -> Any:
    if depth > 16:
        raise Bad("nested more than 16 levels deep")
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise Bad(f"keys must be strings, got {show(key)}")
        return {key: _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item, depth + 1) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise Bad(f"expected a finite number, got {show(value)}")
    if value is None or isinstance(value, str | bool | int | float):
        return value
    raise Bad(f"expected plain data, got {show(value)}")


def mapping(value: Any) -> Mapping[str, Any]:
    """A mapping of plain data (a Nomad policy body, a Python class's arguments)."""
    if not isinstance(value, Mapping):
        raise Bad(f"expected a mapping, got {show(value)}")
    result: Mapping[str, Any] = plain(value)
    return result


class Node:
    """One mapping of the document at `path`: typed reads that record problems, and a final
    check that no unknown key was given."""

    def __init__(self, data: Any, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        self.ok = isinstance(data, Mapping)
        self.data: Mapping[Any, Any] = data if isinstance(data, Mapping) else {}
        self.seen: set[str] = set()
        if not self.ok:
            self.problems.append(f"{path or 'experiment'}: expected a mapping, got {show(data)}")

    def has(self, key: str) -> bool:
        return key in self.data

    def at(self, key: str | int) -> str:
        return join(self.path, key)

    def error(self, key: str | int, message: str) -> None:
        self.problems.append(f"{self.at(key)}: {message}")

    def raw(self, key: str) -> Any:
        self.seen.add(key)
        return self.data.get(key)

    def get(self, key: str, check: Check, default: Any = None, *, required: bool = False) -> Any:
        """`check(data[key])`, or `default` when absent (or on a problem, recorded)."""
        self.seen.add(key)
        if key not in self.data:
            if required:
                self.error(key, "required")
            return default
        return self.value(key, self.data[key], check, default)

    def value(self, key: str | int, value: Any, check: Check, default: Any = None) -> Any:
        try:
            return check(value)
        except Bad as exc:
            self.error(key, str(exc))
            return default

    def sequence(self, key: str, limit: int, *, required: bool = False) -> list[Any]:
        """A list at `key` of at most `limit` items ([] when absent or bad)."""
        self.seen.add(key)
        if key not in self.data:
            if required:
                self.error(key, "required")
            return []
        items = self.data[key]
        if not isinstance(items, list):
            self.error(key, f"expected a list, got {show(items)}")
            return []
        if required and not items:
            self.error(key, "expected at least one item, got an empty list")
        if len(items) > limit:
            self.error(key, f"{len(items)} items, more than the {limit} allowed")
            return []
        return items

    def finish(self, known: Collection[str] | None = None) -> None:
        """Report the keys nobody read (or not in `known`)."""
        allowed = set(known) if known is not None else self.seen
        for key in self.data:
            if key not in allowed:
                names = ", ".join(sorted(allowed)) or "none"
                self.problems.append(
                    f"{self.at(str(key))}: unknown field {show(key)}; expected one of {names}"
                )
