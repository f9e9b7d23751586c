"""The plan applier's verdict on a plan (Nomad's evaluatePlan / evaluateNodePlan).

Workers schedule against snapshots that may be stale; the leader re-checks every node a plan
touches against the latest state. Nodes that still fit are committed, the rest are rejected
with a reason, and the worker refreshes to `refresh_index` and retries: Omega's optimistic
concurrency. Plans touching disjoint nodes never conflict.

Fit is checked against the store's incrementally maintained per-node usage, so a node check
costs O(allocations in the plan for that node), not O(allocations on the node).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from contracts import Allocation, NodeEligibility, NodeStatus, Plan, PlanResult, RejectedNode
from contracts.resources import AllocatedDevice, NodeDeviceResource

if TYPE_CHECKING:
    from actors.state import StateReader

NODE_MISSING = "node does not exist"
NODE_NOT_READY = "node is not ready for placements"
NODE_INELIGIBLE = "node is not eligible"
NODE_DRAINING = "node is draining"
NODE_DISCONNECTED = "node is disconnected"
DEVICE_OVERSUBSCRIBED = "device oversubscribed"
DEVICE_UNKNOWN = "device instance not on node"


def evaluate_plan(state: StateReader, plan: Plan) -> PlanResult:
    node_update: dict[str, tuple[Allocation, ...]] = {}
    node_allocation: dict[str, tuple[Allocation, ...]] = {}
    rejected: list[RejectedNode] = []
    node_ids = list(plan.node_allocation)
    node_ids += [n for n in plan.node_update if n not in plan.node_allocation]
    for node_id in node_ids:
        reason = evaluate_node_plan(state, plan, node_id)
        if reason is not None:
            rejected.append(RejectedNode(node_id, reason))
            if plan.all_at_once:
                # All or nothing: the first rejection voids the whole plan.
                return PlanResult(
                    rejected_nodes=tuple(rejected), refresh_index=_refresh_index(state)
                )
            continue
        if node_id in plan.node_update:
            node_update[node_id] = plan.node_update[node_id]
        if node_id in plan.node_allocation:
            node_allocation[node_id] = plan.node_allocation[node_id]
    return PlanResult(
        node_update=node_update,
        node_allocation=node_allocation,
        rejected_nodes=tuple(rejected),
        refresh_index=_refresh_index(state) if rejected else 0,
    )


def _refresh_index(state: StateReader) -> int:
    return max(state.table_index("allocs"), state.table_index("nodes"), 1)


def evaluate_node_plan(state: StateReader, plan: Plan, node_id: str) -> str | None:
    """None if the node can take its part of the plan, else the reason it cannot."""
    placing = plan.node_allocation.get(node_id)
    if not placing:
        return None  # stops and evictions always fit
    node = state.node(node_id)
    if node is None:
        return NODE_MISSING
    if node.status is NodeStatus.DISCONNECTED:
        return NODE_DISCONNECTED
    if node.status is not NodeStatus.READY:
        return NODE_NOT_READY
    alloc_of = state.alloc
    current = [alloc_of(a.id) for a in placing]
    in_place_only = all(c is not None and c.node_id == node_id for c in current)
    if not in_place_only:
        # Updates of allocations already there are fine on an ineligible node; new ones aren't.
        if node.scheduling_eligibility is NodeEligibility.INELIGIBLE:
            return NODE_INELIGIBLE
        if node.drain_strategy is not None:
            return NODE_DRAINING

    usage = state.node_usage(node_id)
    cpu, memory, disk = usage.cpu, usage.memory_mb, usage.disk_mb
    stopping = plan.node_update.get(node_id, ())
    devices_in_use: set[str] | None = None  # built when a device is released or claimed
    if stopping or any(c is not None for c in current):
        # Stops, evictions and updates release the records they replace first.
        devices_in_use = in_use = set(usage.device_ids)
        released: set[str] = set()

        def release(alloc: Allocation) -> None:
            nonlocal cpu, memory, disk
            res = alloc.allocated_resources
            cpu -= res.cpu
            memory -= res.memory_mb
            disk -= res.disk_mb
            for device in res.devices:
                in_use.difference_update(device.device_ids)
            released.add(alloc.id)

        for stopped in stopping:
            existing = state.alloc(stopped.id)
            if existing is not None and existing.node_id == node_id and not existing.terminal():
                release(existing)
        for existing in current:
            if (
                existing is not None
                and existing.node_id == node_id
                and not existing.terminal()
                and existing.id not in released
            ):
                release(existing)  # replaced by its updated record below
    for alloc in placing:
        if alloc.terminal():
            continue
        res = alloc.allocated_resources
        cpu += res.cpu
        memory += res.memory_mb
        disk += res.disk_mb
        if res.devices:
            if devices_in_use is None:
                devices_in_use = set(usage.device_ids)
            reason = _claim_devices(node.node_resources.devices, res.devices, devices_in_use)
            if reason is not None:
                return reason

    reserved = node.reserved_resources
    capacity = node.node_resources
    if cpu > capacity.cpu - reserved.cpu:
        return "cpu exhausted"
    if memory > capacity.memory_mb - reserved.memory_mb:
        return "memory exhausted"
    if disk > capacity.disk_mb - reserved.disk_mb:
        return "disk exhausted"
    return None


def _claim_devices(
    node_devices: Sequence[NodeDeviceResource],
    wanted: Sequence[AllocatedDevice],
    in_use: set[str],
) -> str | None:
    if not wanted:
        return None
    healthy = {i.id for group in node_devices for i in group.instances if i.healthy}
    for device in wanted:
        for device_id in device.device_ids:
            if device_id not in healthy:
                return DEVICE_UNKNOWN
            if device_id in in_use:
                return DEVICE_OVERSUBSCRIBED
            in_use.add(device_id)
    return None
