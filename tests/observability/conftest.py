"""Fixtures for the observability tests: Telemetry instances on in-memory exporters, each with
its own providers, shut down after the test; a collision scenario built with real providers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Span, SpanContext, set_span_in_context
from opentelemetry.util.types import AttributeValue

from observability import conventions as c
from observability.conventions import Attributes, PlanRef, ResourceAmounts
from observability.records import SpanRecord
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


# -- a collision scenario with explicit times -------------------------------------------------

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def at(ms: float) -> int:
    return T0 + int(ms * MS)


@pytest.fixture
def collision() -> Iterator[tuple[list[SpanRecord], dict[str, SpanContext]]]:
    """Spans of four evals, from a worker and a leader Telemetry (times in ms after T0):

    - e2 (job api): plan e2#1 commits at 100-110.
    - e1 (job web): eval.schedule 0-400; plan.submit #1 50-150 -> plan.apply #1 120-140 rejects
      n1 (cpu) and n2 (memory), both taken by e2#1; plan.submit #2 200-260 -> plan.apply #2
      220-250 commits.
    - e3 (job batch), its own trace: eval.schedule 300-700; plan.submit #1 310-360 ->
      plan.apply 330-350 rejects n1 (cpu) taken by e1#2, linked to e1's apply #2; no retry.
    - e4 (job db): only a plan.apply 800-820 rejecting n3 (node gone), unattributed.

    Also returns the span contexts by label, for assertions.
    """
    exporter = InMemorySpanExporter()
    worker = configure("worker", "worker-1", None, span_exporter=exporter, env={})
    leader = configure("leader", "leader-1", None, span_exporter=exporter, env={})
    contexts: dict[str, SpanContext] = {}

    def span(
        telemetry: Telemetry,
        label: str,
        name: str,
        start: float,
        end: float,
        parent: Span | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        rejections: Sequence[tuple[float, Mapping[str, AttributeValue]]] = (),
        links: Sequence[Link] = (),
    ) -> Span:
        context = set_span_in_context(parent) if parent is not None else Context()
        s = telemetry.tracer.start_span(
            name, context=context, start_time=at(start), attributes=attributes, links=links
        )
        for when, attrs in rejections:
            s.add_event(c.EVENT_NODE_REJECTED, attrs, timestamp=at(when))
        s.end(end_time=at(end))
        contexts[label] = s.get_span_context()
        return s

    def rejected(node: str, reason: str, plan: PlanRef, taken_by: PlanRef | None) -> Attributes:
        return c.node_rejected_attributes(
            node_id=node,
            reason=reason,
            rejected=plan,
            asked=ResourceAmounts(cpu=1000, memory_mb=512),
            free=ResourceAmounts(cpu=300, memory_mb=256),
            taken_by=taken_by,
        )

    e2 = PlanRef("e2", "api", "e2#1", attempt=1)
    e1_1 = PlanRef("e1", "web", "e1#1", attempt=1)
    e1_2 = PlanRef("e1", "web", "e1#2", attempt=2)
    e3_1 = PlanRef("e3", "batch", "e3#1", attempt=1)
    e4_1 = PlanRef("e4", "db", "e4#1", attempt=1)

    span(
        leader,
        "e2.apply",
        c.SPAN_PLAN_APPLY,
        100,
        110,
        attributes=c.plan_attributes("e2", 1, job_id="api"),
    )

    web = c.eval_attributes("e1", job_id="web", trigger="job-register")
    schedule = span(worker, "e1.schedule", c.SPAN_EVAL_SCHEDULE, 0, 400, attributes=web)
    submit1 = span(
        worker,
        "e1.submit1",
        c.SPAN_PLAN_SUBMIT,
        50,
        150,
        schedule,
        c.plan_attributes("e1", 1, job_id="web"),
    )
    span(
        leader,
        "e1.apply1",
        c.SPAN_PLAN_APPLY,
        120,
        140,
        submit1,
        {
            **c.plan_attributes("e1", 1, job_id="web"),
            **c.plan_result_attributes(placements=3, committed=1, rejected_nodes=2),
        },
        rejections=[
            (130, rejected("n1", "cpu exhausted", e1_1, e2)),
            (131, rejected("n2", "memory exhausted", e1_1, e2)),
        ],
    )
    submit2 = span(
        worker,
        "e1.submit2",
        c.SPAN_PLAN_SUBMIT,
        200,
        260,
        schedule,
        c.plan_attributes("e1", 2, job_id="web"),
    )
    apply2 = span(
        leader,
        "e1.apply2",
        c.SPAN_PLAN_APPLY,
        220,
        250,
        submit2,
        {
            **c.plan_attributes("e1", 2, job_id="web"),
            **c.plan_result_attributes(placements=2, committed=2, rejected_nodes=0),
        },
    )

    batch = c.eval_attributes("e3", job_id="batch", trigger="job-register")
    schedule3 = span(worker, "e3.schedule", c.SPAN_EVAL_SCHEDULE, 300, 700, attributes=batch)
    submit3 = span(
        worker,
        "e3.submit1",
        c.SPAN_PLAN_SUBMIT,
        310,
        360,
        schedule3,
        c.plan_attributes("e3", 1, job_id="batch"),
    )
    span(
        leader,
        "e3.apply1",
        c.SPAN_PLAN_APPLY,
        330,
        350,
        submit3,
        c.plan_attributes("e3", 1, job_id="batch"),
        rejections=[(340, rejected("n1", "cpu exhausted", e3_1, e1_2))],
        links=[Link(apply2.get_span_context(), {"drover.link": "conflict"})],
    )

    span(
        leader,
        "e4.apply1",
        c.SPAN_PLAN_APPLY,
        800,
        820,
        None,
        c.plan_attributes("e4", 1, job_id="db"),
        rejections=[(810, rejected("n3", "node does not exist", e4_1, None))],
    )

    records = SpanRecord.from_spans(exporter.get_finished_spans())
    yield records, contexts
    worker.shutdown()
    leader.shutdown()
