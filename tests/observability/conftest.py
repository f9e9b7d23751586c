"""Fixtures for the observability tests: Telemetry instances on in-memory exporters, each with
its own providers, shut down after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from observability.telemetry import Telemetry, configure

InMemoryTelemetry = tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]


@pytest.fixture
def in_memory() -> Iterator[Callable[..., InMemoryTelemetry]]:
    """`in_memory(role, instance_id)` -> (telemetry, span exporter, metric reader)."""
    made: list[Telemetry] = []

    def make(role: str = "worker", instance_id: str = "worker-1") -> InMemoryTelemetry:
        spans = InMemorySpanExporter()
        reader = InMemoryMetricReader()
        telemetry = configure(
            role, instance_id, None, span_exporter=spans, metric_reader=reader, env={}
        )
        made.append(telemetry)
        return telemetry, spans, reader

    yield make
    for telemetry in made:
        telemetry.shutdown()
