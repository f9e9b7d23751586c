from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from observability.safe_export import SafeMetricExporter, SafeSpanExporter
from observability.telemetry import configure


class RaisingSpanExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError("collector gone")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise ConnectionError("collector gone")

    def shutdown(self) -> None:
        raise ConnectionError("collector gone")


class HangingSpanExporter(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        self.release.wait(10)
        return SpanExportResult.SUCCESS


class FlakySpanExporter(SpanExporter):
    def __init__(self) -> None:
        self.fail = True
        self.exported: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.fail:
            return SpanExportResult.FAILURE
        self.exported += [s.name for s in spans]
        return SpanExportResult.SUCCESS


class RaisingMetricExporter(MetricExporter):
    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        raise OSError("disk full")

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


def test_a_raising_exporter_never_reaches_the_caller(caplog: pytest.LogCaptureFixture) -> None:
    inner = RaisingSpanExporter()
    telemetry = configure("leader", "l1", None, span_exporter=inner, env={})
    caplog.set_level(logging.WARNING, logger="observability.safe_export")
    for i in range(3):  # SimpleSpanProcessor: each span end exports synchronously
        with telemetry.tracer.start_as_current_span(f"apply-{i}"):
            pass
    assert inner.calls == 3
    assert telemetry.span_exporter is not None
    assert telemetry.span_exporter.failures == 3
    assert telemetry.span_exporter.last_error == "ConnectionError: collector gone"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "collector gone" in warnings[0].getMessage()
    assert telemetry.span_exporter.force_flush() is False  # the inner one raised
    telemetry.flush()
    telemetry.shutdown()  # the inner shutdown raises too


def test_a_hanging_exporter_is_cut_off_and_later_batches_dropped() -> None:
    inner = HangingSpanExporter()
    safe = SafeSpanExporter(inner, timeout_s=0.2)
    started = time.monotonic()
    assert safe.export([]) is SpanExportResult.FAILURE
    assert 0.15 < time.monotonic() - started < 2
    started = time.monotonic()
    assert safe.export([]) is SpanExportResult.FAILURE  # still stuck: dropped at once
    assert time.monotonic() - started < 0.1
    assert (inner.calls, safe.failures, safe.dropped) == (1, 2, 1)
    assert safe.last_error == "timed out after 0.2s"
    inner.release.set()
    time.sleep(0.05)
    assert safe.export([]) is SpanExportResult.SUCCESS  # recovered
    assert inner.calls == 2
    safe.shutdown()


def test_failure_results_are_counted_and_recovery_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = FlakySpanExporter()
    telemetry = configure("worker", "w", None, span_exporter=inner, env={})
    caplog.set_level(logging.INFO, logger="observability.safe_export")
    with telemetry.tracer.start_as_current_span("lost-1"):
        pass
    with telemetry.tracer.start_as_current_span("lost-2"):
        pass
    inner.fail = False
    with telemetry.tracer.start_as_current_span("kept"):
        pass
    assert inner.exported == ["kept"]
    assert telemetry.span_exporter is not None and telemetry.span_exporter.failures == 2
    messages = [r.getMessage() for r in caplog.records]
    assert sum("failed" in m for m in messages) == 1
    assert sum("recovered after 2 failure(s)" in m for m in messages) == 1
    telemetry.shutdown()


def test_a_raising_metric_exporter_returns_failure() -> None:
    safe = SafeMetricExporter(RaisingMetricExporter())
    result = safe.export(MetricsData(resource_metrics=[]))
    assert result is MetricExportResult.FAILURE
    assert safe.failures == 1 and safe.last_error == "OSError: disk full"
    safe.shutdown()
