"""What every actor's tracing interceptor starts from: the telemetry it is given (on or off)
and the attributes an evaluation carries on every span of its trace, whichever actor."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actors.runtime.tracing import ActorTracing, evaluation_attributes
from contracts import Evaluation, TriggeredBy
from observability import Telemetry, configure
from observability import conventions as c


def test_an_evaluation_is_described_the_same_way_by_every_actor() -> None:
    ev = Evaluation(
        id="e1",
        namespace="prod",
        priority=70,
        type="batch",
        triggered_by=TriggeredBy.NODE_UPDATE,
        job_id="etl",
    )
    assert evaluation_attributes(ev, delivery=3) == {
        c.EVAL_ID: "e1",
        c.JOB_ID: "etl",
        c.NAMESPACE: "prod",
        c.EVAL_TRIGGER: "node-update",  # the wire value, as the metrics' trigger label
        c.EVAL_TYPE: "batch",
        c.EVAL_PRIORITY: 70,
        c.EVAL_DELIVERY: 3,
    }
    assert c.EVAL_DELIVERY not in evaluation_attributes(ev)  # only the broker knows it


def test_an_interceptor_records_through_its_actors_telemetry_or_not_at_all() -> None:
    spans = InMemorySpanExporter()
    telemetry = configure("broker", "b1", None, span_exporter=spans, env={})
    try:
        on = ActorTracing(telemetry, "{p}:deliveries")
        assert on.enabled and on.stream == "{p}:deliveries" and on.metrics is telemetry.metrics
        on.tracer.start_span("x").end()
        (span,) = spans.get_finished_spans()
        assert span.resource.attributes["service.name"] == "drover-broker"
        assert span.resource.attributes["service.instance.id"] == "b1"
    finally:
        telemetry.shutdown()

    off = ActorTracing(Telemetry.disabled("broker", "b1"), "{p}:deliveries")
    assert not off.enabled
    span = off.tracer.start_span("x")
    assert not span.is_recording() and not span.get_span_context().is_valid
    off.metrics.record_eval("job-register", "acked", 0.1)  # a no-op, never an error
