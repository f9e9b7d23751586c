"""Reading a policy document's blocks and fields, with errors that name where and what.

A policy body reaches the parser in one of three shapes, all accepted:
- HCL through `contracts.jobspec.hcl.to_plain`: a block is a list, a labelled block wraps
  its body in `{label: body}` (`"check": [{"cpu": {...}}]`);
- Nomad's API (`nomad job run -output`, `/v1/job`): every block body is also wrapped in a
  one-element list (`"check": [{"cpu": [{...}]}]`);
- hand-written JSON, labels as keys of one object (`"check": {"cpu": {...}}`).

Scalars follow the Nomad Autoscaler, which formats every strategy and target setting as a
string before parsing it: `target = "80"` is as good as `target = 80`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contracts.codec import describe
from contracts.fast_init import install_fast_inits
from contracts.jobspec.values import parse_go_duration

Body = Mapping[str, Any]
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DURATION_HINT = 'a duration such as "30s" or "1m30s"'


@dataclass(frozen=True, slots=True)
class Where:
    """A chain of blocks: `job "web" > group "api" > scaling > policy > check "cpu"`."""

    chain: tuple[str, ...]

    def block(self, name: str, label: str | None = None) -> Where:
        return Where((*self.chain, name if label is None else f'{name} "{label}"'))

    def at(self, detail: str) -> str:
        return f"{' > '.join(self.chain)}: {detail}"


def _hint(value: Any) -> str:
    if isinstance(value, str) and "${" in value:
        return " (drover does not evaluate HCL expressions or variables)"
    return ""


def _unwrap(body: Any) -> Body | None:
    """A block body: a mapping, or (Nomad's API) a list holding exactly one mapping."""
    if isinstance(body, Mapping):
        return body
    if isinstance(body, list) and len(body) == 1 and isinstance(body[0], Mapping):
        return body[0]
    return None


def single_block(value: Any, name: str, where: Where, problems: list[str]) -> Body | None:
    """An unlabelled block that may appear once (`policy`, `behavior`, `scale_up`)."""
    if isinstance(value, list) and len(value) > 1:
        problems.append(where.at(f"{name} block may only appear once, found {len(value)}"))
        return None
    body = _unwrap(value)
    if body is None:
        problems.append(
            where.at(f"{name} must be a block: {name} {{ ... }}, got {describe(value)}")
        )
    return body


def repeated_blocks(
    value: Any, name: str, where: Where, problems: list[str], limit: int
) -> list[Body]:
    """An unlabelled block that may repeat (`rate`), at most `limit` times."""
    items = value if isinstance(value, list) else [value]
    if len(items) > limit:
        problems.append(where.at(f"{len(items)} {name} blocks, more than the {limit} allowed"))
        return []
    bodies: list[Body] = []
    for item in items:
        body = _unwrap(item)
        if body is None:
            problems.append(
                where.at(f"{name} must be a block: {name} {{ ... }}, got {describe(item)}")
            )
        else:
            bodies.append(body)
    return bodies


def labelled_blocks(
    value: Any, name: str, where: Where, problems: list[str], limit: int
) -> list[tuple[str, Body]]:
    """Blocks with one label (`check "cpu"`), in the order written, at most `limit`."""
    items = value if isinstance(value, list) and value else [value]
    found: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, Mapping) or not item:
            shape = f'{name} "<name>" {{ ... }}'
            problems.append(
                where.at(f"{name} must be labelled blocks: {shape}, got {describe(item)}")
            )
            continue
        found.extend((str(label), body) for label, body in item.items())
        if len(found) > limit:
            problems.append(where.at(f"more than {limit} {name} blocks; drover allows {limit}"))
            return []
    blocks: list[tuple[str, Body]] = []
    for label, raw in found:
        if not label:
            problems.append(where.at(f'a {name} block needs a label: {name} "<name>" {{ ... }}'))
            continue
        body = _unwrap(raw)
        if body is None:
            problems.append(where.block(name, label).at(f"must be a block, got {describe(raw)}"))
            continue
        blocks.append((label, body))
    return blocks


def _integral(value: Any) -> bool:
    """2.0 (Nomad's API sends JSON numbers as floats) or "2" (Go's ParseInt, base 10)."""
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, str) and _INTEGER.fullmatch(value) is not None


class Fields:
    """Typed reads of one block's attributes; `finish` reports the ones nobody read."""

    def __init__(self, body: Body, where: Where, problems: list[str]) -> None:
        self.body = body
        self.where = where
        self.problems = problems
        self._read: set[str] = set()

    def has(self, key: str) -> bool:
        return key in self.body

    def raw(self, key: str) -> Any:
        self._read.add(key)
        return self.body.get(key)

    def bad(self, key: str, expected: str, value: Any) -> None:
        self.problems.append(
            self.where.at(f"{key} must be {expected}, got {describe(value)}{_hint(value)}")
        )

    def error(self, detail: str) -> None:
        self.problems.append(self.where.at(detail))

    def string(self, key: str, default: str = "") -> str:
        if not self.has(key):
            return default
        value = self.raw(key)
        if isinstance(value, str):
            return value
        self.bad(key, "a string", value)
        return default

    def required_string(self, key: str) -> str:
        if not self.has(key):
            self.error(f"{key} is required")
            return ""
        value = self.string(key)
        if isinstance(self.body.get(key), str) and not value:
            self.error(f"{key} must not be empty")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.string(key, default)
        if value not in choices:
            options = ", ".join(f'"{c}"' for c in choices)
            self.error(f"{key} must be one of {options}, got {describe(value)}")
            return default
        return value

    def boolean(self, key: str, default: bool) -> bool:
        if not self.has(key):
            return default
        value = self.raw(key)
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return bool(value == "true")
        self.bad(key, "true or false", value)
        return default

    def number(self, key: str) -> float | None:
        if not self.has(key):
            return None
        value = self.raw(key)
        parsed: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            parsed = float(value)
        elif isinstance(value, str):
            try:
                parsed = float(value)
            except ValueError:
                parsed = None
        if parsed is None or not math.isfinite(parsed):
            self.bad(key, "a finite number", value)
            return None
        return parsed

    def integer(self, key: str, *, minimum: int | None = None) -> int | None:
        if not self.has(key):
            return None
        value = self.raw(key)
        parsed: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            parsed = value
        elif _integral(value):
            parsed = int(value)
        if parsed is None:
            self.bad(key, "an integer", value)
            return None
        if minimum is not None and parsed < minimum:
            self.bad(key, f"at least {minimum}", value)
            return None
        return parsed

    def duration(self, key: str, default: float, *, maximum: float | None = None) -> float:
        """A Go duration string in seconds. Zero means unset, as in the Nomad Autoscaler
        (`ApplyPolicyDefaults` replaces zero durations by the agent's defaults)."""
        if not self.has(key):
            return default
        value = self.raw(key)
        if not isinstance(value, str):
            self.bad(key, _DURATION_HINT, value)
            return default
        try:
            seconds = parse_go_duration(value)
        except ValueError:
            self.bad(key, _DURATION_HINT, value)
            return default
        if seconds < 0:
            self.bad(key, "a duration that is not negative", value)
            return default
        if maximum is not None and seconds > maximum:
            self.bad(key, f"at most {maximum:g}s", value)
            return default
        return seconds or default

    def unsupported(self, key: str, why: str) -> None:
        if self.has(key):
            self.raw(key)
            self.error(f'"{key}" is not supported by drover: {why}')

    def finish(self) -> None:
        for key in self.body:
            if key not in self._read:
                self.problems.append(self.where.at(f'unknown field "{key}"'))


install_fast_inits(__name__)
