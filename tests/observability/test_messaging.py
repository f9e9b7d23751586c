from __future__ import annotations

from collections.abc import Callable

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from observability import conventions as c
from observability.messaging import batch_span, process_span, send_span
from observability.telemetry import Telemetry

InMemory = Callable[..., tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]]


def test_send_then_process_is_one_trace_with_messaging_attributes(in_memory: InMemory) -> None:
    worker, worker_spans, _ = in_memory("worker", "w1")
    leader, leader_spans, _ = in_memory("leader", "l1")
    with send_span(worker.tracer, "drover:plans") as (sent, carrier):
        sent.set_attribute(c.MESSAGING_MESSAGE_ID, "1-0")
    with process_span(
        leader.tracer, "drover:plans", carrier, group="leader", message_id="1-0"
    ) as processing:
        processing.set_attribute(c.EVAL_ID, "e1")

    (producer,) = worker_spans.get_finished_spans()
    (consumer,) = leader_spans.get_finished_spans()
    assert (producer.name, producer.kind) == ("send drover:plans", SpanKind.PRODUCER)
    assert (consumer.name, consumer.kind) == ("process drover:plans", SpanKind.CONSUMER)
    assert dict(producer.attributes or {}) == {
        "messaging.system": "redis",
        "messaging.destination.name": "drover:plans",
        "messaging.operation.type": "send",
        "messaging.operation.name": "xadd",
        "messaging.message.id": "1-0",
    }
    assert dict(consumer.attributes or {}) == {
        "messaging.system": "redis",
        "messaging.destination.name": "drover:plans",
        "messaging.operation.type": "process",
        "messaging.operation.name": "xreadgroup",
        "messaging.consumer.group.name": "leader",
        "messaging.message.id": "1-0",
        "drover.eval.id": "e1",
    }
    assert producer.context is not None and consumer.context is not None
    assert consumer.parent is not None
    assert consumer.context.trace_id == producer.context.trace_id
    assert consumer.parent.span_id == producer.context.span_id


def test_link_only_starts_a_new_trace_linked_to_the_sender(in_memory: InMemory) -> None:
    telemetry, spans, _ = in_memory()
    with send_span(telemetry.tracer, "drover:evals") as (_, carrier):
        pass
    with (
        telemetry.tracer.start_as_current_span("unrelated outer"),
        process_span(telemetry.tracer, "drover:evals", carrier, link_only=True),
    ):
        pass
    producer = next(s for s in spans.get_finished_spans() if s.name.startswith("send"))
    consumer = next(s for s in spans.get_finished_spans() if s.name.startswith("process"))
    assert consumer.parent is None  # not even the current span
    assert consumer.context is not None and producer.context is not None
    assert consumer.context.trace_id != producer.context.trace_id
    (link,) = consumer.links
    assert link.context.span_id == producer.context.span_id


def test_batch_span_links_each_message(in_memory: InMemory) -> None:
    telemetry, spans, _ = in_memory()
    carriers: list[dict[str, str] | None] = []
    for _ in range(3):
        with send_span(telemetry.tracer, "drover:plans") as (_, carrier):
            carriers.append(carrier)
    carriers.append(None)  # a message sent without context
    with batch_span(telemetry.tracer, c.SPAN_PLAN_APPLY_BATCH, carriers):
        pass
    batch = next(s for s in spans.get_finished_spans() if s.name == c.SPAN_PLAN_APPLY_BATCH)
    senders = [s for s in spans.get_finished_spans() if s.name == "send drover:plans"]
    assert batch.parent is None
    assert (batch.attributes or {})[c.MESSAGING_BATCH_COUNT] == 4
    assert {link.context.span_id for link in batch.links} == {
        s.context.span_id for s in senders if s.context is not None
    }


def test_disabled_tracer_yields_a_non_recording_span_and_no_context() -> None:
    telemetry = Telemetry.disabled()
    with send_span(telemetry.tracer, "drover:plans") as (span, carrier):
        assert not span.is_recording() and carrier == {}
    with process_span(telemetry.tracer, "drover:plans", {"traceparent": "x"}) as span:
        assert not span.is_recording()
