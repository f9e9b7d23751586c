"""The worker's tracing interceptor, through a worker and a leader service on a real Redis
(threads, in-memory exporters): one delivery is a `process` span in the eval's trace, with
`eval.schedule` and its phases, a `plan.submit` whose context reaches the leader's
`plan.apply`, and an `eval.ack`/`eval.nack` whose context rides in the ack."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from actors.leader.service import STALE_TOKEN, LeaderService
from actors.streams import StreamBus
from actors.streams.names import WORKERS_GROUP, StreamNames
from actors.worker.service import WorkerService
from actors.worker.tracing import WorkerTracing
from contracts import (
    DriverInfo,
    Evaluation,
    Job,
    Node,
    NodeResources,
    Plan,
    Resources,
    Task,
    TaskGroup,
)
from contracts.messages import AckOutcome, EvalDelivery, LeaderRequest, RequestKind
from observability import Telemetry
from observability import conventions as c
from observability import metrics as m

NAMES = StreamNames("wkt")
BROKER_TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
BROKER_SPAN = 0x00F067AA0BA902B7
BROKER = {"traceparent": f"00-{BROKER_TRACE:032x}-{BROKER_SPAN:016x}-01"}
InMemory = tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]


def wait_for(done: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def node(node_id: str) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=4000, memory_mb=4096, disk_mb=10_000),
    ).with_computed_class()


def schedule_one(
    run_in_thread: Any, client: redis.Redis, in_memory: Callable[[str], InMemory], outstanding: str
) -> tuple[InMemorySpanExporter, InMemorySpanExporter, str, dict[bytes, bytes]]:
    """Deliver one eval (token "t1") with the broker's context to a traced worker while a
    traced leader serves; returns (worker spans, leader spans, delivery id, ack fields)."""
    leader_telemetry, leader_spans, _ = in_memory("leader")
    telemetry, spans, _ = in_memory("worker")
    leader = LeaderService(client, NAMES, telemetry=leader_telemetry)
    leader.start()
    stop_leader = run_in_thread(leader)
    try:
        nodes = (node("n1"), node("n2"))
        leader.submit(LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=nodes))
        task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
        job = Job(id="web", name="web", task_groups=(TaskGroup("g", 2, tasks=(task,)),))
        response = leader.submit(LeaderRequest(RequestKind.REGISTER_JOB, request_id="r", job=job))
        (evaluation,) = leader.store.snapshot().evals_by_job("default", "web")
        client.hset(NAMES.tokens_key, evaluation.id, outstanding)
        worker = WorkerService("w1", client, NAMES, telemetry=telemetry)
        worker.start()
        delivery = EvalDelivery(evaluation, "t1", response.index)
        (delivery_id,) = StreamBus(client).publish(
            NAMES.deliveries, [("EvalDelivery", delivery)], BROKER
        )
        stop_worker = run_in_thread(worker)
        try:
            wait_for(lambda: client.xlen(NAMES.acks) == 1)
        finally:
            stop_worker()
    finally:
        stop_leader()
    ((_, ack_fields),) = client.xrange(NAMES.acks)
    return spans, leader_spans, str(delivery_id), ack_fields


def one(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [s for s in spans.get_finished_spans() if s.name == name]
    return span


def parent_of(span: ReadableSpan) -> int:
    assert span.parent is not None
    return span.parent.span_id


def traceparent(span: ReadableSpan) -> bytes:
    ctx = span.context
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}".encode()


def test_a_delivery_is_one_trace_from_the_broker_through_the_leader_to_the_ack(
    run_in_thread: Any, client: redis.Redis, in_memory: Callable[[str], InMemory]
) -> None:
    spans, leader_spans, delivery_id, ack = schedule_one(
        run_in_thread, client, in_memory, outstanding="t1"
    )

    process = one(spans, c.span_name(c.OP_PROCESS, NAMES.deliveries))
    assert process.kind is SpanKind.CONSUMER and parent_of(process) == BROKER_SPAN
    assert process.attributes is not None
    assert process.attributes[c.MESSAGING_CONSUMER_GROUP] == WORKERS_GROUP
    assert process.attributes[c.MESSAGING_MESSAGE_ID] == delivery_id
    schedule = one(spans, c.SPAN_EVAL_SCHEDULE)
    assert parent_of(schedule) == process.context.span_id
    assert schedule.attributes is not None and schedule.attributes[c.JOB_ID] == "web"

    feasibility = one(spans, c.SPAN_FEASIBILITY)
    ranking = one(spans, c.SPAN_RANKING)
    for phase in (one(spans, c.SPAN_RECONCILE), feasibility, ranking):
        assert parent_of(phase) == schedule.context.span_id
    assert feasibility.attributes is not None and ranking.attributes is not None
    assert feasibility.attributes[c.NODES_TOTAL] == feasibility.attributes[c.NODES_FEASIBLE] == 2
    assert feasibility.attributes[c.TASK_GROUP] == "g"
    assert ranking.attributes[c.NODES_RANKED] == 4  # two placements, each scored on both

    submit = one(spans, c.SPAN_PLAN_SUBMIT)
    assert submit.kind is SpanKind.PRODUCER and parent_of(submit) == schedule.context.span_id
    assert submit.attributes is not None
    assert submit.attributes[c.PLAN_ID] == f"{schedule.attributes[c.EVAL_ID]}#1"
    assert submit.attributes[c.PLAN_PLACEMENTS] == submit.attributes[c.PLAN_COMMITTED] == 2
    assert submit.attributes[c.PLAN_OUTCOME] == "committed"
    # The submission carried the submit span's context to the leader.
    apply = one(leader_spans, c.SPAN_PLAN_APPLY)
    assert parent_of(apply) == submit.context.span_id

    acked = one(spans, c.SPAN_EVAL_ACK)
    assert acked.kind is SpanKind.PRODUCER and parent_of(acked) == schedule.context.span_id
    assert acked.attributes is not None and acked.attributes[c.EVAL_OUTCOME] == "ack"
    assert ack[b"tp"] == traceparent(acked)
    for span in (process, schedule, submit, apply, acked):
        assert span.context.trace_id == BROKER_TRACE


def test_a_refused_delivery_is_nacked_in_a_span_that_says_why(
    run_in_thread: Any, client: redis.Redis, in_memory: Callable[[str], InMemory]
) -> None:
    spans, _, _, ack = schedule_one(run_in_thread, client, in_memory, outstanding="t2")
    nacked = one(spans, c.SPAN_EVAL_NACK)
    assert nacked.attributes is not None
    assert nacked.attributes[c.EVAL_OUTCOME] == "nack"
    assert nacked.attributes["drover.eval.reason"] == STALE_TOKEN
    assert ack[b"tp"] == traceparent(nacked)
    assert not [s for s in spans.get_finished_spans() if s.name == c.SPAN_EVAL_ACK]


def test_retries_are_counted_and_nothing_is_traced_when_tracing_is_off(
    in_memory: Callable[[str], InMemory],
) -> None:
    telemetry, spans, reader = in_memory("worker")
    tracing = WorkerTracing(telemetry, NAMES.deliveries, WORKERS_GROUP)
    plan = Plan("e1", job_id="web")
    for attempt in (1, 2, 3):
        with tracing.plan_submit(plan, attempt) as (_span, carrier):
            assert carrier["traceparent"]
    data = reader.get_metrics_data()
    assert data is not None
    retries = [
        point.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == m.EVAL_RETRIES
        for point in metric.data.data_points
    ]
    assert retries == [2]  # attempts 2 and 3
    attempts = [s.attributes[c.PLAN_ATTEMPT] for s in spans.get_finished_spans() if s.attributes]
    assert attempts == [1, 2, 3]

    off = WorkerTracing(Telemetry.disabled("worker", "w1"), NAMES.deliveries, WORKERS_GROUP)
    delivery = EvalDelivery(Evaluation(id="e1", job_id="web"), "t1", 1)
    with off.evaluation(delivery, BROKER, "1-0") as span:
        assert not span.get_span_context().is_valid
        assert off.phases() is None
        with off.plan_submit(plan, 1) as (_, carrier):
            assert carrier == {}
        assert off.ack_trace(span, AckOutcome.ACK, "") == {}
