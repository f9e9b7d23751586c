"""Who took the capacity: details of each node a plan apply rejects, for tracing.

The leader remembers, per node, the last committed plan that placed allocations on it
(`CapacityLedger`). When a later plan is rejected on that node and the worker planned on a
snapshot older than that commit, the commit is what took the capacity the worker saw free:
the attribution the plan-conflict event carries. `rejections` also sums what the rejected
plan asked on the node and what was free there when it was re-checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from actors.state import StateReader
from contracts import Plan, PlanResult


@dataclass(frozen=True, slots=True)
class CommittedPlan:
    index: int  # the log index the plan committed at
    eval_id: str
    job_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class Amounts:
    cpu: int = 0
    memory_mb: int = 0
    disk_mb: int = 0
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class Rejection:
    node_id: str
    reason: str
    asked: Amounts
    free: Amounts
    taken_by: CommittedPlan | None


class CapacityLedger:
    def __init__(self) -> None:
        self._last: dict[str, CommittedPlan] = {}

    def record(self, node_ids: Iterable[str], plan: CommittedPlan) -> None:
        for node_id in node_ids:
            self._last[node_id] = plan

    def taken_by(self, node_id: str, snapshot_index: int) -> CommittedPlan | None:
        last = self._last.get(node_id)
        return last if last is not None and last.index > snapshot_index else None


def _asked(plan: Plan, node_id: str) -> Amounts:
    cpu = memory = disk = gpus = 0
    for alloc in plan.node_allocation.get(node_id, ()):
        res = alloc.allocated_resources
        cpu += res.cpu
        memory += res.memory_mb
        disk += res.disk_mb
        gpus += sum(len(d.device_ids) for d in res.devices)
    return Amounts(cpu, memory, disk, gpus)


def _free(state: StateReader, node_id: str) -> Amounts:
    node = state.node(node_id)
    if node is None:
        return Amounts()
    used = state.node_usage(node_id)
    offered = node.node_resources
    reserved = node.reserved_resources
    total_gpus = sum(len(d.instances) for d in offered.devices)
    return Amounts(
        cpu=offered.cpu - reserved.cpu - used.cpu,
        memory_mb=offered.memory_mb - reserved.memory_mb - used.memory_mb,
        disk_mb=offered.disk_mb - reserved.disk_mb - used.disk_mb,
        gpus=total_gpus - len(used.device_ids),
    )


def rejections(
    state: StateReader, plan: Plan, result: PlanResult, ledger: CapacityLedger
) -> list[Rejection]:
    """One Rejection per rejected node of `result`, read against the state the plan was
    checked on (call before committing what the plan got)."""
    return [
        Rejection(
            node_id=r.node_id,
            reason=r.reason,
            asked=_asked(plan, r.node_id),
            free=_free(state, r.node_id),
            taken_by=ledger.taken_by(r.node_id, plan.snapshot_index),
        )
        for r in result.rejected_nodes
    ]
