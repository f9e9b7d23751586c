from __future__ import annotations

import re
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, TraceFlags, TraceState

from observability.propagation import extract, inject, link_to, span_context
from observability.telemetry import Telemetry

InMemory = Callable[..., tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]]

TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-3]$")


def test_inject_gives_the_w3c_traceparent_of_the_span(in_memory: InMemory) -> None:
    telemetry, _, _ = in_memory()
    with telemetry.tracer.start_as_current_span("send") as span:
        carrier = inject(span)
        assert inject() == carrier  # the current span
        assert inject(trace.set_span_in_context(span)) == carrier
    assert set(carrier) == {"traceparent"}
    assert TRACEPARENT.match(carrier["traceparent"])
    ctx = span.get_span_context()
    assert carrier["traceparent"].split("-")[1:3] == [
        f"{ctx.trace_id:032x}",
        f"{ctx.span_id:016x}",
    ]


def test_extract_continues_the_trace_in_another_telemetry(in_memory: InMemory) -> None:
    sender, _, _ = in_memory("worker", "w1")
    receiver, received, _ = in_memory("leader", "l1")
    with sender.tracer.start_as_current_span("plan.submit") as span:
        carrier = inject(span)
    with receiver.tracer.start_as_current_span("plan.apply", context=extract(carrier)):
        pass
    (child,) = received.get_finished_spans()
    assert child.context is not None and child.parent is not None
    assert child.context.trace_id == span.get_span_context().trace_id
    assert child.parent.span_id == span.get_span_context().span_id
    assert child.parent.is_remote


def test_tracestate_travels() -> None:
    context = SpanContext(
        trace_id=0x1234,
        span_id=0x5678,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("drover", "x1")]),
    )
    carrier = inject(trace.set_span_in_context(trace.NonRecordingSpan(context)))
    assert carrier["tracestate"] == "drover=x1"
    back = span_context(carrier)
    assert back is not None
    assert (back.trace_id, back.span_id, back.trace_state.get("drover")) == (0x1234, 0x5678, "x1")


def test_missing_or_malformed_context_gives_a_root(in_memory: InMemory) -> None:
    telemetry, spans, _ = in_memory()
    for carrier in ({}, None, {"traceparent": "garbage"}, {"baggage": "k=v"}):
        assert span_context(carrier) is None
        assert link_to(carrier) is None
        with telemetry.tracer.start_as_current_span("root", context=extract(carrier)):
            pass
    assert all(s.parent is None for s in spans.get_finished_spans())
    assert len(spans.get_finished_spans()) == 4


def test_link_to_points_at_the_sender(in_memory: InMemory) -> None:
    telemetry, _, _ = in_memory()
    with telemetry.tracer.start_as_current_span("send") as span:
        carrier = inject(span)
    link = link_to(carrier, role="plan")
    assert link is not None
    assert link.context.span_id == span.get_span_context().span_id
    assert dict(link.attributes or {}) == {"role": "plan"}
