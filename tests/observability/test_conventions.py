from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from observability import conventions as c
from observability.conventions import PlanRef, ResourceAmounts
from observability.telemetry import Telemetry

InMemory = Callable[..., tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]]


@pytest.mark.parametrize(
    ("reason", "dimension"),
    [
        ("cpu exhausted", "cpu"),
        ("memory exhausted", "memory"),
        ("disk exhausted", "disk"),
        ("device oversubscribed", "devices"),
        ("device instance not on node", "devices"),
        ("node does not exist", "node"),
        ("node is not ready for placements", "node"),
        ("node is draining", "node"),
        ("exhausted cpu", "cpu"),
        ("something else", "other"),
    ],
)
def test_reject_dimension(reason: str, dimension: str) -> None:
    assert c.reject_dimension(reason) == dimension


def test_node_rejected_attributes_carry_the_whole_conflict() -> None:
    attrs = c.node_rejected_attributes(
        node_id="n1",
        reason="cpu exhausted",
        rejected=PlanRef("e1", "web", c.plan_id("e1", 2), attempt=2, namespace="default"),
        asked=ResourceAmounts(cpu=500, memory_mb=256, disk_mb=100, gpus=1),
        free=ResourceAmounts(cpu=200, memory_mb=4096, disk_mb=1000),
        taken_by=PlanRef("e2", "api", "e2#1", commit_index=42),
    )
    assert attrs == {
        "drover.node.id": "n1",
        "drover.reject.reason": "cpu exhausted",
        "drover.reject.dimension": "cpu",
        "drover.eval.id": "e1",
        "drover.job.id": "web",
        "drover.plan.id": "e1#2",
        "drover.plan.attempt": 2,
        "drover.namespace": "default",
        "drover.ask.cpu": 500,
        "drover.ask.memory_mb": 256,
        "drover.ask.disk_mb": 100,
        "drover.ask.gpus": 1,
        "drover.free.cpu": 200,
        "drover.free.memory_mb": 4096,
        "drover.free.disk_mb": 1000,
        "drover.free.gpus": 0,
        "drover.conflict.eval.id": "e2",
        "drover.conflict.job.id": "api",
        "drover.conflict.plan.id": "e2#1",
        "drover.conflict.commit_index": 42,
    }
    assert ResourceAmounts.from_attributes(attrs, c.ASK_PREFIX) == ResourceAmounts(500, 256, 100, 1)


def test_unattributed_rejection_has_no_conflict_keys() -> None:
    attrs = c.node_rejected_attributes(
        node_id="n9",
        reason="node does not exist",
        rejected=PlanRef("e1", "web", "e1#1"),
        asked=ResourceAmounts(100, 300),
        free=ResourceAmounts(),
        dimension="node",
    )
    assert not any(k.startswith("drover.conflict.") for k in attrs)
    assert attrs["drover.reject.dimension"] == "node"
    assert "drover.plan.attempt" not in attrs


def test_builders_leave_out_what_is_none() -> None:
    assert c.eval_attributes("e1", trigger="job-register") == {
        "drover.eval.id": "e1",
        "drover.eval.trigger": "job-register",
    }
    assert c.plan_attributes("e1", 3, placements=4) == {
        "drover.eval.id": "e1",
        "drover.plan.id": "e1#3",
        "drover.plan.attempt": 3,
        "drover.plan.placements": 4,
    }
    assert c.messaging_attributes("drover:evals", c.OP_RECEIVE, consumer_group="workers") == {
        "messaging.system": "redis",
        "messaging.destination.name": "drover:evals",
        "messaging.operation.type": "receive",
        "messaging.consumer.group.name": "workers",
    }
    assert c.node_count_attributes(total=40, feasible=12) == {
        "drover.nodes.total": 40,
        "drover.nodes.feasible": 12,
    }
    assert c.span_name(c.OP_PROCESS, "drover:evals") == "process drover:evals"


@pytest.mark.parametrize(
    ("placements", "committed", "rejected", "outcome"),
    [(5, 5, 0, "committed"), (5, 3, 1, "partial"), (5, 0, 2, "rejected"), (0, 0, 0, "no_op")],
)
def test_plan_outcome(placements: int, committed: int, rejected: int, outcome: str) -> None:
    attrs = c.plan_result_attributes(
        placements=placements, committed=committed, rejected_nodes=rejected, refresh_index=7
    )
    assert attrs[c.PLAN_OUTCOME] == outcome
    assert attrs[c.PLAN_REFRESH_INDEX] == 7


def test_record_node_rejected_adds_one_event(in_memory: InMemory) -> None:
    telemetry, spans, _ = in_memory("leader", "l1")
    with telemetry.tracer.start_as_current_span(c.SPAN_PLAN_APPLY) as span:
        c.record_node_rejected(
            span,
            node_id="n1",
            reason="memory exhausted",
            rejected=PlanRef("e1", "web", "e1#1", attempt=1),
            asked=ResourceAmounts(100, 2048),
            free=ResourceAmounts(900, 1024),
            taken_by=PlanRef("e2", "api", "e2#1"),
            timestamp_ns=1_000,
        )
    (finished,) = spans.get_finished_spans()
    (event,) = finished.events
    assert (event.name, event.timestamp) == ("plan.node_rejected", 1_000)
    assert event.attributes is not None
    assert event.attributes["drover.reject.dimension"] == "memory"
    assert event.attributes["drover.conflict.job.id"] == "api"
