"""The `drover` metric source: what client agents report allocations use, kept per task
group for a while, and read with Nomad APM's `<operation>_<metric>` queries.

Sources: "drover", and "nomad-apm" read as "drover" (Nomad's default APM reads the same
allocation metrics, so a Nomad policy that names it works unchanged). Queries:

    avg_cpu                        Nomad APM's short form: the policy's own group
    taskgroup_avg_cpu              Nomad's prefixed form, the same
    taskgroup_avg_cpu/<group>/<job>  Nomad's expanded form: names the group (same namespace)

operation: avg | min | max | sum (Nomad's) | p50 | p90 | p95 | p99 (drover's percentiles,
linear between closest ranks), over the group's allocations at one time;
metric: cpu (percent of one core, Nomad's `cpu.total_percent`), memory (MB resident),
cpu-allocated / memory-allocated (percent of the allocation's allocated CPU / memory).

Where Nomad's APM answers one instant value, this store keeps a history, so a check's
`query_window` is honoured: a point per `bucket_s` of report times within [start, end], each
computed over every allocation's latest sample no older than `lookback_s` (agents report at
their own pace, so one bucket rarely holds every allocation). An instant query gets one
point at its end. A window without samples gives no points: the core's "no metrics
available". Samples older than `horizon_s` are dropped, and each group keeps at most
`max_samples` (the newest).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from contracts.autoscaling import MetricPoint, MetricQuery, MetricReadError
from contracts.usage import AllocUsage

GroupKey = tuple[str, str, str]  # (namespace, job id, group)

DEFAULT_HORIZON_S = 3600.0
DEFAULT_MAX_SAMPLES = 20_000
DEFAULT_LOOKBACK_S = 5.0  # a few of the agents' report intervals (1 s by default)
DEFAULT_BUCKET_S = 1.0

# The metric sources this store answers: Nomad's default APM (nomad-apm) reads the same
# allocation metrics, so Nomad policies that name it work unchanged.
SOURCES = ("drover", "nomad-apm")
OPERATIONS = ("avg", "min", "max", "sum", "p50", "p90", "p95", "p99")
METRICS = ("cpu", "memory", "cpu-allocated", "memory-allocated")
_PREFIX = "taskgroup_"

VALID_FORMS = (
    "<operation>_<metric>, taskgroup_<operation>_<metric> or "
    "taskgroup_<operation>_<metric>/<group>/<job>, where operation is one of "
    f"{', '.join(OPERATIONS)} and metric one of {', '.join(METRICS)}"
)


@dataclass(frozen=True, slots=True)
class GroupQuery:
    operation: str
    metric: str
    group: str = ""  # "" : the policy's target group
    job: str = ""


@lru_cache(maxsize=1024)
def parse_query(text: str) -> GroupQuery:
    """A query string -> GroupQuery; MetricReadError naming the query and the valid forms."""
    body, group, job = text, "", ""
    if "/" in text:
        parts = text.split("/")
        if len(parts) != 3 or not text.startswith(_PREFIX) or not parts[1] or not parts[2]:
            raise _unknown(text)
        body, group, job = parts
    body = body.removeprefix(_PREFIX)
    operation, _, metric = body.partition("_")
    if operation not in OPERATIONS or metric not in METRICS:
        raise _unknown(text)
    return GroupQuery(operation, metric, group, job)


def _unknown(text: str) -> MetricReadError:
    return MetricReadError(f'unknown query "{text}" for source "drover": expected {VALID_FORMS}')


def _value(metric: str) -> Callable[[AllocUsage], float | None]:
    if metric == "cpu":
        return lambda s: s.cpu_percent
    if metric == "memory":
        return lambda s: s.memory_mb
    if metric == "cpu-allocated":
        return lambda s: s.cpu_mhz * 100.0 / s.allocated_cpu_mhz if s.allocated_cpu_mhz else None
    return lambda s: s.memory_mb * 100.0 / s.allocated_memory_mb if s.allocated_memory_mb else None


def aggregate(operation: str, values: Sequence[float]) -> float:
    """One operation over a non-empty set of values."""
    if operation == "avg":
        return math.fsum(values) / len(values)
    if operation == "sum":
        return math.fsum(values)
    if operation == "min":
        return min(values)
    if operation == "max":
        return max(values)
    return percentile(sorted(values), float(operation[1:]))


def percentile(ordered: Sequence[float], p: float) -> float:
    """The p-th percentile of sorted values, linear between the closest ranks."""
    rank = (len(ordered) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class UsageStore:
    def __init__(
        self,
        *,
        horizon_s: float = DEFAULT_HORIZON_S,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        lookback_s: float = DEFAULT_LOOKBACK_S,
        bucket_s: float = DEFAULT_BUCKET_S,
    ) -> None:
        self.horizon_s = horizon_s
        self.max_samples = max_samples
        self.lookback_s = lookback_s
        self.bucket_s = bucket_s
        self._series: dict[GroupKey, deque[AllocUsage]] = {}
        self._tracked: frozenset[GroupKey] | None = None  # None: every group is kept

    def track(self, keys: Iterable[GroupKey] | None) -> None:
        """Keep only these groups' samples (those some policy reads); None keeps all."""
        self._tracked = None if keys is None else frozenset(keys)
        if self._tracked is not None:
            for key in [k for k in self._series if k not in self._tracked]:
                del self._series[key]

    def add(self, samples: Iterable[AllocUsage]) -> int:
        """Store samples of tracked groups; returns how many were kept."""
        kept = 0
        tracked = self._tracked
        for sample in samples:
            key = (sample.namespace, sample.job_id, sample.task_group)
            if tracked is not None and key not in tracked:
                continue
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = deque(maxlen=self.max_samples)
            series.append(sample)  # mostly in time order; a query sorts its window
            kept += 1
        return kept

    def prune(self, now_s: float) -> int:
        """Drop samples older than the horizon, and groups left empty; returns how many."""
        oldest_ns = int((now_s - self.horizon_s) * 1e9)
        dropped = 0
        for key in list(self._series):
            series = self._series[key]
            while series and series[0].time_ns < oldest_ns:
                series.popleft()
                dropped += 1
            if not series:
                del self._series[key]
        return dropped

    def groups(self) -> list[GroupKey]:
        return list(self._series)

    def sample_count(self) -> int:
        return sum(len(s) for s in self._series.values())

    def query(
        self,
        target: GroupKey,
        text: str,
        start_s: float,
        end_s: float,
        instant: bool = False,
        live: Callable[[str], bool] | None = None,
    ) -> list[MetricPoint]:
        """The points of a query over [start_s, end_s] for the target group (or the group
        the query names). `live`: whether an allocation still runs; the last samples of
        one that stopped are left out at once, not after the lookback (a scale-down's
        stopped allocations would otherwise make the rest look idle for seconds)."""
        parsed = parse_query(text)
        namespace, job, group = target
        key = (namespace, parsed.job or job, parsed.group or group)
        series = self._series.get(key)
        if not series:
            return []
        value = _value(parsed.metric)
        low_ns = int((start_s - self.lookback_s) * 1e9)
        high_ns = int(end_s * 1e9)
        window = sorted(
            (
                s
                for s in series
                if low_ns < s.time_ns <= high_ns and (live is None or live(s.alloc_id))
            ),
            key=lambda s: s.time_ns,
        )
        if instant or start_s >= end_s:
            point = self._point(parsed.operation, window, value, end_s)
            return [point] if point is not None else []
        return self._points(parsed.operation, window, value, start_s)

    def reader(
        self, target: GroupKey, live: Callable[[str], bool] | None = None
    ) -> Callable[[MetricQuery], Sequence[MetricPoint]]:
        """A policy's metric reader (the core's MetricReader) for its target group; `live`
        as for `query`."""

        def read(query: MetricQuery) -> Sequence[MetricPoint]:
            if query.source not in SOURCES:
                raise MetricReadError(
                    f'unknown metric source "{query.source}": this autoscaler reads "drover" '
                    '(Nomad\'s "nomad-apm" is read as "drover")'
                )
            return self.query(target, query.query, query.start_s, query.end_s, query.instant, live)

        return read

    def _points(
        self,
        operation: str,
        window: list[AllocUsage],
        value: Callable[[AllocUsage], float | None],
        start_s: float,
    ) -> list[MetricPoint]:
        latest: dict[str, tuple[float, float]] = {}  # alloc id -> (time s, value)
        points: list[MetricPoint] = []
        i, n = 0, len(window)
        while i < n:
            bucket = math.floor(window[i].time_ns / 1e9 / self.bucket_s)
            t = 0.0
            while i < n and math.floor(window[i].time_ns / 1e9 / self.bucket_s) == bucket:
                sample = window[i]
                t = sample.time_ns / 1e9
                v = value(sample)
                if v is not None:
                    latest[sample.alloc_id] = (t, v)
                i += 1
            if t >= start_s:
                fresh = [v for at, v in latest.values() if at > t - self.lookback_s]
                if fresh:
                    points.append((t, aggregate(operation, fresh)))
        return points

    def _point(
        self,
        operation: str,
        window: list[AllocUsage],
        value: Callable[[AllocUsage], float | None],
        at_s: float,
    ) -> MetricPoint | None:
        latest: dict[str, float] = {}
        for sample in window:  # in time order: the last one of each allocation stays
            v = value(sample)
            if v is not None:
                latest[sample.alloc_id] = v
        if not latest:
            return None
        return (at_s, aggregate(operation, list(latest.values())))
