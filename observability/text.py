"""Small text helpers shared by the terminal renderers: durations and aligned tables."""

from __future__ import annotations

import re
from collections.abc import Sequence

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d)")
_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}


def parse_duration(text: str) -> int:
    """A Go-style duration in nanoseconds: "90s", "5m", "1h30m", "250ms"; a bare number is
    seconds. Raises ValueError on anything else."""
    value = text.strip()
    if not value:
        raise ValueError("empty duration")
    try:
        return int(float(value) * 1_000_000_000)
    except ValueError:
        pass
    total = 0.0
    position = 0
    for match in _DURATION_PART.finditer(value):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_NS[match.group(2)]
        position = match.end()
    if position != len(value):
        raise ValueError(f"invalid duration {text!r} (e.g. 90s, 5m, 1h30m)")
    return int(total)


def format_duration(ns: int | float) -> str:
    """850µs, 12.3ms, 1.25s, 2m05s."""
    if ns < 1_000_000:
        return f"{ns / 1_000:.0f}µs"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.1f}ms"
    if ns < 60_000_000_000:
        return f"{ns / 1_000_000_000:.2f}s"
    seconds = int(ns // 1_000_000_000)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    """Columns padded to their widest cell; numeric columns right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if numeric[i] else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), *(line(row) for row in rows)])
