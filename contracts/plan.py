"""Plans submitted by scheduler workers and the leader's verdict on them."""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.allocation import Allocation
from contracts.evaluation import PlanAnnotations


@dataclass(frozen=True, slots=True)
class Plan:
    """What one scheduling pass wants to change, keyed by node.

    node_update: allocations to stop or evict (their new desired status is in the record).
    node_allocation: allocations to place, or existing ones updated in place.
    """

    eval_id: str
    eval_token: str = ""
    priority: int = 50
    namespace: str = "default"
    job_id: str = ""
    job_version: int = 0
    all_at_once: bool = False
    snapshot_index: int = 0
    node_update: dict[str, tuple[Allocation, ...]] = field(default_factory=dict)
    node_allocation: dict[str, tuple[Allocation, ...]] = field(default_factory=dict)
    annotations: PlanAnnotations | None = None

    def is_no_op(self) -> bool:
        return not self.node_update and not self.node_allocation

    def placement_count(self) -> int:
        return sum(len(a) for a in self.node_allocation.values())


@dataclass(frozen=True, slots=True)
class RejectedNode:
    node_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class PlanResult:
    """What the leader committed. refresh_index != 0 means part of the plan was rejected and
    the worker must refresh its state to at least that index before retrying."""

    node_update: dict[str, tuple[Allocation, ...]] = field(default_factory=dict)
    node_allocation: dict[str, tuple[Allocation, ...]] = field(default_factory=dict)
    rejected_nodes: tuple[RejectedNode, ...] = field(default_factory=tuple)
    refresh_index: int = 0
    alloc_index: int = 0

    def is_no_op(self) -> bool:
        return not self.node_update and not self.node_allocation

    def full_commit(self, plan: Plan) -> tuple[bool, int, int]:
        """(all placements committed?, expected, actual) like Nomad's PlanResult.FullCommit."""
        expected = plan.placement_count()
        actual = sum(len(a) for a in self.node_allocation.values())
        return actual == expected, expected, actual
