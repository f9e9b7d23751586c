"""The broker's tracing interceptor, through the broker service fed by a traced leader on a
real Redis (in-memory exporters): each delivery is a `send` span in its evaluation's trace
whose context rides in the delivery; acks and nacks become eval metrics; the backlog of every
consumer group is a gauge."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from actors.broker.service import BrokerService
from actors.leader.service import LeaderService
from actors.streams import StreamBus
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import BROKER_GROUP, LEADER_GROUP, WORKERS_GROUP, StreamNames
from contracts import Job, Resources, Task, TaskGroup
from contracts.messages import AckOutcome, EvalAck, EvalDelivery, LeaderRequest, RequestKind
from observability import Telemetry
from observability import conventions as c
from observability import metrics as m

NAMES = StreamNames("brt")
InMemory = tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]


def register(leader: LeaderService, job_id: str) -> str:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    job = Job(id=job_id, name=job_id, task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    response = leader.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id=job_id, job=job))
    assert response.ok
    return response.eval_id


def deliveries(client: redis.Redis) -> list[tuple[EvalDelivery, dict[bytes, bytes]]]:
    out = []
    for _id, fields in client.xrange(NAMES.deliveries):
        _type, delivery, _trace = decode_message(fields, registry_of(EvalDelivery))
        assert isinstance(delivery, EvalDelivery)
        out.append((delivery, fields))
    return out


def settle(client: redis.Redis, delivery: EvalDelivery, outcome: AckOutcome) -> None:
    ack = EvalAck(delivery.eval.id, delivery.token, outcome, "worker-1")
    StreamBus(client).publish(NAMES.acks, [("EvalAck", ack)])


def poll_until(broker: BrokerService, done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        broker.poll_once()


def traceparent(span: ReadableSpan) -> bytes:
    ctx = span.context
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}".encode()


def points(reader: InMemoryMetricReader, name: str) -> dict[frozenset[tuple[str, Any]], Any]:
    """{attributes: data point} of one metric."""
    data = reader.get_metrics_data()
    out: dict[frozenset[tuple[str, Any]], Any] = {}
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        out[frozenset((point.attributes or {}).items())] = point
    return out


def test_each_delivery_is_sent_in_its_evals_trace_and_carries_the_send_span(
    client: redis.Redis, in_memory: Callable[[str], InMemory]
) -> None:
    leader_telemetry, leader_spans, _ = in_memory("leader")
    telemetry, spans, _ = in_memory("broker")
    broker = BrokerService(client, NAMES, telemetry=telemetry)
    broker.start()
    leader = LeaderService(client, NAMES, telemetry=leader_telemetry, broker=broker)
    leader.start()
    eval_id = register(leader, "web")
    (root,) = [s for s in leader_spans.get_finished_spans() if s.name == c.SPAN_EVAL_ENQUEUE]
    broker.poll_once()
    ((first, _fields),) = deliveries(client)
    settle(client, first, AckOutcome.NACK)
    poll_until(broker, lambda: len(deliveries(client)) == 2)

    sent = spans.get_finished_spans()
    assert [s.name for s in sent] == [c.span_name(c.OP_SEND, NAMES.deliveries)] * 2
    for number, (span, (_, fields)) in enumerate(zip(sent, deliveries(client), strict=True)):
        assert span.kind is SpanKind.PRODUCER and span.parent is not None
        # The eval's trace, continued from the root the leader put in the log entry.
        assert span.context.trace_id == root.context.trace_id
        assert span.parent.span_id == root.context.span_id
        assert span.attributes is not None
        assert span.attributes[c.MESSAGING_DESTINATION] == NAMES.deliveries
        assert span.attributes[c.MESSAGING_OPERATION_TYPE] == c.OP_SEND
        assert span.attributes[c.EVAL_ID] == eval_id
        assert span.attributes[c.JOB_ID] == "web"
        assert span.attributes[c.EVAL_DELIVERY] == number + 1
        assert fields[b"tp"] == traceparent(span)  # the worker's process span's parent


def test_acks_and_nacks_become_eval_metrics_and_backlogs_a_gauge(
    client: redis.Redis, in_memory: Callable[[str], InMemory]
) -> None:
    leader_telemetry, _, _ = in_memory("leader")
    telemetry, _, reader = in_memory("broker")
    broker = BrokerService(client, NAMES, telemetry=telemetry)
    broker.start()
    leader = LeaderService(client, NAMES, telemetry=leader_telemetry, broker=broker)
    leader.start()
    StreamBus(client).ensure_group(NAMES.deliveries, WORKERS_GROUP)  # as a worker does
    register(leader, "web")
    broker.poll_once()

    def backlog(stream: str, group: str) -> int:
        key = frozenset(
            {
                (c.MESSAGING_SYSTEM, c.MESSAGING_SYSTEM_REDIS),
                (c.MESSAGING_DESTINATION, stream),
                (c.MESSAGING_CONSUMER_GROUP, group),
            }
        )
        return int(points(reader, m.STREAM_BACKLOG)[key].value)

    # The delivery waits for a worker; nothing waits for the broker or the leader.
    assert backlog(NAMES.deliveries, WORKERS_GROUP) == 1
    assert backlog(NAMES.acks, BROKER_GROUP) == backlog(NAMES.requests, LEADER_GROUP) == 0

    ((delivery, _),) = deliveries(client)
    settle(client, delivery, AckOutcome.NACK)
    poll_until(broker, lambda: len(deliveries(client)) == 2)
    settle(client, deliveries(client)[1][0], AckOutcome.ACK)
    poll_until(broker, lambda: broker.stats["acked"] == 1)

    def outcome(name: str) -> frozenset[tuple[str, Any]]:
        return frozenset({(c.EVAL_TRIGGER, "job-register"), (c.EVAL_OUTCOME, name)})

    evals = points(reader, m.EVALS)
    assert evals[outcome("nacked")].value == 1 and evals[outcome("acked")].value == 1
    latency = points(reader, m.EVAL_LATENCY)
    assert set(latency) == {outcome("acked")}  # enqueue -> ack; a nack is no completion
    assert latency[outcome("acked")].count == 1
    assert broker.tracing.evals == {}  # an acked eval's trace is forgotten

    broker.tracing.shutdown()
    assert points(reader, m.STREAM_BACKLOG) == {}


def test_without_tracing_a_delivery_carries_no_context(client: redis.Redis) -> None:
    broker = BrokerService(client, NAMES)
    broker.start()
    leader = LeaderService(client, NAMES, broker=broker)
    leader.start()
    register(leader, "web")
    broker.poll_once()
    ((_, fields),) = deliveries(client)
    assert b"tp" not in fields and b"ts" not in fields
