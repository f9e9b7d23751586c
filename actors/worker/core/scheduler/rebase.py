"""Moving a plan onto a fresher state before it is submitted.

A worker schedules on a snapshot, and while it computes (tens of milliseconds for a large
job) other workers' plans commit. Nomad submits anyway: the plan applier rejects the nodes
that filled up meanwhile, and the scheduler refreshes and retries, which costs a round trip
to the leader, a reconcile and a placement pass per collision. The worker's replica already
holds most of those commits when the plan is ready, so before submitting, the generic
scheduler asks its planner for a fresher state (planner.RefreshingPlanner) and:

- moves the proposed load of every node the plan touched by what was committed there
  meanwhile (NodeUsage records are replaced on every change, so an unchanged node is the
  same object in both states);
- takes back its placements on the nodes that no longer fit, and places them again on the
  fresher state: the same placements (names, groups), through the same stacks.

The leader still re-checks every node: this only avoids sending what it would reject. The
plan is left to the leader, unchanged, whenever the move cannot be exact and cheap: nodes
registered, drained or gone since (the stacks' node rings would be stale), device claims,
property-based placement (distinct_property, spread: their counts are per value), nodes
whose usage moved where the plan also stops something (the stopped allocation may have
ended meanwhile and be released in the fresher usage already: moving the load would release
it twice), and full nodes where the plan also updates something in place.

After a rebase every stack forgets which nodes it found full: any of them may have room in
the fresher state, and a placement that then finds no node really has none there (its
blocked evaluation is stamped with the fresher index, and only later changes wake it).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actors.worker.core.scheduler.context import EvalContext

if TYPE_CHECKING:
    from actors.state import NodeUsage, StateReader


@dataclass(slots=True)
class Rebase:
    """What moving a plan onto a fresher state takes."""

    # Nodes the plan touched whose committed usage moved: (node, before, after).
    moved: list[tuple[str, NodeUsage, NodeUsage]]
    # Of those, the nodes that no longer fit the plan's placements.
    full: list[str]


def plan_rebase(
    ctx: EvalContext, old: StateReader, fresh: StateReader, redoable: Container[str]
) -> Rebase | None:
    """How to move `ctx`'s plan from `old` to `fresh`; None if it cannot be (module doc).
    `redoable`: IDs of the plan's placements that may be taken back and placed again."""
    if ctx.property_sets or fresh.table_index("nodes") != old.table_index("nodes"):
        return None
    moved: list[tuple[str, NodeUsage, NodeUsage]] = []
    full: list[str] = []
    plan = ctx.plan
    for node_id, load in ctx.loads.items():
        before, after = old.node_usage(node_id), fresh.node_usage(node_id)
        if after is before:
            continue
        if before.device_ids or after.device_ids or load.device_ids:
            return None
        if node_id in plan.node_update:
            # What the plan stops there may have ended meanwhile: the fresher usage already
            # lacks it, and moving the load would release it a second time.
            return None
        node = fresh.node(node_id)
        if node is None:
            return None
        moved.append((node_id, before, after))
        cap, reserved = node.node_resources, node.reserved_resources
        if (
            load.cpu + after.cpu - before.cpu <= cap.cpu - reserved.cpu
            and load.memory_mb + after.memory_mb - before.memory_mb
            <= cap.memory_mb - reserved.memory_mb
            and load.disk_mb + after.disk_mb - before.disk_mb <= cap.disk_mb - reserved.disk_mb
        ):
            continue
        if any(a.id not in redoable for a in plan.node_allocation.get(node_id, ())):
            return None
        full.append(node_id)
    return Rebase(moved, full)


def move_loads(ctx: EvalContext, rebase: Rebase, fresh: StateReader) -> None:
    """Shift the proposed loads by what was committed meanwhile and read `fresh` from now
    on; the full nodes are then over capacity until their placements are taken back."""
    for node_id, before, after in rebase.moved:
        load = ctx.loads[node_id]
        load.cpu += after.cpu - before.cpu
        load.memory_mb += after.memory_mb - before.memory_mb
        load.disk_mb += after.disk_mb - before.disk_mb
    ctx.rebase(fresh)
