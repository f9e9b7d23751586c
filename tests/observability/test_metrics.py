from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from observability import metrics as m
from observability.telemetry import Telemetry

InMemory = Callable[..., tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]]

Points = dict[str, dict[frozenset[tuple[str, Any]], Any]]


def collect(reader: InMemoryMetricReader) -> Points:
    """{metric name: {frozenset(attributes): data point}}."""
    data = reader.get_metrics_data()
    assert data is not None
    points: Points = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    key = frozenset((point.attributes or {}).items())
                    points.setdefault(metric.name, {})[key] = point
    return points


def test_counters_and_histograms(in_memory: InMemory) -> None:
    telemetry, _, reader = in_memory("leader", "l1")
    metrics = telemetry.metrics
    metrics.record_eval("job-register", "complete", latency_s=0.02)
    metrics.record_eval("job-register", "complete", latency_s=0.04)
    metrics.record_eval("node-update", "blocked")
    metrics.record_plan_apply("partial", 0.003, ["cpu exhausted", "cpu exhausted", "node gone"])
    metrics.record_plan_apply("committed", 0.001)
    metrics.record_placements(5)
    metrics.record_placements(0)
    metrics.record_placements(2, outcome="failed")
    metrics.record_retry("service")
    metrics.record_blocked_eval("job-register")
    metrics.record_alloc_status("running", 3)

    points = collect(reader)
    evals = points[m.EVALS]
    key = frozenset({("drover.eval.trigger", "job-register"), ("drover.eval.outcome", "complete")})
    assert evals[key].value == 2
    assert (
        evals[
            frozenset({("drover.eval.trigger", "node-update"), ("drover.eval.outcome", "blocked")})
        ].value
        == 1
    )
    latency = points[m.EVAL_LATENCY][key]
    assert latency.count == 2 and abs(latency.sum - 0.06) < 1e-9
    assert tuple(latency.explicit_bounds) == m.LATENCY_BUCKETS_S

    rejected = points[m.PLAN_REJECTED_NODES]
    assert (
        rejected[
            frozenset(
                {("drover.reject.reason", "cpu exhausted"), ("drover.reject.dimension", "cpu")}
            )
        ].value
        == 2
    )
    assert (
        rejected[
            frozenset({("drover.reject.reason", "node gone"), ("drover.reject.dimension", "node")})
        ].value
        == 1
    )
    applies = points[m.PLAN_APPLIES]
    assert applies[frozenset({("drover.plan.outcome", "partial")})].value == 1
    assert applies[frozenset({("drover.plan.outcome", "committed")})].value == 1
    assert points[m.PLAN_APPLY_LATENCY][frozenset({("drover.plan.outcome", "partial")})].count == 1
    placements = points[m.PLACEMENTS]
    assert placements[frozenset({("drover.placement.outcome", "committed")})].value == 5
    assert placements[frozenset({("drover.placement.outcome", "failed")})].value == 2
    assert points[m.EVAL_RETRIES][frozenset({("drover.eval.type", "service")})].value == 1
    assert points[m.EVALS_BLOCKED][frozenset({("drover.eval.trigger", "job-register")})].value == 1
    statuses = points[m.ALLOC_STATUS_UPDATES]
    assert statuses[frozenset({("drover.alloc.client_status", "running")})].value == 3
    assert all(name.startswith("drover.") for name in points)


def test_backlog_and_allocation_gauges_come_from_callbacks(in_memory: InMemory) -> None:
    telemetry, _, reader = in_memory("broker", "b1")
    backlog = {"g1": 4}
    unregister = telemetry.metrics.register_backlog(
        lambda: [("drover:evals", group, n) for group, n in backlog.items()]
    )
    telemetry.metrics.register_backlog(lambda: [("drover:plans", "leader", 1)])
    telemetry.metrics.register_alloc_counts(lambda: {"running": 7, "pending": 2})

    points = collect(reader)[m.STREAM_BACKLOG]
    evals_key = frozenset(
        {
            ("messaging.system", "redis"),
            ("messaging.destination.name", "drover:evals"),
            ("messaging.consumer.group.name", "g1"),
        }
    )
    assert points[evals_key].value == 4
    assert len(points) == 2
    allocs = collect(reader)[m.ALLOCATIONS]
    assert allocs[frozenset({("drover.alloc.client_status", "running")})].value == 7
    assert allocs[frozenset({("drover.alloc.client_status", "pending")})].value == 2

    backlog["g1"] = 9
    assert collect(reader)[m.STREAM_BACKLOG][evals_key].value == 9
    unregister()
    remaining = collect(reader)[m.STREAM_BACKLOG]
    assert evals_key not in remaining or remaining[evals_key].value == 9  # no new observation
    assert (
        frozenset(
            {
                ("messaging.system", "redis"),
                ("messaging.destination.name", "drover:plans"),
                ("messaging.consumer.group.name", "leader"),
            }
        )
        in remaining
    )


def test_a_failing_gauge_callback_does_not_hide_the_others(in_memory: InMemory) -> None:
    telemetry, _, reader = in_memory("broker", "b1")

    def broken() -> list[tuple[str, str, int]]:
        raise ConnectionError("redis down")

    telemetry.metrics.register_backlog(broken)
    telemetry.metrics.register_backlog(lambda: [("drover:evals", "g", 2)])
    points = collect(reader)[m.STREAM_BACKLOG]
    assert [p.value for p in points.values()] == [2]
