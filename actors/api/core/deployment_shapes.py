"""Deployments in Nomad's JSON, and an allocation's DeploymentStatus derived from its
deployment (drover keeps health there, not on the allocation: contracts/deployment.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.api.core.task_states import go_time
from actors.state import StateReader
from contracts.allocation import Allocation
from contracts.deployment import Deployment, DeploymentState

NS_PER_S = 1_000_000_000


def deployment_json(deployment: Deployment) -> dict[str, Any]:
    return {
        "ID": deployment.id,
        "Namespace": deployment.namespace,
        "JobID": deployment.job_id,
        "JobVersion": deployment.job_version,
        "JobModifyIndex": deployment.job_modify_index,
        "JobSpecModifyIndex": deployment.job_modify_index,
        "JobCreateIndex": deployment.job_create_index,
        "IsMultiregion": False,
        "TaskGroups": {name: _group(s) for name, s in deployment.task_groups.items()},
        "Status": str(deployment.status),
        "StatusDescription": deployment.status_description,
        "EvalPriority": deployment.eval_priority,
        "CreateIndex": deployment.create_index,
        "ModifyIndex": deployment.modify_index,
        "CreateTime": deployment.create_time,
        "ModifyTime": deployment.modify_time,
    }


def _group(state: DeploymentState) -> dict[str, Any]:
    return {
        "AutoRevert": state.auto_revert,
        "AutoPromote": state.auto_promote,
        "ProgressDeadline": round(state.progress_deadline_s * NS_PER_S),
        "RequireProgressBy": go_time(state.require_progress_by),
        "Promoted": state.promoted,
        "PlacedCanaries": list(state.placed_canaries),
        "DesiredCanaries": state.desired_canaries,
        "DesiredTotal": state.desired_total,
        "PlacedAllocs": state.placed_allocs,
        "HealthyAllocs": state.healthy_allocs,
        "UnhealthyAllocs": state.unhealthy_allocs,
    }


def deployment_status(alloc: Allocation, deployment: Deployment | None) -> dict[str, Any] | None:
    """Nomad's AllocDeploymentStatus: Healthy is null until the watcher decided."""
    if not alloc.deployment_id or deployment is None:
        return None
    return {
        "Healthy": deployment.health_of(alloc.id),
        "Timestamp": go_time(deployment.modify_time),
        "Canary": deployment.is_canary(alloc.id),
        "ModifyIndex": deployment.modify_index,
    }


def deployment_lookup(state: StateReader) -> Callable[[Allocation], Deployment | None]:
    """Each allocation's deployment, looked up once per deployment."""
    seen: dict[str, Deployment | None] = {}

    def lookup(alloc: Allocation) -> Deployment | None:
        if not alloc.deployment_id:
            return None
        if alloc.deployment_id not in seen:
            seen[alloc.deployment_id] = state.deployment(alloc.deployment_id)
        return seen[alloc.deployment_id]

    return lookup
