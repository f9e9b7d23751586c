"""Per-request logs (one CSV row per request, with a header) turned into arrivals per bucket and,
when the rows carry execution times, mean concurrency per bucket by Little's law: the sum of the
parts of the requests' execution intervals [start, start + duration) that fall in the bucket,
divided by its length.

A `RequestLayout` names the columns: the timestamp (ISO 8601 date and time, or a number of
seconds, milliseconds, microseconds or nanoseconds), and the execution time either as a duration
column (times `duration_scale` to get seconds) or as an end-timestamp column. Presets:

- `GENAI`: Alibaba GenAI 2026 `lora_request_trace.csv`
  (`gmt_create` at 1 s, `exec_time_seconds`);
- `AZURE_LLM`: Azure LLM inference 2023 `AzureLLMInferenceTrace_{code,conv}.csv`
  (`TIMESTAMP`, no execution time: arrivals only);
- `OPENB_PODS`: Alibaba GPU 2023 `openb_pod_list_*.csv` (`creation_time` to `deletion_time`,
  in seconds).

Rows need not be sorted; times count from the earliest request.
"""

from __future__ import annotations

import csv
import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits
from contracts.traces.series import (
    MAX_POINTS,
    Series,
    cannot_read,
    check_size,
    count,
    not_csv,
    number,
    timestamp,
    too_many,
)

TimeFormat = Literal["iso", "s", "ms", "us", "ns"]
_UNIT_S: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@dataclass(frozen=True, slots=True)
class RequestLayout:
    timestamp: str
    time_format: TimeFormat = "iso"
    duration: str | None = None
    duration_scale: float = 1.0
    end: str | None = None
    # Only rows whose columns have these values (e.g. {"predict_status": "SUCCEED"}).
    where: Mapping[str, str] = field(default_factory=dict)


GENAI = RequestLayout(timestamp="gmt_create", duration="exec_time_seconds")
AZURE_LLM = RequestLayout(timestamp="TIMESTAMP")
OPENB_PODS = RequestLayout(timestamp="creation_time", time_format="s", end="deletion_time")
PRESETS: dict[str, RequestLayout] = {"genai": GENAI, "azure-llm": AZURE_LLM, "openb": OPENB_PODS}


@dataclass(frozen=True, slots=True, eq=False)
class Requests:
    """Start times (seconds from the earliest, sorted) and durations (seconds, same order;
    None without execution times)."""

    path: str
    starts: array[float]
    durations: array[float] | None

    def __len__(self) -> int:
        return len(self.starts)


def _time(path: str, line: int, name: str, text: str, time_format: TimeFormat) -> float:
    if time_format == "iso":
        seconds = timestamp(text)
    else:
        raw = number(text.strip())
        seconds = raw * _UNIT_S[time_format] if raw is not None and math.isfinite(raw) else None
    if seconds is None:
        expected = (
            "an ISO 8601 date and time" if time_format == "iso" else f"a number of {time_format}"
        )
        raise ValidationError(f"{path!r} line {line}: {name} {text.strip()!r} is not {expected}")
    return seconds


