"""What a committed plan does to deployments (Nomad's upsertPlanResults deployment part).

A plan may create a deployment (a new version's first evaluation) or cancel older ones; its
placements and in-place updates that joined a deployment count as placed there, its canaries
are recorded, and the first placement starts the progress deadline.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from actors.state import StateReader
from contracts import Plan, PlanResult
from contracts.deployment import Deployment

NS_PER_S = 1_000_000_000


def plan_deployments(
    state: StateReader, plan: Plan, result: PlanResult, now_ns: int
) -> list[Deployment]:
    """The deployment records to write with the plan's committed result (none if the plan
    neither carries deployments nor placed anything into one)."""
    records = {d.id: d for d in plan.deployments}
    joined: Counter[tuple[str, str]] = Counter()
    canaries = set(plan.canaries)
    placed_canaries: dict[tuple[str, str], list[str]] = {}
    for allocs in result.node_allocation.values():
        for alloc in allocs:
            if not alloc.deployment_id:
                continue
            before = state.alloc(alloc.id) if alloc.create_index else None
            if before is not None and before.deployment_id == alloc.deployment_id:
                continue  # already counted when it joined
            key = (alloc.deployment_id, alloc.task_group)
            joined[key] += 1
            if alloc.id in canaries:
                placed_canaries.setdefault(key, []).append(alloc.id)
    for (deployment_id, group), count in joined.items():
        record = records.get(deployment_id) or state.deployment(deployment_id)
        if record is None or group not in record.task_groups:
            continue
        group_state = record.task_groups[group]
        deadline = group_state.require_progress_by
        if not deadline and group_state.progress_deadline_s > 0:
            deadline = now_ns + int(group_state.progress_deadline_s * NS_PER_S)
        group_state = dataclasses.replace(
            group_state,
            placed_allocs=group_state.placed_allocs + count,
            placed_canaries=(
                *group_state.placed_canaries,
                *placed_canaries.get((deployment_id, group), ()),
            ),
            require_progress_by=deadline,
        )
        records[deployment_id] = dataclasses.replace(
            record,
            task_groups={**record.task_groups, group: group_state},
            modify_time=now_ns,
        )
    return list(records.values())
