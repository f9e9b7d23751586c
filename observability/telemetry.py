"""One actor's telemetry: its own TracerProvider and MeterProvider, and where they export.

Never touches the global providers (each actor, and each test, builds its own). Export:

- OTLP/HTTP for a signal when `OTEL_EXPORTER_OTLP_ENDPOINT` (base URL; `/v1/traces` and
  `/v1/metrics` are appended) or that signal's `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
  `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (used as is) is set;
- otherwise JSON lines in `<data_dir>/telemetry/`, one span file and one metric file per actor
  instance;
- otherwise (no data dir) nowhere: spans are still created, so propagation keeps working;
- `span_exporter` / `metric_reader` arguments override all of that (tests). An explicit span
  exporter gets a SimpleSpanProcessor (spans are there as soon as they end); production
  exporters get a BatchSpanProcessor. Every exporter is wrapped in a safe exporter.

Shutdown gives every export a deadline of its own, `SHUTDOWN_EXPORT_TIMEOUT_S` (short: an
actor being stopped should not wait out a collector that went away), and `export_stats()`
reads the exporters' failure counts.

`OTEL_SDK_DISABLED=true` or `enabled=False` gives the disabled Telemetry: no-op tracer and
meter, nothing exported, next to no cost.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

from opentelemetry.metrics import Meter, NoOpMeter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import NoOpTracer, Tracer

from observability.jsonl import (
    JsonlMetricExporter,
    JsonlSpanExporter,
    metric_file,
    span_file,
    telemetry_dir,
)
from observability.metrics import DroverMetrics
from observability.records import SERVICE_INSTANCE_ID, SERVICE_NAME
from observability.safe_export import ExportStats, SafeMetricExporter, SafeSpanExporter

ENV_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_TRACES_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENV_METRICS_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
ENV_SDK_DISABLED: Final = "OTEL_SDK_DISABLED"

EXPORT_TIMEOUT_S: Final = 10.0
"""The most a production export (or an explicit flush) may hold its thread up."""
SHUTDOWN_EXPORT_TIMEOUT_S: Final = 1.0
"""The most each export may take once shutdown has begun: what is not out by then is lost
(and counted), so a failing collector costs a stopping actor about a second per signal."""
DEFAULT_METRIC_INTERVAL_S: Final = 30.0

INSTRUMENTATION_SCOPE: Final = "drover"


@dataclass(frozen=True, slots=True)
class OtlpEndpoints:
    traces: str | None
    metrics: str | None


def otlp_endpoints(env: Mapping[str, str] | None = None) -> OtlpEndpoints:
    """The OTLP/HTTP URL for each signal per the standard variables, None where unset."""
    env = os.environ if env is None else env
    base = env.get(ENV_ENDPOINT, "").strip()

    def resolve(specific: str, path: str) -> str | None:
        value = env.get(specific, "").strip()
        if value:
            return value
        if base:
            return base.rstrip("/") + "/" + path
        return None

    return OtlpEndpoints(
        traces=resolve(ENV_TRACES_ENDPOINT, "v1/traces"),
        metrics=resolve(ENV_METRICS_ENDPOINT, "v1/metrics"),
    )


def service_name(role: str) -> str:
    return f"drover-{role}"


class Telemetry:
    """Tracer, meter and instruments of one actor instance. Build with `configure` (or
    `Telemetry.disabled()`); call `shutdown()` when the actor stops (flushes spans)."""

    def __init__(
        self,
        role: str,
        instance_id: str,
        *,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        span_exporter: SafeSpanExporter | None = None,
        metric_exporter: SafeMetricExporter | None = None,
        span_target: str = "none",
        metric_target: str = "none",
    ) -> None:
        self.role = role
        self.instance_id = instance_id
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.span_exporter = span_exporter
        """The (safe) exporter spans go to, None when disabled or exporting nowhere."""
        self.metric_exporter = metric_exporter
        self.span_target = span_target
        """Where spans go, for logs: "otlp <url>", "jsonl <path>", "custom" or "none"."""
        self.metric_target = metric_target
        self.enabled = tracer_provider is not None
        self.tracer: Tracer = (
            tracer_provider.get_tracer(f"{INSTRUMENTATION_SCOPE}.{role}")
            if tracer_provider is not None
            else NoOpTracer()
        )
        self.meter: Meter = (
            meter_provider.get_meter(f"{INSTRUMENTATION_SCOPE}.{role}")
            if meter_provider is not None
            else NoOpMeter(f"{INSTRUMENTATION_SCOPE}.{role}")
        )
        self.metrics = DroverMetrics(self.meter)
        self._shut = False

    @classmethod
    def disabled(cls, role: str = "disabled", instance_id: str = "") -> Telemetry:
        return cls(role, instance_id, tracer_provider=None, meter_provider=None)

    def flush(self, timeout_s: float = EXPORT_TIMEOUT_S) -> bool:
        """Export everything recorded so far; True if both providers flushed."""
        if self._shut:
            return False
        millis = int(timeout_s * 1000)
        ok = True
        if self.tracer_provider is not None:
            ok = self.tracer_provider.force_flush(millis) and ok
        if self.meter_provider is not None:
            ok = self.meter_provider.force_flush(millis) and ok
        return ok

    def export_stats(self) -> dict[str, ExportStats]:
        """The safe exporters' failure accounting by signal ("spans", "metrics"), for the
        signals exported somewhere; still readable after shutdown."""
        stats: dict[str, ExportStats] = {}
        if self.span_exporter is not None:
            stats["spans"] = self.span_exporter.stats()
        if self.metric_exporter is not None:
            stats["metrics"] = self.metric_exporter.stats()
        return stats

    def shutdown(self, timeout_s: float = SHUTDOWN_EXPORT_TIMEOUT_S) -> None:
        """Flush and shut down both providers, each export (and each exporter's shutdown)
        given at most `timeout_s`; idempotent. Never raises."""
        if self._shut:
            return
        self._shut = True
        for exporter in (self.span_exporter, self.metric_exporter):
            if exporter is not None:
                exporter.limit_timeout(timeout_s)
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()  # flushes the batch processor first
        if self.meter_provider is not None:
            # This deadline bounds the reader's last collection *and* its export (itself cut
            # at timeout_s): twice the export's, so that its outcome is known (and counted)
            # when shutdown returns.
            self.meter_provider.shutdown(timeout_millis=int(timeout_s * 2000))

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


def _env_disabled(env: Mapping[str, str]) -> bool:
    return env.get(ENV_SDK_DISABLED, "").strip().lower() == "true"


def configure(
    role: str,
    instance_id: str,
    data_dir: Path | None,
    *,
    span_exporter: SpanExporter | None = None,
    metric_reader: MetricReader | None = None,
    enabled: bool = True,
    env: Mapping[str, str] | None = None,
    metric_interval_s: float = DEFAULT_METRIC_INTERVAL_S,
    export_timeout_s: float = EXPORT_TIMEOUT_S,
) -> Telemetry:
    """Telemetry for one actor instance.

    role: broker, worker, leader, agent, api, ...: `service.name` is `drover-<role>`.
    instance_id: `service.instance.id`, unique per actor (e.g. "worker-3").
    data_dir: where `telemetry/` JSONL files go when no OTLP endpoint is configured.
    span_exporter / metric_reader: explicit destinations (tests), used instead of the above.
    env: the environment to read the OTEL_* variables from (default os.environ).
    """
    env = os.environ if env is None else env
    if not enabled or _env_disabled(env):
        return Telemetry.disabled(role, instance_id)

    resource = Resource.create({SERVICE_NAME: service_name(role), SERVICE_INSTANCE_ID: instance_id})
    endpoints = otlp_endpoints(env)
    directory = telemetry_dir(data_dir) if data_dir is not None else None

    # -- traces
    processor: SpanProcessor | None = None
    safe_spans: SafeSpanExporter | None = None
    span_target = "none"
    if span_exporter is not None:
        safe_spans = SafeSpanExporter(span_exporter)
        processor = SimpleSpanProcessor(safe_spans)
        span_target = "custom"
    else:
        inner: SpanExporter | None = None
        if endpoints.traces is not None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            inner = OTLPSpanExporter(endpoint=endpoints.traces, timeout=export_timeout_s)
            span_target = f"otlp {endpoints.traces}"
        elif directory is not None:
            path = span_file(directory, role, instance_id)
            inner = JsonlSpanExporter(path)
            span_target = f"jsonl {path}"
        if inner is not None:
            safe_spans = SafeSpanExporter(inner, timeout_s=export_timeout_s)
            processor = BatchSpanProcessor(safe_spans)
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=True)
    if processor is not None:
        tracer_provider.add_span_processor(processor)

    # -- metrics
    readers: list[MetricReader] = []
    safe_metrics: SafeMetricExporter | None = None
    metric_target = "none"
    if metric_reader is not None:
        readers.append(metric_reader)
        metric_target = "custom"
    else:
        metric_inner: MetricExporter | None = None
        if endpoints.metrics is not None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )

            metric_inner = OTLPMetricExporter(endpoint=endpoints.metrics, timeout=export_timeout_s)
            metric_target = f"otlp {endpoints.metrics}"
        elif directory is not None:
            path = metric_file(directory, role, instance_id)
            metric_inner = JsonlMetricExporter(path)
            metric_target = f"jsonl {path}"
        if metric_inner is not None:
            safe_metrics = SafeMetricExporter(metric_inner, timeout_s=export_timeout_s)
            readers.append(
                PeriodicExportingMetricReader(
                    safe_metrics,
                    export_interval_millis=metric_interval_s * 1000,
                    export_timeout_millis=export_timeout_s * 1000,
                )
            )
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=True)
    return Telemetry(
        role,
        instance_id,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        span_exporter=safe_spans,
        metric_exporter=safe_metrics,
        span_target=span_target,
        metric_target=metric_target,
    )
