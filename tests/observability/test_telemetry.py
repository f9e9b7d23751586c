from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import INVALID_SPAN, NoOpTracer

from observability.jsonl import JsonlMetricExporter, JsonlSpanExporter, load_spans
from observability.propagation import inject
from observability.safe_export import SafeSpanExporter
from observability.telemetry import (
    EXPORT_TIMEOUT_S,
    SHUTDOWN_EXPORT_TIMEOUT_S,
    Telemetry,
    configure,
    otlp_endpoints,
)

InMemory = Callable[..., tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]]


class HangingSpanExporter(SpanExporter):
    """A collector that accepts the connection and never answers."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self.returned = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        self.release.wait(EXPORT_TIMEOUT_S * 6)
        self.returned += 1
        return SpanExportResult.SUCCESS


def test_resource_names_the_role_and_instance(in_memory: InMemory) -> None:
    telemetry, spans, _ = in_memory("broker", "broker-7")
    with telemetry.tracer.start_as_current_span("x"):
        pass
    (span,) = spans.get_finished_spans()
    assert span.resource.attributes["service.name"] == "drover-broker"
    assert span.resource.attributes["service.instance.id"] == "broker-7"
    assert telemetry.enabled and telemetry.span_target == "custom"


def test_each_telemetry_has_its_own_providers(in_memory: InMemory) -> None:
    a, spans_a, _ = in_memory("worker", "w1")
    b, spans_b, _ = in_memory("leader", "l1")
    assert a.tracer_provider is not b.tracer_provider
    with a.tracer.start_as_current_span("only-a"):
        pass
    assert [s.name for s in spans_a.get_finished_spans()] == ["only-a"]
    assert spans_b.get_finished_spans() == ()


def test_jsonl_files_per_instance_without_otlp(tmp_path: Path) -> None:
    telemetry = configure("worker", "worker-2", tmp_path, env={})
    assert telemetry.span_exporter is not None
    assert isinstance(telemetry.span_exporter.inner, JsonlSpanExporter)
    assert telemetry.metric_exporter is not None
    assert isinstance(telemetry.metric_exporter.inner, JsonlMetricExporter)
    with telemetry.tracer.start_as_current_span("schedule"):
        pass
    telemetry.metrics.record_eval("job-register", "complete", 0.01)
    telemetry.shutdown()
    directory = tmp_path / "telemetry"
    assert sorted(p.name for p in directory.iterdir()) == [
        "metrics-worker-worker-2.jsonl",
        "spans-worker-worker-2.jsonl",
    ]
    (record,) = load_spans(tmp_path)
    assert (record.name, record.service_name, record.service_instance) == (
        "schedule",
        "drover-worker",
        "worker-2",
    )
    metrics_line = orjson.loads((directory / "metrics-worker-worker-2.jsonl").read_bytes())
    names = [
        m["name"]
        for rm in metrics_line["resource_metrics"]
        for sm in rm["scope_metrics"]
        for m in sm["metrics"]
    ]
    assert "drover.evals" in names


def test_shutdown_flushes_spans_pending_in_the_batch_processor(tmp_path: Path) -> None:
    telemetry = configure("leader", "leader-1", tmp_path, env={})
    for i in range(5):
        with telemetry.tracer.start_as_current_span(f"apply-{i}"):
            pass
    span_file = tmp_path / "telemetry" / "spans-leader-leader-1.jsonl"
    # The batch processor's delay is 5 s: nothing is written yet.
    assert not span_file.exists() or span_file.read_bytes() == b""
    telemetry.shutdown()
    assert sorted(s.name for s in load_spans(span_file)) == [f"apply-{i}" for i in range(5)]
    telemetry.shutdown()  # idempotent


def test_flush_writes_without_shutting_down(tmp_path: Path) -> None:
    telemetry = configure("agent", "a1", tmp_path, env={})
    with telemetry.tracer.start_as_current_span("first"):
        pass
    assert telemetry.flush()
    assert [s.name for s in load_spans(tmp_path)] == ["first"]
    with telemetry.tracer.start_as_current_span("second"):
        pass
    telemetry.shutdown()
    assert [s.name for s in load_spans(tmp_path)] == ["first", "second"]


def test_otlp_endpoints_follow_the_standard_variables() -> None:
    assert otlp_endpoints({}) == otlp_endpoints({"OTHER": "x"})
    assert otlp_endpoints({}).traces is None and otlp_endpoints({}).metrics is None
    both = otlp_endpoints({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert both.traces == "http://collector:4318/v1/traces"
    assert both.metrics == "http://collector:4318/v1/metrics"
    specific = otlp_endpoints(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:9999/custom",
        }
    )
    assert specific.traces == "http://traces:9999/custom"
    assert specific.metrics == "http://collector:4318/v1/metrics"


def test_otlp_chosen_when_the_endpoint_is_set(tmp_path: Path) -> None:
    # Port 9 on loopback refuses connections: nothing leaves the machine, and the shutdown
    # flush (which does try to export) must fail quietly and quickly.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    telemetry = configure("worker", "w1", tmp_path, env=env, export_timeout_s=0.5)
    assert telemetry.span_exporter is not None and telemetry.metric_exporter is not None
    assert isinstance(telemetry.span_exporter.inner, OTLPSpanExporter)
    assert isinstance(telemetry.metric_exporter.inner, OTLPMetricExporter)
    assert telemetry.span_target == "otlp http://127.0.0.1:9/v1/traces"
    assert telemetry.metric_target == "otlp http://127.0.0.1:9/v1/metrics"
    with telemetry.tracer.start_as_current_span("lost"):
        pass
    telemetry.metrics.record_eval("job-register", "complete", 0.01)
    telemetry.shutdown()
    stats = telemetry.export_stats()
    assert stats["spans"].failures >= 1 and stats["metrics"].failures >= 1  # counted, not raised
    assert not (tmp_path / "telemetry").exists()


def test_shutdown_cuts_exports_off_at_the_shutdown_deadline() -> None:
    """A collector that never answers holds a stopping actor up only for the short shutdown
    deadline, not the normal export timeout: the export is abandoned (counted), not waited
    out."""
    inner = HangingSpanExporter()
    safe = SafeSpanExporter(inner, timeout_s=EXPORT_TIMEOUT_S * 6)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(safe))
    telemetry = Telemetry(
        "worker", "w1", tracer_provider=provider, meter_provider=None, span_exporter=safe
    )
    with telemetry.tracer.start_as_current_span("pending"):
        pass
    try:
        telemetry.shutdown()
        assert inner.calls == 1 and inner.returned == 0
        stats = telemetry.export_stats()["spans"]
        assert stats.last_error == f"timed out after {SHUTDOWN_EXPORT_TIMEOUT_S:g}s"
        assert stats.failures >= 1
    finally:
        inner.release.set()


def test_otlp_per_signal_leaves_the_other_signal_on_jsonl(tmp_path: Path) -> None:
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}
    telemetry = configure("worker", "w1", tmp_path, env=env, export_timeout_s=0.5)
    assert telemetry.span_exporter is not None and telemetry.metric_exporter is not None
    assert isinstance(telemetry.span_exporter.inner, OTLPSpanExporter)
    assert isinstance(telemetry.metric_exporter.inner, JsonlMetricExporter)
    assert telemetry.span_target == "otlp http://127.0.0.1:9/v1/traces"
    telemetry.shutdown()


def test_no_data_dir_and_no_endpoint_exports_nowhere_but_still_propagates() -> None:
    telemetry = configure("api", "api-1", None, env={})
    assert telemetry.span_exporter is None and telemetry.span_target == "none"
    with telemetry.tracer.start_as_current_span("x") as span:
        assert inject(span)["traceparent"].startswith("00-")
    telemetry.shutdown()


@pytest.mark.parametrize(
    "make",
    [
        lambda d: configure("worker", "w", d, enabled=False, env={}),
        lambda d: configure("worker", "w", d, env={"OTEL_SDK_DISABLED": "true"}),
        lambda d: Telemetry.disabled("worker", "w"),
    ],
)
def test_disabled_mode_is_a_no_op(tmp_path: Path, make: Callable[[Path], Telemetry]) -> None:
    telemetry = make(tmp_path)
    assert not telemetry.enabled
    assert isinstance(telemetry.tracer, NoOpTracer)
    assert telemetry.tracer_provider is None and telemetry.meter_provider is None
    with telemetry.tracer.start_as_current_span("x") as span:
        assert not span.is_recording()
        assert inject(span) == {}
    telemetry.metrics.record_eval("job-register", "complete", 0.1)
    telemetry.metrics.record_plan_apply("partial", 0.01, ["cpu exhausted"])
    telemetry.metrics.register_backlog(lambda: [("s", "g", 3)])
    assert telemetry.flush() is True
    telemetry.shutdown()
    assert not (tmp_path / "telemetry").exists()


def test_disabled_spans_are_one_shared_no_op_span() -> None:
    """Why disabled tracing costs next to nothing (the cost itself is measured in bench/):
    no span object is built, nothing is recorded, nothing reaches a processor."""
    telemetry = Telemetry.disabled()
    assert telemetry.tracer.start_span("x") is INVALID_SPAN
    with telemetry.tracer.start_as_current_span("y", attributes={"a": 1}) as span:
        assert span is INVALID_SPAN
    assert telemetry.export_stats() == {}


def test_context_manager_shuts_down(tmp_path: Path) -> None:
    with configure("worker", "w9", tmp_path, env={}) as telemetry:
        span = telemetry.tracer.start_span("inside")
        span.end()
    assert [s.name for s in load_spans(tmp_path)] == ["inside"]
