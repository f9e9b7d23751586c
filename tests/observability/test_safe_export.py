from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from observability.safe_export import ExportStats, SafeMetricExporter, SafeSpanExporter
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
    """Each export hangs until released (a collector that accepts and never answers)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.calls = 0
        self.returned = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        self.entered.set()
        self.release.wait(60)
        self.returned += 1
        return SpanExportResult.SUCCESS


class RetryingSpanExporter(SpanExporter):
    """Like OTLP's: an export retries until its own deadline, and only shutdown aborts it."""

    def __init__(self) -> None:
        self.shut = threading.Event()
        self.aborted = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.shut.wait(60):
            self.aborted.set()
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.shut.set()


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


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
    assert safe.export([]) is SpanExportResult.FAILURE
    assert (inner.calls, inner.returned) == (1, 0)  # abandoned at the deadline, not waited out
    assert safe.stuck
    assert safe.export([]) is SpanExportResult.FAILURE  # still stuck: dropped, never tried
    assert (inner.calls, safe.failures, safe.dropped) == (1, 2, 1)
    assert safe.last_error == "timed out after 0.2s"
    assert safe.stats() == ExportStats(2, 1, "timed out after 0.2s", stuck=True)
    inner.release.set()
    assert wait_until(lambda: not safe.stuck)
    assert safe.export([]) is SpanExportResult.SUCCESS  # recovered
    assert (inner.calls, inner.returned) == (2, 2)
    safe.shutdown()


def test_a_shortened_deadline_cuts_off_an_export_already_waiting() -> None:
    """Shutdown shortens the deadline while the batch processor may already be waiting on an
    export under the long one: that wait ends at the short deadline too."""
    inner = HangingSpanExporter()
    safe = SafeSpanExporter(inner, timeout_s=60.0)
    results: list[SpanExportResult] = []
    caller = threading.Thread(target=lambda: results.append(safe.export([])))
    caller.start()
    assert inner.entered.wait(30)
    safe.limit_timeout(0.2)
    caller.join(30)
    assert not caller.is_alive() and results == [SpanExportResult.FAILURE]
    assert inner.returned == 0 and safe.last_error == "timed out after 0.2s"
    safe.limit_timeout(5.0)  # a deadline is only ever shortened
    assert safe.stats().failures == 1
    inner.release.set()
    safe.shutdown()


def test_shutdown_reaches_the_inner_exporter_past_a_stuck_export() -> None:
    """Queued behind the stuck export, the inner shutdown would be dropped and the export
    would go on retrying; it is what aborts that export, so it goes through."""
    inner = RetryingSpanExporter()
    safe = SafeSpanExporter(inner, timeout_s=0.2)
    assert safe.export([]) is SpanExportResult.FAILURE and safe.stuck
    safe.shutdown()
    assert inner.shut.is_set()
    assert inner.aborted.wait(30)
    assert wait_until(lambda: not safe.stuck)
    assert safe.stats() == ExportStats(1, 0, "timed out after 0.2s", stuck=False)


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
    assert safe.stats() == ExportStats(1, 0, "OSError: disk full", stuck=False)
    safe.shutdown()
