"""Demand traces for the mock driver's load model, replayed from their start. Three forms:

- a `timestamp,value` CSV, as the Numenta Anomaly Benchmark (NAB) ships its series;
- per-minute counts, one number per line (minute 0, 1, 2...);
- the Azure Functions 2019 per-minute format (`HashOwner,HashApp,HashFunction,Trigger,1,...,
  1440`): each row a function's invocations in each minute of a day; the trace is their sum
  per minute (a file of one app's functions is that app's demand).

Per-minute values hold for their minute; the load model turns a count into MHz with its
`per_unit_mhz`.

A timestamp is a number of seconds (unix time or any other origin) or an ISO 8601 date and
time (`2014-04-01 00:05:00`; naive ones are read as UTC: only their differences matter). A
first line whose value is not a number is a header and skipped. A value is the group's CPU
demand in MHz from its timestamp until the next one; after the last point its value holds.

Files are bounded (MAX_TRACE_BYTES, MAX_TRACE_POINTS) and parsed once per path and version:
thousands of allocations replay the same trace.
"""

from __future__ import annotations

import csv
import math
import os
from array import array
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime

MAX_TRACE_BYTES = 100 * 1024 * 1024
MAX_TRACE_POINTS = 1_000_000
# Parsed traces kept (each up to 16 MB at MAX_TRACE_POINTS).
_CACHE_SIZE = 4


@dataclass(frozen=True, slots=True, eq=False)
class TraceSeries:
    """Points as seconds from the first timestamp (non-decreasing) and their values."""

    path: str
    offsets: array[float]
    values: array[float]

    def __len__(self) -> int:
        return len(self.values)

    @property
    def span_s(self) -> float:
        return self.offsets[-1]

    def value_at(self, t: float) -> float:
        """The value of the latest point at or before `t` seconds into the trace."""
        i = bisect_right(self.offsets, t) - 1
        return self.values[max(i, 0)]


_cache: OrderedDict[tuple[str, int, int], TraceSeries] = OrderedDict()


def load_trace(path: str) -> TraceSeries:
    """The trace at `path` (parsed once while the file is unchanged); raises ValueError
    saying what is wrong and where."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    if stat.st_size > MAX_TRACE_BYTES:
        raise ValueError(
            f"{path!r} is {stat.st_size} bytes, more than the {MAX_TRACE_BYTES} a trace may have"
        )
    key = (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)
    series = _cache.get(key)
    if series is None:
        series = _parse(path)
        _cache[key] = series
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return series


AZURE_ID_COLUMNS = ("HashOwner", "HashApp", "HashFunction", "Trigger")
MINUTES_PER_DAY = 1440


def _parse(path: str) -> TraceSeries:
    try:
        with open(path, newline="", encoding="utf-8") as file:
            first_line = file.readline()
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path!r} is not a CSV text file: {exc}") from None
    if first_line.startswith(AZURE_ID_COLUMNS[0]):
        return _parse_azure(path)
    if "," not in first_line and first_line.strip():
        return _parse_counts(path)
    return _parse_pairs(path)


def _per_minute(path: str, counts: array[float]) -> TraceSeries:
    if not counts:
        raise ValueError(f"{path!r} has no per-minute counts")
    offsets = array("d", (60.0 * minute for minute in range(len(counts))))
    return TraceSeries(path, offsets, counts)


def _count(path: str, line: int, text: str) -> float:
    value = _number(text)
    if value is None or not math.isfinite(value) or value < 0:
        raise ValueError(f"{path!r} line {line}: count {text.strip()!r} is not a number >= 0")
    return value


def _parse_counts(path: str) -> TraceSeries:
    counts: array[float] = array("d")
    with open(path, encoding="utf-8") as file:
        for line, text in enumerate(file, start=1):
            if not text.strip():
                continue
            if len(counts) == MAX_TRACE_POINTS:
                raise ValueError(
                    f"{path!r} has more than the {MAX_TRACE_POINTS} points a trace may have"
                )
            counts.append(_count(path, line, text))
    return _per_minute(path, counts)


def _parse_azure(path: str) -> TraceSeries:
    totals = array("d", bytes(8 * MINUTES_PER_DAY))
    width = len(AZURE_ID_COLUMNS) + MINUTES_PER_DAY
    try:
        with open(path, newline="", encoding="utf-8") as file:
            rows = csv.reader(file)
            header = next(rows)
            if tuple(header[:4]) != AZURE_ID_COLUMNS or len(header) != width:
                raise ValueError(
                    f"{path!r} line 1: expected {','.join(AZURE_ID_COLUMNS)},1,...,1440"
                )
            for line, row in enumerate(rows, start=2):
                if not row:
                    continue
                if len(row) != width:
                    raise ValueError(f"{path!r} line {line}: expected {width} columns")
                for minute, text in enumerate(row[len(AZURE_ID_COLUMNS) :]):
                    totals[minute] += _count(path, line, text)
    except csv.Error as exc:
        raise ValueError(f"{path!r} is not a CSV text file: {exc}") from None
    return _per_minute(path, totals)


def _parse_pairs(path: str) -> TraceSeries:
    offsets: array[float] = array("d")
    values: array[float] = array("d")
    first = previous = 0.0
    try:
        with open(path, newline="", encoding="utf-8") as file:
            for line, row in enumerate(csv.reader(file), start=1):
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if len(row) != 2:
                    raise ValueError(f"{path!r} line {line}: expected `timestamp,value`")
                value = _number(row[1])
                if value is None and not values and line == 1:
                    continue  # the header
                if value is None or not math.isfinite(value) or value < 0:
                    raise ValueError(
                        f"{path!r} line {line}: value {row[1].strip()!r} is not a number >= 0"
                    )
                stamp = _timestamp(row[0])
                if stamp is None:
                    raise ValueError(
                        f"{path!r} line {line}: timestamp {row[0].strip()!r} is neither seconds"
                        " nor an ISO 8601 date and time"
                    )
                if not values:
                    first = previous = stamp
                elif stamp < previous:
                    raise ValueError(f"{path!r} line {line}: timestamps go back in time")
                if len(values) == MAX_TRACE_POINTS:
                    raise ValueError(
                        f"{path!r} has more than the {MAX_TRACE_POINTS} points a trace may have"
                    )
                previous = stamp
                offsets.append(stamp - first)
                values.append(value)
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path!r} is not a CSV text file: {exc}") from None
    if not values:
        raise ValueError(f"{path!r} has no `timestamp,value` points")
    return TraceSeries(path, offsets, values)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _timestamp(text: str) -> float | None:
    text = text.strip()
    seconds = _number(text)
    if seconds is not None:
        return seconds if math.isfinite(seconds) else None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
