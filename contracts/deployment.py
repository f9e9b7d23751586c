"""Deployments (Nomad's structs.Deployment): how one job version rolls out.

A service job version whose groups have an `update` block is rolled out by a deployment: the
scheduler places at most `max_parallel` replacements that are not yet healthy, or first
`canary` canaries that wait for promotion; the leader's deployment watcher marks allocations
healthy or unhealthy, promotes, fails (and auto-reverts) and completes the deployment.

drover keeps each allocation's deployment health in its deployment (`healthy_ids`,
`unhealthy_ids`), not on the allocation as Nomad does: a health change then rewrites one
deployment record instead of every allocation's, and the allocation views derive Nomad's
`DeploymentStatus` from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from contracts.fast_init import install_fast_inits


class DeploymentStatus(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    FAILED = "failed"
    SUCCESSFUL = "successful"
    CANCELLED = "cancelled"


ACTIVE_STATUSES = frozenset({DeploymentStatus.RUNNING, DeploymentStatus.PAUSED})

# Nomad's status descriptions, verbatim: clients and users match on them.
DESCRIPTION_RUNNING = "Deployment is running"
DESCRIPTION_NEEDS_PROMOTION = "Deployment is running but requires manual promotion"
DESCRIPTION_AUTO_PROMOTION = "Deployment is running pending automatic promotion"
DESCRIPTION_PAUSED = "Deployment is paused"
DESCRIPTION_SUCCESSFUL = "Deployment completed successfully"
DESCRIPTION_STOPPED_JOB = "Cancelled because job is stopped"
DESCRIPTION_NEWER_JOB = "Cancelled due to newer version of job"
DESCRIPTION_FAILED_ALLOCATIONS = "Failed due to unhealthy allocations"
DESCRIPTION_PROGRESS_DEADLINE = "Failed due to progress deadline"
DESCRIPTION_FAILED_BY_USER = "Deployment marked as failed"


@dataclass(frozen=True, slots=True)
class DeploymentState:
    """One task group's part of a deployment."""

    auto_revert: bool = False
    auto_promote: bool = False
    promoted: bool = False
    progress_deadline_s: float = 600.0
    require_progress_by: int = 0  # unix ns; 0 until the first placement
    desired_canaries: int = 0
    desired_total: int = 0
    placed_canaries: tuple[str, ...] = ()
    placed_allocs: int = 0
    healthy_ids: tuple[str, ...] = ()
    unhealthy_ids: tuple[str, ...] = ()

    @property
    def healthy_allocs(self) -> int:
        return len(self.healthy_ids)

    @property
    def unhealthy_allocs(self) -> int:
        return len(self.unhealthy_ids)

    def health_of(self, alloc_id: str) -> bool | None:
        if alloc_id in self.healthy_ids:
            return True
        if alloc_id in self.unhealthy_ids:
            return False
        return None

    @property
    def needs_promotion(self) -> bool:
        return self.desired_canaries > 0 and not self.promoted


@dataclass(frozen=True, slots=True)
class Deployment:
    id: str
    namespace: str = "default"
    job_id: str = ""
    job_version: int = 0
    job_modify_index: int = 0
    job_create_index: int = 0
    task_groups: dict[str, DeploymentState] = field(default_factory=dict)
    status: DeploymentStatus = DeploymentStatus.RUNNING
    status_description: str = DESCRIPTION_RUNNING
    eval_priority: int = 50
    create_index: int = 0
    modify_index: int = 0
    create_time: int = 0
    modify_time: int = 0

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    def group_of(self, alloc_id: str) -> str | None:
        """The group whose canaries or health name the allocation (None: not recorded)."""
        for name, state in self.task_groups.items():
            if alloc_id in state.placed_canaries or state.health_of(alloc_id) is not None:
                return name
        return None

    def health_of(self, alloc_id: str) -> bool | None:
        for state in self.task_groups.values():
            health = state.health_of(alloc_id)
            if health is not None:
                return health
        return None

    def is_canary(self, alloc_id: str) -> bool:
        return any(alloc_id in s.placed_canaries for s in self.task_groups.values())


install_fast_inits(__name__)
