"""Per-node resource usage, kept incrementally so the plan applier reads it in O(1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from actors.state.cow import CowMap, FrozenMap, str_hash
from contracts.allocation import Allocation
from contracts.copying import replacer
from contracts.resources import AllocatedResources


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """The sum of `allocated_resources` over a node's non-terminal allocations."""

    cpu: int = 0
    memory_mb: int = 0
    disk_mb: int = 0
    device_ids: frozenset[str] = frozenset()
    alloc_count: int = 0


EMPTY_USAGE = NodeUsage()

_usage = replacer(NodeUsage, "cpu", "memory_mb", "disk_mb", "device_ids", "alloc_count")


def _device_ids(alloc: Allocation) -> list[str]:
    return [i for d in alloc.allocated_resources.devices for i in d.device_ids]


class UsageTable:
    """node_id -> NodeUsage, updated by add/remove as allocations enter and leave the live set.

    Device instances are reference-counted so that two live allocations claiming the same
    instance (an oversubscription the plan applier should have refused) still subtract
    correctly: an id leaves `device_ids` only when no live allocation holds it.
    """

    __slots__ = ("_device_refs", "table")

    def __init__(self, shards: int = 256) -> None:
        self.table: CowMap[str, NodeUsage] = CowMap(shards, str_hash)
        self._device_refs: dict[tuple[str, str], int] = {}

    def get(self, node_id: str) -> NodeUsage:
        return self.table.get(node_id) or EMPTY_USAGE

    def add(self, alloc: Allocation) -> None:
        self._apply(alloc, 1)

    def remove(self, alloc: Allocation) -> None:
        self._apply(alloc, -1)

    def add_many(self, resources: AllocatedResources, per_node: Mapping[str, int]) -> None:
        """Add `n` live allocations of `resources` (no devices) on each node of `per_node`:
        a plan's group of placements at once, without their records."""
        assert not resources.devices, "device instances are counted per allocation"
        table = self.table
        cpu, memory, disk = resources.cpu, resources.memory_mb, resources.disk_mb
        for node_id, n in per_node.items():
            slot = table.slot(node_id)
            cur = table.get_at(slot, node_id) or EMPTY_USAGE
            table.set_at(
                slot,
                node_id,
                _usage(
                    cur,
                    cur.cpu + n * cpu,
                    cur.memory_mb + n * memory,
                    cur.disk_mb + n * disk,
                    cur.device_ids,
                    cur.alloc_count + n,
                ),
            )

    def _apply(self, alloc: Allocation, sign: int) -> None:
        node_id = alloc.node_id
        table = self.table
        slot = table.slot(node_id)
        cur = table.get_at(slot, node_id) or EMPTY_USAGE
        res = alloc.allocated_resources
        devices = cur.device_ids
        if res.devices:
            devices = self._update_devices(node_id, devices, _device_ids(alloc), sign)
        count = cur.alloc_count + sign
        if count == 0:
            table.pop(node_id)
            return
        table.set_at(
            slot,
            node_id,
            _usage(
                cur,
                cur.cpu + sign * res.cpu,
                cur.memory_mb + sign * res.memory_mb,
                cur.disk_mb + sign * res.disk_mb,
                devices,
                count,
            ),
        )

    def _update_devices(
        self, node_id: str, current: frozenset[str], ids: list[str], sign: int
    ) -> frozenset[str]:
        refs = self._device_refs
        added: list[str] = []
        removed: list[str] = []
        for dev in ids:
            key = (node_id, dev)
            n = refs.get(key, 0) + sign
            if n > 0:
                refs[key] = n
                if n == 1 and sign > 0:
                    added.append(dev)
            else:
                refs.pop(key, None)
                removed.append(dev)
        if added:
            current = current | frozenset(added)
        if removed:
            current = current - frozenset(removed)
        return current

    def snapshot(self) -> FrozenMap[str, NodeUsage]:
        return self.table.snapshot()
