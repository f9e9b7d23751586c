"""Conflict attribution: a rejected node names the committed plan that took its capacity."""

from __future__ import annotations

from actors.leader.core.conflicts import Amounts, CapacityLedger, CommittedPlan, rejections
from actors.leader.core.plan_eval import evaluate_plan
from actors.state import StateStore
from contracts import (
    AllocatedResources,
    Allocation,
    DriverInfo,
    Node,
    NodeResources,
    Plan,
)
from contracts.state_log import UpsertAllocs, UpsertNodes


def alloc(alloc_id: str, cpu: int, memory: int = 100) -> Allocation:
    return Allocation(
        id=alloc_id,
        node_id="n1",
        job_id="j",
        task_group="g",
        allocated_resources=AllocatedResources(cpu=cpu, memory_mb=memory),
    )


def test_rejection_names_the_plan_committed_since_the_snapshot() -> None:
    store = StateStore()
    store.commit(
        UpsertNodes(
            (
                Node(
                    id="n1",
                    drivers={"mock": DriverInfo()},
                    node_resources=NodeResources(cpu=1000, memory_mb=1000, disk_mb=1000),
                ).with_computed_class(),
            )
        )
    )
    snapshot_index = store.latest_index()
    ledger = CapacityLedger()
    # Plan A (job "a") commits 700 MHz on n1 after plan B's worker took its snapshot.
    index = store.commit(UpsertAllocs((alloc("a1", 700),)))
    ledger.record(["n1"], CommittedPlan(index, "eval-a", "a", 1))
    plan_b = Plan(
        eval_id="eval-b",
        job_id="b",
        snapshot_index=snapshot_index,
        node_allocation={"n1": (alloc("b1", 600, 200),)},
    )
    result = evaluate_plan(store, plan_b)
    (rejection,) = rejections(store, plan_b, result, ledger)
    assert rejection.node_id == "n1" and rejection.reason == "cpu exhausted"
    assert rejection.asked == Amounts(cpu=600, memory_mb=200)
    assert rejection.free == Amounts(cpu=300, memory_mb=900, disk_mb=1000)
    assert rejection.taken_by == CommittedPlan(index, "eval-a", "a", 1)
    # A worker that planned after plan A's commit has nobody to blame but itself.
    fresh = Plan(eval_id="eval-c", snapshot_index=index, node_allocation=plan_b.node_allocation)
    (late,) = rejections(store, fresh, evaluate_plan(store, fresh), ledger)
    assert late.taken_by is None
