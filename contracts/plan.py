"""Plans submitted by scheduler workers and the leader's verdict on them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from contracts.alloc_batch import compact_allocs, expand_allocs
from contracts.allocation import Allocation
from contracts.codec import (
    CodecError,
    describe,
    generic_decoder,
    generic_encoder,
    register_wire_form,
)
from contracts.deployment import Deployment
from contracts.evaluation import PlanAnnotations
from contracts.fast_init import install_fast_inits


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
    # Deployments the plan creates or changes (a new version's, an older one cancelled),
    # and which of its placements are canaries (contracts/deployment.py).
    deployments: tuple[Deployment, ...] = ()
    canaries: tuple[str, ...] = ()

    def is_no_op(self) -> bool:
        return not self.node_update and not self.node_allocation and not self.deployments

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


# -- wire form --------------------------------------------------------------------------------
# A plan's allocations travel in the compact batch form (contracts/alloc_batch.py): the
# leader decodes every plan, and a 1,000-allocation plan decodes several times faster. The
# allocations carry their node, so the per-node maps are rebuilt on arrival. The plain form
# (maps of node id -> allocations) is still read.


def _plan_to_wire(plan: Plan) -> dict[str, Any]:
    wire: dict[str, Any] = generic_encoder(Plan)(
        dataclasses.replace(plan, node_update={}, node_allocation={})
    )
    wire["NodeUpdate"] = compact_allocs(a for allocs in plan.node_update.values() for a in allocs)
    wire["NodeAllocation"] = compact_allocs(
        a for allocs in plan.node_allocation.values() for a in allocs
    )
    return wire


def _plan_from_wire(data: Any, path: str) -> Plan:
    if not isinstance(data, dict):
        raise CodecError(path, f"expected an object, got {describe(data)}")
    rest = dict(data)
    batches = {key: rest.pop(key, None) for key in ("NodeUpdate", "NodeAllocation")}
    maps: dict[str, dict[str, tuple[Allocation, ...]]] = {}
    for key, value in batches.items():
        if isinstance(value, list):
            by_node: dict[str, list[Allocation]] = {}
            for alloc in expand_allocs(value, f"{path}.{key}"):
                by_node.setdefault(alloc.node_id, []).append(alloc)
            maps[key] = {node: tuple(allocs) for node, allocs in by_node.items()}
        elif value is not None:
            rest[key] = value  # the plain form: decoded with the other fields
    plan: Plan = generic_decoder(Plan)(rest, path, "error")
    return dataclasses.replace(
        plan,
        node_update=maps.get("NodeUpdate", plan.node_update),
        node_allocation=maps.get("NodeAllocation", plan.node_allocation),
    )


register_wire_form(Plan, _plan_to_wire, _plan_from_wire)


install_fast_inits(__name__)
