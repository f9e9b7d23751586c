from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from observability.jsonl import JsonlSpanExporter, load_spans, span_file
from observability.records import EventRecord, LinkRecord, SpanRecord


def _provider(path: Path, memory: InMemorySpanExporter, instance: str) -> TracerProvider:
    provider = TracerProvider(
        resource=Resource.create({"service.name": "drover-leader", "service.instance.id": instance})
    )
    provider.add_span_processor(SimpleSpanProcessor(JsonlSpanExporter(path)))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    path = span_file(tmp_path, "leader", "leader-1")
    provider = _provider(path, memory, "leader-1")
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("other") as other:
        pass
    with (
        tracer.start_as_current_span(
            "plan.apply",
            kind=SpanKind.CONSUMER,
            attributes={"drover.eval.id": "e1", "n": 3, "f": 0.5, "ok": True, "tags": ["a", "b"]},
            links=[Link(other.get_span_context(), {"why": "conflict"})],
        ) as parent,
        tracer.start_as_current_span("child") as child,
    ):
        child.add_event("plan.node_rejected", {"drover.node.id": "n1", "drover.ask.cpu": 500})
        child.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()

    loaded = load_spans(tmp_path)
    expected = sorted(
        SpanRecord.from_spans(memory.get_finished_spans()),
        key=lambda s: (s.start_ns, s.end_ns, s.span_id),
    )
    assert loaded == expected
    by_name = {s.name: s for s in loaded}
    apply, child_record = by_name["plan.apply"], by_name["child"]
    assert apply.attributes == {
        "drover.eval.id": "e1",
        "n": 3,
        "f": 0.5,
        "ok": True,
        "tags": ("a", "b"),
    }
    assert apply.kind == "CONSUMER" and apply.parent_id is None
    assert apply.links == (
        LinkRecord(
            f"{other.get_span_context().trace_id:032x}",
            f"{other.get_span_context().span_id:016x}",
            {"why": "conflict"},
        ),
    )
    assert child_record.parent_id == f"{parent.get_span_context().span_id:016x}"
    assert child_record.trace_id == apply.trace_id and len(apply.trace_id) == 32
    (event,) = child_record.events
    assert event == EventRecord(
        "plan.node_rejected", event.time_ns, {"drover.node.id": "n1", "drover.ask.cpu": 500}
    )
    assert (child_record.status_code, child_record.status_description) == ("ERROR", "boom")
    assert (child_record.service_name, child_record.service_instance) == (
        "drover-leader",
        "leader-1",
    )
    assert child_record.start_ns <= event.time_ns <= child_record.end_ns


def test_load_merges_files_and_skips_torn_lines(tmp_path: Path) -> None:
    directory = tmp_path / "telemetry"
    for instance in ("leader-1", "leader-2"):
        provider = _provider(
            span_file(directory, "leader", instance), InMemorySpanExporter(), instance
        )
        with provider.get_tracer("t").start_as_current_span(f"from {instance}"):
            pass
        provider.shutdown()
    with span_file(directory, "leader", "leader-2").open("ab") as f:
        f.write(b'{"trace_id": "abc", "span_id"')  # a crash mid-write
    (directory / "unrelated.txt").write_text("not spans")

    loaded = load_spans(tmp_path)  # the data dir: telemetry/ is found
    assert sorted(s.name for s in loaded) == ["from leader-1", "from leader-2"]
    assert load_spans(directory) == loaded
    assert [s.name for s in load_spans(span_file(directory, "leader", "leader-1"))] == [
        "from leader-1"
    ]
    assert load_spans(tmp_path / "missing") == []


def test_file_names_are_safe(tmp_path: Path) -> None:
    assert span_file(tmp_path, "worker", "host/1:2").name == "spans-worker-host_1_2.jsonl"


def test_only_ended_spans_are_written(tmp_path: Path) -> None:
    path = span_file(tmp_path, "w", "1")
    provider = _provider(path, InMemorySpanExporter(), "1")
    span = provider.get_tracer("t").start_span("open")
    provider.force_flush()
    assert load_spans(path) == []  # not ended: not exported
    span.end()
    provider.shutdown()
    assert [s.name for s in load_spans(path)] == ["open"]
