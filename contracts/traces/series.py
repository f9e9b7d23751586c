"""The `Series` every reader gives, its bounds, the parse cache and shared field parsers."""

from __future__ import annotations

import math
import os
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime

from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits

MAX_BYTES = 100 * 1024 * 1024
MAX_POINTS = 1_000_000
# Parsed series kept (each up to 16 MB at MAX_POINTS).
CACHE_SIZE = 4


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """Points as seconds from the first one (non-decreasing) and their values; a value holds
    from its offset until the next one, and the last one holds for ever."""

    path: str
    offsets: array[float]
    values: array[float]

    def __len__(self) -> int:
        return len(self.values)

    @property
    def span_s(self) -> float:
        return self.offsets[-1]

    def value_at(self, t: float) -> float:
        """The value of the latest point at or before `t` seconds (the first one before it)."""
        i = bisect_right(self.offsets, t) - 1
        return self.values[max(i, 0)]


def too_many(path: str, max_points: int) -> ValidationError:
    return ValidationError(f"{path!r} has more than the {max_points} points a trace may have")


def cannot_read(path: str, exc: OSError) -> ValidationError:
    return ValidationError(f"cannot read {path!r}: {exc.strerror or exc}")


def not_csv(path: str, exc: Exception) -> ValidationError:
    return ValidationError(f"{path!r} is not a CSV text file: {exc}")


def check_size(path: str, max_bytes: int = MAX_BYTES) -> os.stat_result:
    """The file's stat; refuses a missing file or one over `max_bytes`."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise cannot_read(path, exc) from None
    if stat.st_size > max_bytes:
        raise ValidationError(
            f"{path!r} is {stat.st_size} bytes, more than the {max_bytes} a trace may have"
        )
    return stat


class ParseCache:
    """Series parsed once per (path, mtime, size, options), least recently used dropped."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[Hashable, ...], Series] = OrderedDict()

    def get(
        self,
        path: str,
        parse: Callable[[str], Series],
        *,
        max_bytes: int = MAX_BYTES,
        options: Hashable = None,
    ) -> Series:
        stat = check_size(path, max_bytes)
        key = (os.path.abspath(path), stat.st_mtime_ns, stat.st_size, options)
        series = self._entries.get(key)
        if series is None:
            series = parse(path)
            self._entries[key] = series
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        return series

    def clear(self) -> None:
        self._entries.clear()


def number(text: str) -> float | None:
    """`text` as a float, or None."""
    try:
        return float(text)
    except ValueError:
        return None


def count(path: str, line: int, text: str, field: str = "count") -> float:
    """A finite number >= 0, or an error naming the file, line and field."""
    value = number(text)
    if value is None or not math.isfinite(value) or value < 0:
        raise ValidationError(
            f"{path!r} line {line}: {field} {text.strip()!r} is not a number >= 0"
        )
    return value


def timestamp(text: str) -> float | None:
    """Seconds from a number of seconds or an ISO 8601 date and time (naive ones as UTC)."""
    text = text.strip()
    seconds = number(text)
    if seconds is not None:
        return seconds if math.isfinite(seconds) else None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


install_fast_inits(__name__)
