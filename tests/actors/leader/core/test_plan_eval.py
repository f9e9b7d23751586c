"""Plan evaluation and apply, ported from Nomad's plan_apply_test.go, plan_queue_test.go and
worker_test.go (TestPlanApply_EvalPlan_*, TestPlanApply_EvalNodePlan_*, TestPlanQueue_*,
TestWorker_SubmitPlan_MissingNodeRefresh).

drover models no deployments or canaries, so the deployment parts of Nomad's partial-commit
tests (PlacedCanaries pruning, deployment cleared) have no counterpart here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.leader.core.plan_apply import PlanApplier
from actors.leader.core.plan_eval import (
    DEVICE_OVERSUBSCRIBED,
    DEVICE_UNKNOWN,
    NODE_DISCONNECTED,
    NODE_DRAINING,
    NODE_INELIGIBLE,
    NODE_MISSING,
    NODE_NOT_READY,
    evaluate_node_plan,
    evaluate_plan,
)
from actors.leader.core.plan_queue import PlanQueue
from actors.state import StateStore
from contracts import (
    AllocatedDevice,
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
    DeviceInstance,
    DrainStrategy,
    DriverInfo,
    Node,
    NodeDeviceResource,
    NodeEligibility,
    NodeResources,
    NodeStatus,
    Plan,
    RejectedNode,
    ReservedResources,
)
from contracts.state_log import UpsertAllocs, UpsertNodes


def node(node_id: str, cpu: int = 4000, memory_mb: int = 8192, **kw: Any) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        node_resources=NodeResources(
            cpu=cpu,
            memory_mb=memory_mb,
            disk_mb=kw.pop("disk_mb", 10_000),
            devices=kw.pop("devices", ()),
        ),
        drivers={"mock": DriverInfo()},
        **kw,
    ).with_computed_class()


def alloc(
    alloc_id: str, node_id: str, cpu: int = 1000, memory_mb: int = 1024, **kw: Any
) -> Allocation:
    devices = kw.pop("devices", ())
    return Allocation(
        id=alloc_id,
        node_id=node_id,
        job_id=kw.pop("job_id", "job"),
        task_group="web",
        name=f"job.web[{alloc_id}]",
        allocated_resources=AllocatedResources(
            cpu=cpu, memory_mb=memory_mb, disk_mb=kw.pop("disk_mb", 0), devices=devices
        ),
        **kw,
    )


def plan(
    allocs: dict[str, list[Allocation]] | None = None,
    stops: dict[str, list[Allocation]] | None = None,
    **kw: Any,
) -> Plan:
    return Plan(
        eval_id=kw.pop("eval_id", "eval"),
        node_allocation={k: tuple(v) for k, v in (allocs or {}).items()},
        node_update={k: tuple(v) for k, v in (stops or {}).items()},
        **kw,
    )


def stopped(a: Allocation) -> Allocation:
    return dataclasses.replace(a, desired_status=DesiredStatus.STOP)


@pytest.fixture
def store() -> StateStore:
    return StateStore()


def gpus(*ids: str, unhealthy: tuple[str, ...] = ()) -> NodeDeviceResource:
    return NodeDeviceResource(
        vendor="nvidia",
        type="gpu",
        name="A100",
        instances=tuple(DeviceInstance(i, healthy=i not in unhealthy) for i in ids),
    )


def gpu(*ids: str) -> tuple[AllocatedDevice, ...]:
    return (AllocatedDevice("nvidia", "gpu", "A100", ids),)


# -- partial commit ---------------------------------------------------------------------------


def _partial_setup(store: StateStore, **plan_kw: Any) -> tuple[Plan, Allocation, Allocation]:
    store.commit(UpsertNodes((node("node1"), node("node2"))))
    store.commit(UpsertAllocs((alloc("existing", "node2", cpu=4000, memory_mb=1024),)))
    fits, full = alloc("fits", "node1"), alloc("full", "node2")
    return plan({"node1": [fits], "node2": [full]}, **plan_kw), fits, full


def test_eval_plan_partial(store):
    """TestPlanApply_EvalPlan_Partial: node1 fits, node2 is full."""
    p, fits, _ = _partial_setup(store)
    snap = store.snapshot()

    result = evaluate_plan(snap, p)
    assert result.node_allocation == {"node1": (fits,)}
    assert result.rejected_nodes == (RejectedNode("node2", "cpu exhausted"),)
    assert result.refresh_index == max(snap.table_index("allocs"), snap.table_index("nodes"))
    assert result.refresh_index != 0
    assert result.full_commit(p) == (False, 2, 1)

    applied = PlanApplier(store).apply(p)
    assert applied.node_allocation == {"node1": (fits,)}
    assert applied.alloc_index == store.latest_index()
    assert applied.refresh_index >= applied.alloc_index  # raised to at least the commit
    assert store.alloc("fits") is not None
    assert store.alloc("full") is None


def test_eval_plan_partial_memory(store):
    store.commit(UpsertNodes((node("node1", memory_mb=2048),)))
    store.commit(UpsertAllocs((alloc("existing", "node1", cpu=100, memory_mb=1536),)))
    result = evaluate_plan(store.snapshot(), plan({"node1": [alloc("a", "node1")]}))
    assert result.rejected_nodes == (RejectedNode("node1", "memory exhausted"),)


def test_eval_plan_partial_all_at_once(store):
    """TestPlanApply_EvalPlan_Partial_AllAtOnce: nothing committed, refresh index set."""
    p, _, _ = _partial_setup(store, all_at_once=True)
    before = store.latest_index()

    result = PlanApplier(store).apply(p)

    assert result.node_allocation == {} and result.node_update == {}
    assert result.refresh_index != 0
    assert result.rejected_nodes == (RejectedNode("node2", "cpu exhausted"),)
    assert store.latest_index() == before  # nothing was written
    assert store.alloc("fits") is None


def test_eval_plan_all_at_once_fitting_commits_everything(store):
    store.commit(UpsertNodes((node("node1"), node("node2"))))
    p = plan({"node1": [alloc("a", "node1")], "node2": [alloc("b", "node2")]}, all_at_once=True)
    result = PlanApplier(store).apply(p)
    assert result.refresh_index == 0
    assert result.full_commit(p) == (True, 2, 2)
    assert store.alloc("a") is not None and store.alloc("b") is not None


def test_partial_commit_keeps_stops_of_accepted_nodes(store):
    store.commit(UpsertNodes((node("node1"), node("node2", cpu=500))))
    old = alloc("old", "node1")
    store.commit(UpsertAllocs((old,)))
    p = plan({"node2": [alloc("big", "node2")]}, stops={"node1": [stopped(old)]})
    result = PlanApplier(store).apply(p)
    assert result.node_update == {"node1": (stopped(old),)}
    assert result.rejected_nodes == (RejectedNode("node2", "cpu exhausted"),)
    assert store.alloc("old").desired_status is DesiredStatus.STOP


# -- per node ---------------------------------------------------------------------------------


def test_eval_node_plan_simple(store):
    """TestPlanApply_EvalNodePlan_Simple."""
    store.commit(UpsertNodes((node("n"),)))
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n")]}), "n") is None


def test_eval_node_plan_node_full(store):
    """TestPlanApply_EvalNodePlan_NodeFull."""
    store.commit(UpsertNodes((node("n", cpu=2000),)))
    store.commit(UpsertAllocs((alloc("existing", "n", cpu=1500),)))
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n")]}), "n") == "cpu exhausted"


def test_eval_node_plan_reserved_resources_count(store):
    store.commit(
        UpsertNodes((node("n", cpu=2000, reserved_resources=ReservedResources(cpu=1500)),))
    )
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n")]}), "n") == "cpu exhausted"


def test_eval_node_plan_disk(store):
    store.commit(UpsertNodes((node("n", disk_mb=1000),)))
    p = plan({"n": [alloc("a", "n", disk_mb=600), alloc("b", "n", disk_mb=600)]})
    assert evaluate_node_plan(store, p, "n") == "disk exhausted"


def test_eval_node_plan_allocs_in_one_plan_add_up(store):
    store.commit(UpsertNodes((node("n", cpu=2500),)))
    p = plan({"n": [alloc("a", "n"), alloc("b", "n"), alloc("c", "n")]})
    assert evaluate_node_plan(store, p, "n") == "cpu exhausted"


def test_eval_node_plan_node_not_ready(store):
    """TestPlanApply_EvalNodePlan_NodeNotReady."""
    store.commit(UpsertNodes((node("n", status=NodeStatus.INITIALIZING),)))
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n")]}), "n") == NODE_NOT_READY


def test_eval_node_plan_node_down(store):
    store.commit(UpsertNodes((node("n", status=NodeStatus.DOWN),)))
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n")]}), "n") == NODE_NOT_READY


def test_eval_node_plan_node_disconnected(store):
    store.commit(UpsertNodes((node("n", status=NodeStatus.DISCONNECTED),)))
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n")]}), "n") == NODE_DISCONNECTED


def test_eval_node_plan_node_drain(store):
    """TestPlanApply_EvalNodePlan_NodeDrain."""
    store.commit(UpsertNodes((node("n", drain_strategy=DrainStrategy()),)))
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n")]}), "n") == NODE_DRAINING


def test_eval_node_plan_node_ineligible(store):
    store.commit(UpsertNodes((node("n", scheduling_eligibility=NodeEligibility.INELIGIBLE),)))
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n")]}), "n") == NODE_INELIGIBLE


def test_eval_node_plan_node_not_exist(store):
    """TestPlanApply_EvalNodePlan_NodeNotExist."""
    assert (
        evaluate_node_plan(store, plan({"ghost": [alloc("a", "ghost")]}), "ghost") == NODE_MISSING
    )


def test_eval_node_plan_update_existing(store):
    """TestPlanApply_EvalNodePlan_UpdateExisting: an in-place update on a full node fits
    (its old record is released first)."""
    store.commit(UpsertNodes((node("n", cpu=1000, memory_mb=1024),)))
    existing = alloc("a", "n")
    store.commit(UpsertAllocs((existing,)))
    assert evaluate_node_plan(store, plan({"n": [existing]}), "n") is None


def test_eval_node_plan_update_existing_ineligible(store):
    """TestPlanApply_EvalNodePlan_UpdateExisting_Ineligible."""
    store.commit(UpsertNodes((node("n", scheduling_eligibility=NodeEligibility.INELIGIBLE),)))
    existing = alloc("a", "n")
    store.commit(UpsertAllocs((existing,)))
    assert evaluate_node_plan(store, plan({"n": [existing]}), "n") is None
    # A new alloc alongside the update is still refused.
    p = plan({"n": [existing, alloc("b", "n")]})
    assert evaluate_node_plan(store, p, "n") == NODE_INELIGIBLE


def test_eval_node_plan_node_full_evict(store):
    """TestPlanApply_EvalNodePlan_NodeFull_Evict: a stop in the same plan frees room."""
    store.commit(UpsertNodes((node("n", cpu=1000),)))
    existing = alloc("existing", "n")
    store.commit(UpsertAllocs((existing,)))
    p = plan({"n": [alloc("new", "n")]}, stops={"n": [stopped(existing)]})
    assert evaluate_node_plan(store, p, "n") is None


def test_eval_node_plan_node_full_alloc_stop(store):
    """TestPlanApply_EvalNodePlan_NodeFull_AllocEvict: a terminal alloc holds nothing."""
    store.commit(UpsertNodes((node("n", cpu=1000),)))
    store.commit(UpsertAllocs((alloc("done", "n", client_status=ClientStatus.COMPLETE),)))
    assert evaluate_node_plan(store, plan({"n": [alloc("new", "n")]}), "n") is None


def test_eval_node_plan_node_down_evict_only(store):
    """TestPlanApply_EvalNodePlan_NodeDown_EvictOnly: stops always fit."""
    store.commit(UpsertNodes((node("n"),)))
    existing = alloc("a", "n")
    store.commit(UpsertAllocs((existing,)))
    store.commit(UpsertNodes((node("n", status=NodeStatus.DOWN),)))
    p = plan(stops={"n": [stopped(existing)]})
    assert evaluate_node_plan(store, p, "n") is None
    result = PlanApplier(store).apply(p)
    assert result.rejected_nodes == () and result.refresh_index == 0
    assert store.alloc("a").desired_status is DesiredStatus.STOP
    # Also for a node that no longer exists.
    assert evaluate_node_plan(store, plan(stops={"gone": [stopped(existing)]}), "gone") is None


# -- devices ----------------------------------------------------------------------------------


def test_device_oversubscription_rejected(store):
    store.commit(UpsertNodes((node("n", devices=(gpus("g0", "g1"),)),)))
    store.commit(UpsertAllocs((alloc("holder", "n", devices=gpu("g0")),)))
    assert (
        evaluate_node_plan(store, plan({"n": [alloc("a", "n", devices=gpu("g0"))]}), "n")
        == DEVICE_OVERSUBSCRIBED
    )
    assert evaluate_node_plan(store, plan({"n": [alloc("a", "n", devices=gpu("g1"))]}), "n") is None
    # Two placements of one plan claiming the same instance.
    p = plan({"n": [alloc("a", "n", devices=gpu("g1")), alloc("b", "n", devices=gpu("g1"))]})
    assert evaluate_node_plan(store, p, "n") == DEVICE_OVERSUBSCRIBED


def test_device_freed_by_stop_in_same_plan(store):
    store.commit(UpsertNodes((node("n", devices=(gpus("g0"),)),)))
    holder = alloc("holder", "n", devices=gpu("g0"))
    store.commit(UpsertAllocs((holder,)))
    p = plan({"n": [alloc("a", "n", devices=gpu("g0"))]}, stops={"n": [stopped(holder)]})
    assert evaluate_node_plan(store, p, "n") is None


def test_unknown_or_unhealthy_device_rejected(store):
    store.commit(UpsertNodes((node("n", devices=(gpus("g0", "g1", unhealthy=("g1",)),)),)))
    assert (
        evaluate_node_plan(store, plan({"n": [alloc("a", "n", devices=gpu("g9"))]}), "n")
        == DEVICE_UNKNOWN
    )
    assert (
        evaluate_node_plan(store, plan({"n": [alloc("a", "n", devices=gpu("g1"))]}), "n")
        == DEVICE_UNKNOWN
    )


# -- optimistic concurrency -------------------------------------------------------------------


def test_plans_on_disjoint_nodes_both_commit(store):
    """Omega: two plans built against the same snapshot never conflict when they touch
    different nodes."""
    store.commit(UpsertNodes((node("n1", cpu=1000), node("n2", cpu=1000))))
    snapshot_index = store.latest_index()
    applier = PlanApplier(store)
    p1 = plan({"n1": [alloc("a", "n1")]}, eval_id="e1", snapshot_index=snapshot_index)
    p2 = plan({"n2": [alloc("b", "n2")]}, eval_id="e2", snapshot_index=snapshot_index)
    r1, r2 = applier.apply(p1), applier.apply(p2)
    assert r1.full_commit(p1)[0] and r2.full_commit(p2)[0]
    assert r1.refresh_index == 0 and r2.refresh_index == 0
    assert store.node_usage("n1").cpu == 1000 and store.node_usage("n2").cpu == 1000


def test_second_plan_on_same_node_sees_the_first(store):
    """Both plans fit the stale snapshot; the applier checks the second against the latest
    state, which already holds the first."""
    store.commit(UpsertNodes((node("n1", cpu=1500),)))
    applier = PlanApplier(store)
    r1 = applier.apply(plan({"n1": [alloc("a", "n1")]}, eval_id="e1"))
    r2 = applier.apply(plan({"n1": [alloc("b", "n1")]}, eval_id="e2"))
    assert r1.refresh_index == 0
    assert r2.rejected_nodes == (RejectedNode("n1", "cpu exhausted"),)
    assert store.alloc("b") is None
    assert store.node_usage("n1").cpu == 1000


# -- plan queue -------------------------------------------------------------------------------


def test_plan_queue_dequeue_priority():
    """TestPlanQueue_Dequeue_Priority: highest priority first."""
    queue: PlanQueue[str] = PlanQueue()
    for prio in (10, 30, 20):
        queue.push(plan(eval_id=f"p{prio}", priority=prio), f"h{prio}")
    assert len(queue) == 3
    out = [queue.pop() for _ in range(3)]
    assert [(p.priority, handle) for p, handle in out] == [(30, "h30"), (20, "h20"), (10, "h10")]
    assert queue.pop() is None
    assert len(queue) == 0


def test_plan_queue_dequeue_fifo():
    """TestPlanQueue_Dequeue_FIFO: FIFO within a priority."""
    queue: PlanQueue[int] = PlanQueue()
    for i in range(100):
        queue.push(plan(eval_id=f"e{i}", priority=50), i)
    queue.push(plan(eval_id="urgent", priority=90), -1)
    assert queue.pop()[1] == -1
    assert [queue.pop()[1] for _ in range(100)] == list(range(100))


# -- worker side ------------------------------------------------------------------------------


def test_submit_plan_missing_node_refresh(store):
    """TestWorker_SubmitPlan_MissingNodeRefresh: a plan for an unknown node places nothing
    and hands back a refreshed state."""
    store.commit(UpsertNodes((node("known"),)))
    planner = InProcessPlanner(store)
    p = plan({"unknown": [alloc("a", "unknown")]}, snapshot_index=store.latest_index())

    result, state = planner.submit_plan(p)

    assert result.node_allocation == {}
    assert result.rejected_nodes == (RejectedNode("unknown", NODE_MISSING),)
    assert result.refresh_index != 0
    assert state is not None
    assert state.latest_index() >= result.refresh_index
    assert store.alloc("a") is None


def test_dry_run_planner_writes_nothing(store):
    store.commit(UpsertNodes((node("n"),)))
    before = store.latest_index()
    planner = InProcessPlanner(store, commit=False)
    result, state = planner.submit_plan(plan({"n": [alloc("a", "n")]}))
    assert result.node_allocation == {"n": (alloc("a", "n"),)}
    assert state is None
    assert store.latest_index() == before and store.alloc("a") is None
