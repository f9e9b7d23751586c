"""Client nodes: what they offer and whether they can take work."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum

import orjson

from contracts.fast_init import install_fast_inits
from contracts.job import DEFAULT_NODE_POOL
from contracts.resources import NodeResources, ReservedResources


class NodeStatus(StrEnum):
    INITIALIZING = "initializing"
    READY = "ready"
    DOWN = "down"
    DISCONNECTED = "disconnected"


class NodeEligibility(StrEnum):
    ELIGIBLE = "eligible"
    INELIGIBLE = "ineligible"


@dataclass(frozen=True, slots=True)
class DriverInfo:
    detected: bool = True
    healthy: bool = True


@dataclass(frozen=True, slots=True)
class DrainStrategy:
    """Nomad's drain: `deadline_s` > 0 forces what is left off the node that long after
    `started_at` (unix ns); 0 is no deadline; < 0 forces everything off at once (`-force`).
    Batch allocations run on until the deadline; the others migrate at once."""

    deadline_s: float = 3600.0
    ignore_system_jobs: bool = False
    started_at: int = 0

    @property
    def forced(self) -> bool:
        return self.deadline_s < 0

    def deadline_ns(self) -> int | None:
        """When the rest is forced off (unix ns); None without a deadline."""
        if not self.deadline_s > 0 or self.deadline_s == float("inf"):
            return None
        return self.started_at + int(self.deadline_s * 1e9)


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    name: str = ""
    datacenter: str = "dc1"
    node_class: str = ""
    node_pool: str = DEFAULT_NODE_POOL
    attributes: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    drivers: dict[str, DriverInfo] = field(default_factory=dict)
    node_resources: NodeResources = field(default_factory=NodeResources)
    reserved_resources: ReservedResources = field(default_factory=ReservedResources)
    status: NodeStatus = NodeStatus.READY
    status_description: str = ""
    scheduling_eligibility: NodeEligibility = NodeEligibility.ELIGIBLE
    drain_strategy: DrainStrategy | None = None
    computed_class: str = ""
    status_updated_at: int = 0
    create_index: int = 0
    modify_index: int = 0

    @property
    def drain(self) -> bool:
        return self.drain_strategy is not None

    def ready(self) -> bool:
        """Nomad's Node.Ready(): ready, not draining, eligible."""
        return (
            self.status is NodeStatus.READY
            and self.drain_strategy is None
            and self.scheduling_eligibility is NodeEligibility.ELIGIBLE
        )

    def terminal_status(self) -> bool:
        return self.status is NodeStatus.DOWN

    def with_computed_class(self) -> Node:
        from dataclasses import replace

        return replace(self, computed_class=compute_node_class(self))


def _not_unique(items: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in items.items() if not k.startswith("unique.")}


def compute_node_class(node: Node) -> str:
    """Nomad's computed class: a hash over what constraints can see, minus `unique.*` keys.

    Nodes with the same class are interchangeable for feasibility, so the scheduler checks a
    class once and skips every node of an ineligible class.
    """
    material = {
        "dc": node.datacenter,
        "attrs": _not_unique(node.attributes),
        "meta": _not_unique(node.meta),
        "class": node.node_class,
        "pool": node.node_pool,
        "drivers": sorted(k for k, d in node.drivers.items() if d.detected and d.healthy),
        "devices": [
            [d.vendor, d.type, d.name, sorted(d.attributes.items())]
            for d in node.node_resources.devices
        ],
    }
    digest = hashlib.blake2b(orjson.dumps(material, option=orjson.OPT_SORT_KEYS), digest_size=8)
    return "v1:" + str(int.from_bytes(digest.digest(), "big"))


install_fast_inits(__name__)
