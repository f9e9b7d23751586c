"""The leader's tracing interceptor, through the leader service on a real Redis with an
in-memory exporter: a request continues its sender's trace, each new evaluation roots a trace
of its own carried in the log entry, and a rejected node becomes an event naming the plan that
took the capacity, with a link to that plan's apply."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from actors.leader.durable_log import DurableLog
from actors.leader.service import LeaderService
from actors.streams import StreamBus
from actors.streams.names import StreamNames
from contracts import (
    AllocatedResources,
    Allocation,
    DriverInfo,
    EvalStatus,
    Evaluation,
    Job,
    Node,
    NodeResources,
    Plan,
    Resources,
    Task,
    TaskGroup,
)
from contracts.messages import LeaderRequest, PlanSubmission, RequestKind
from observability import configure
from observability import conventions as c
from observability import metrics as m

NAMES = StreamNames("ldt")
SENDER_TRACE = 0x0AF7651916CD43DD8448EB211C80319C
SENDER_SPAN = 0xB7AD6B7169203331
SENDER = {"traceparent": f"00-{SENDER_TRACE:032x}-{SENDER_SPAN:016x}-01"}


@pytest.fixture
def traced(
    client: redis.Redis,
) -> Iterator[tuple[LeaderService, InMemorySpanExporter, InMemoryMetricReader]]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    telemetry = configure(
        "leader", "leader", None, span_exporter=spans, metric_reader=reader, env={}
    )
    service = LeaderService(client, NAMES, telemetry=telemetry)
    service.start()
    yield service, spans, reader
    telemetry.shutdown()


def named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def traceparent(span: ReadableSpan) -> str:
    assert span.context is not None
    ctx = span.context
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def send(client: redis.Redis, kind: str, message: Any, trace: dict[str, str]) -> None:
    StreamBus(client).publish(NAMES.requests, [(kind, message)], trace)


def job(job_id: str) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    return Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))


def test_a_request_continues_its_sender_and_each_new_eval_roots_its_own_trace(
    client: redis.Redis, traced: tuple[LeaderService, InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    leader, spans, _ = traced
    register = LeaderRequest(RequestKind.REGISTER_JOB, request_id="r1", job=job("web"))
    send(client, "LeaderRequest", register, SENDER)
    assert leader.poll_once() == 1

    (request,) = named(spans, "leader.register-job")
    assert request.kind is SpanKind.CONSUMER and request.parent is not None
    assert (request.context.trace_id, request.parent.span_id) == (SENDER_TRACE, SENDER_SPAN)
    assert request.attributes is not None
    assert request.attributes[c.MESSAGING_DESTINATION] == NAMES.requests
    assert request.attributes[c.MESSAGING_OPERATION_TYPE] == c.OP_PROCESS

    (evaluation,) = leader.store.snapshot().evals_by_job("default", "web")
    (root,) = named(spans, c.SPAN_EVAL_ENQUEUE)
    assert root.parent is None and root.context.trace_id != SENDER_TRACE  # a trace per eval
    assert [link.context.span_id for link in root.links] == [request.context.span_id]
    assert root.attributes is not None
    assert root.attributes[c.EVAL_ID] == evaluation.id
    assert root.attributes[c.JOB_ID] == "web"
    assert root.attributes[c.EVAL_TRIGGER] == "job-register"

    # The log entry carries both contexts: the committing span for the followers, and the
    # eval's root, which the broker continues when it delivers the eval.
    (entry,) = DurableLog(client, NAMES).entries_after(0)
    assert entry.trace == {"": traceparent(request), evaluation.id: traceparent(root)}

    # Heartbeats are not traced (one per node every few seconds would drown the rest).
    beat = LeaderRequest(RequestKind.NODE_HEARTBEAT, request_id="hb", node_ids=("n1",))
    send(client, "LeaderRequest", beat, SENDER)
    leader.poll_once()
    assert len(spans.get_finished_spans()) == 2


def test_a_blocked_eval_is_counted_and_an_existing_eval_gets_no_new_root(
    client: redis.Redis, traced: tuple[LeaderService, InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    leader, spans, reader = traced
    blocked = Evaluation(id="e-blocked", job_id="web", status=EvalStatus.BLOCKED)
    update = LeaderRequest(RequestKind.UPDATE_EVALS, request_id="u1", evals=(blocked,))
    leader.handle(update, SENDER)
    again = LeaderRequest(RequestKind.UPDATE_EVALS, request_id="u2", evals=(blocked,))
    leader.handle(again, SENDER)  # the same eval written again: not a new evaluation

    assert len(named(spans, c.SPAN_EVAL_ENQUEUE)) == 1
    assert sum_points(reader, m.EVALS_BLOCKED) == 1


def test_a_rejected_node_names_the_plan_that_took_it_and_links_to_its_apply(
    client: redis.Redis, traced: tuple[LeaderService, InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    leader, spans, reader = traced
    nodes = tuple(node(n) for n in ("n1", "n2"))
    leader.handle(LeaderRequest(RequestKind.UPSERT_NODES, request_id="nodes", nodes=nodes))
    snapshot = leader.store.latest_index()  # both workers planned on this state
    # e1 takes n1; e2 wants n1 and n2 and loses n1 to e1.
    send(client, "PlanSubmission", submission("e1", "a", snapshot, [("n1", 800)]), SENDER)
    leader.poll_once()
    taken_at = leader.store.latest_index()
    plan2 = submission("e2", "b", snapshot, [("n1", 800), ("n2", 300)])
    send(client, "PlanSubmission", plan2, SENDER)
    leader.poll_once()

    first, second = named(spans, c.SPAN_PLAN_APPLY)
    for apply in (first, second):
        assert apply.kind is SpanKind.CONSUMER and apply.parent is not None
        assert apply.parent.span_id == SENDER_SPAN  # the worker's plan.submit
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes[c.PLAN_OUTCOME] == "committed"
    assert first.attributes[c.PLAN_COMMIT_INDEX] == taken_at
    assert second.attributes[c.PLAN_OUTCOME] == "partial"
    assert second.attributes[c.PLAN_COMMITTED] == 1
    assert second.attributes[c.PLAN_REJECTED_NODES] == 1

    (event,) = second.events
    assert event.name == c.EVENT_NODE_REJECTED and event.attributes is not None
    got = dict(event.attributes)
    assert got[c.NODE_ID] == "n1" and got[c.REJECT_DIMENSION] == "cpu"
    assert (got[c.EVAL_ID], got[c.PLAN_ID]) == ("e2", "e2#1")
    assert (got[c.ASK_PREFIX + "cpu"], got[c.FREE_PREFIX + "cpu"]) == (800, 200)
    assert got[c.CONFLICT_EVAL_ID] == "e1" and got[c.CONFLICT_JOB_ID] == "a"
    assert got[c.CONFLICT_PLAN_ID] == "e1#1" and got[c.CONFLICT_COMMIT_INDEX] == taken_at
    (link,) = second.links
    assert link.context.span_id == first.context.span_id
    assert link.attributes is not None and link.attributes[c.CONFLICT_PLAN_ID] == "e1#1"

    assert sum_points(reader, m.PLAN_APPLIES) == 2
    assert sum_points(reader, m.PLAN_REJECTED_NODES) == 1
    assert sum_points(reader, m.PLACEMENTS) == 2  # e1's one and e2's one on n2


def node(node_id: str) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=4096, disk_mb=10_000),
    ).with_computed_class()


def submission(
    eval_id: str, job_id: str, snapshot: int, asks: Sequence[tuple[str, int]]
) -> PlanSubmission:
    placements = {
        node_id: (
            Allocation(
                id=f"{eval_id}-{node_id}",
                eval_id=eval_id,
                node_id=node_id,
                job_id=job_id,
                task_group="g",
                allocated_resources=AllocatedResources(cpu=cpu, memory_mb=64),
            ),
        )
        for node_id, cpu in asks
    }
    plan = Plan(eval_id, job_id=job_id, snapshot_index=snapshot, node_allocation=placements)
    return PlanSubmission(plan, reply_to="")


def sum_points(reader: InMemoryMetricReader, name: str) -> float:
    """The sum of a counter's points (over all attributes)."""
    data = reader.get_metrics_data()
    assert data is not None
    return sum(
        point.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    )
