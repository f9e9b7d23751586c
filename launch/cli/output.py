"""Human output like Nomad's: aligned tables, `Key = Value` blocks, short IDs and dates."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

import orjson


def print_json(value: Any) -> None:
    print(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [list(headers), *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )


def key_values(pairs: Sequence[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k.ljust(width)} = {v}" for k, v in pairs)


def short(identifier: str) -> str:
    return identifier[:8]


def date(ns: int) -> str:
    if not ns:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns / 1e9))


def go_date(text: str) -> str:
    """A Go time as the API sends it (RFC 3339), to the second; Go's zero time is "N/A"."""
    if not text or text.startswith("0001-01-01"):
        return "N/A"
    seconds, _, rest = text.partition(".")
    return seconds if not rest else seconds + "Z"


def ago(ns: int) -> str:
    if not ns:
        return "-"
    seconds = max(0.0, time.time() - ns / 1e9)
    if seconds < 60:
        return f"{seconds:.0f}s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def error(message: str) -> None:
    print(f"drover: {message}", file=sys.stderr)
