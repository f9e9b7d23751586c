"""UsageTable: a placement after a snapshot copies one small shard, and the snapshot keeps
what it saw."""

from __future__ import annotations

from actors.state.usage import EMPTY_USAGE, USAGE_SHARDS, NodeUsage, UsageTable
from contracts import AllocatedResources, Allocation

NODES = 5_000


def alloc(alloc_id: str, node_id: str, cpu: int = 100) -> Allocation:
    return Allocation(
        id=alloc_id,
        node_id=node_id,
        job_id="web",
        task_group="web",
        name="web.web[0]",
        allocated_resources=AllocatedResources(cpu=cpu, memory_mb=64, disk_mb=10),
    )


def fleet_in_use() -> UsageTable:
    table = UsageTable()
    for i in range(NODES):
        table.add(alloc(f"a{i}", f"node-{i}"))
    return table


def test_a_placement_after_a_snapshot_copies_one_shard_of_the_fleet() -> None:
    table = fleet_in_use()
    snap = table.snapshot()
    before = snap.shard_identity()
    table.add(alloc("late", "node-7", cpu=50))
    after = table.table.shard_identity()
    copied = [i for i, (old, new) in enumerate(zip(before, after, strict=True)) if old is not new]
    assert len(copied) == 1
    # One shard holds about NODES / USAGE_SHARDS nodes, not the whole fleet.
    assert len(after[copied[0]]) < 2 * NODES // USAGE_SHARDS
    assert snap.get("node-7") == NodeUsage(100, 64, 10, frozenset(), 1)
    assert table.get("node-7") == NodeUsage(150, 128, 20, frozenset(), 2)


def test_every_node_is_found_through_the_snapshot_lookup() -> None:
    table = fleet_in_use()
    lookup = table.snapshot().lookup()
    assert all(lookup(f"node-{i}") == NodeUsage(100, 64, 10, frozenset(), 1) for i in range(NODES))
    assert lookup("node-unknown") is None
    table.remove(alloc("a3", "node-3"))
    assert table.get("node-3") == EMPTY_USAGE
    assert lookup("node-3") == NodeUsage(100, 64, 10, frozenset(), 1)