def read_requests(
    path: str,
    layout: RequestLayout,
    *,
    max_rows: int = MAX_POINTS,
    limit: int | None = None,
) -> Requests:
    """The requests of the CSV at `path`; `limit` reads only the first rows kept."""
    if layout.duration is not None and layout.end is not None:
        raise ValidationError("layout: give duration or end, not both")
    check_size(path)
    rows_kept: list[tuple[float, float]] = []
    timed = layout.duration is not None or layout.end is not None
    try:
        with open(path, newline="", encoding="utf-8") as file:
            reader = csv.reader(file)
            header = [name.strip() for name in next(reader, [])]
            wanted = [layout.timestamp, layout.duration, layout.end, *layout.where]
            columns: dict[str, int] = {}
            for name in wanted:
                if name is None:
                    continue
                if name not in header:
                    raise ValidationError(
                        f"{path!r} line 1: no column {name!r} (columns: {','.join(header)})"
                    )
                columns[name] = header.index(name)
            for line, row in enumerate(reader, start=2):
                if not row:
                    continue
                if len(row) != len(header):
                    raise ValidationError(
                        f"{path!r} line {line}: expected {len(header)} columns, got {len(row)}"
                    )
                if any(row[columns[k]] != v for k, v in layout.where.items()):
                    continue
                if limit is not None and len(rows_kept) == limit:
                    break
                if len(rows_kept) == max_rows:
                    raise too_many(path, max_rows)
                ts = layout.timestamp
                start = _time(path, line, ts, row[columns[ts]], layout.time_format)
                duration = 0.0
                if layout.duration is not None:
                    text = row[columns[layout.duration]]
                    duration = count(path, line, text, layout.duration) * layout.duration_scale
                elif layout.end is not None:
                    end = _time(
                        path, line, layout.end, row[columns[layout.end]], layout.time_format
                    )
                    if end < start:
                        raise ValidationError(
                            f"{path!r} line {line}: {layout.end} {row[columns[layout.end]]!r}"
                            f" is before {ts} {row[columns[ts]]!r}"
                        )
                    duration = end - start
                rows_kept.append((start, duration))
    except OSError as exc:
        raise cannot_read(path, exc) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise not_csv(path, exc) from None
    if not rows_kept:
        raise ValidationError(f"{path!r} has no requests")
    rows_kept.sort()
    origin = rows_kept[0][0]
    starts = array("d", (start - origin for start, _ in rows_kept))
    durations = array("d", (d for _, d in rows_kept)) if timed else None
    return Requests(path, starts, durations)


def _buckets(requests: Requests, end_s: float, bucket_s: float, max_points: int) -> int:
    if not bucket_s > 0:
        raise ValidationError(f"bucket_s: expected a number > 0, got {bucket_s!r}")
    n = math.floor(end_s / bucket_s) + 1
    if n > max_points:
        raise too_many(requests.path, max_points)
    return n


def _series(requests: Requests, bucket_s: float, values: array[float]) -> Series:
    return Series(requests.path, array("d", (i * bucket_s for i in range(len(values)))), values)


def arrivals(requests: Requests, bucket_s: float = 1.0, *, max_points: int = MAX_POINTS) -> Series:
    """Requests starting in each bucket [i * bucket_s, (i + 1) * bucket_s)."""
    n = _buckets(requests, requests.starts[-1], bucket_s, max_points)
    counts = array("d", bytes(8 * n))
    for start in requests.starts:
        counts[int(start // bucket_s)] += 1.0
    return _series(requests, bucket_s, counts)


def concurrency(
    requests: Requests, bucket_s: float = 1.0, *, max_points: int = MAX_POINTS
) -> Series:
    """Mean number of requests executing in each bucket (Little's law), up to the last end."""
    if requests.durations is None:
        raise ValidationError(f"{requests.path!r}: the layout names no execution time")
    last_end = max(s + d for s, d in zip(requests.starts, requests.durations, strict=True))
    n = _buckets(requests, last_end, bucket_s, max_points)
    busy = array("d", bytes(8 * n))  # seconds of execution in each bucket, partial buckets
    full = array("d", bytes(8 * (n + 1)))  # difference array of whole buckets covered
    for start, duration in zip(requests.starts, requests.durations, strict=True):
        if duration <= 0:
            continue
        end = start + duration
        first, last = int(start // bucket_s), min(int(end // bucket_s), n - 1)
        if first == last:
            busy[first] += duration
            continue
        busy[first] += (first + 1) * bucket_s - start
        busy[last] += end - last * bucket_s
        full[first + 1] += 1.0
        full[last] -= 1.0
    running = 0.0
    for i in range(n):
        running += full[i]
        busy[i] = (busy[i] + running * bucket_s) / bucket_s
    return _series(requests, bucket_s, busy)


install_fast_inits(__name__)
