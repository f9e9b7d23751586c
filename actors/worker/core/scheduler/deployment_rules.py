"""The reconciler's deployment rules (Nomad's reconcile_cluster.go, deployment parts).

A service job's group with an `update` block (max_parallel > 0) rolls a new version out under
a deployment: created when the version first places or changes allocations, cancelled when a
newer version or a stop supersedes it. While canaries wait for promotion, nothing else of the
group is replaced; after it, at most max_parallel replacements that are not yet healthy are
in flight, and none while the deployment is paused or failed, or after an allocation of it
turned out unhealthy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from contracts import Allocation, Job, TaskGroup, UpdateStrategy
from contracts.deployment import (
    DESCRIPTION_AUTO_PROMOTION,
    DESCRIPTION_NEEDS_PROMOTION,
    DESCRIPTION_RUNNING,
    Deployment,
    DeploymentState,
    DeploymentStatus,
)


def strategy_of(tg: TaskGroup, batch: bool) -> UpdateStrategy | None:
    """The group's rollout strategy, if it is rolled out under a deployment."""
    if batch or tg.update is None or tg.update.max_parallel <= 0:
        return None
    return tg.update


def for_version(deployment: Deployment, job: Job) -> bool:
    return deployment.job_version == job.version and deployment.job_create_index == job.create_index


def cancelled(deployment: Deployment, description: str, now_ns: int) -> Deployment:
    return dataclasses.replace(
        deployment,
        status=DeploymentStatus.CANCELLED,
        status_description=description,
        modify_time=now_ns,
    )


def new_deployment(job: Job, deployment_id: str, now_ns: int) -> Deployment:
    return Deployment(
        id=deployment_id,
        namespace=job.namespace,
        job_id=job.id,
        job_version=job.version,
        job_modify_index=job.job_modify_index,
        job_create_index=job.create_index,
        eval_priority=job.priority,
        create_time=now_ns,
        modify_time=now_ns,
    )


def with_group(
    deployment: Deployment, tg: TaskGroup, strategy: UpdateStrategy, canaries: int
) -> Deployment:
    """A new deployment with the group's state added (and the description canaries need)."""
    state = DeploymentState(
        auto_revert=strategy.auto_revert,
        auto_promote=strategy.auto_promote,
        progress_deadline_s=strategy.progress_deadline_s,
        desired_canaries=canaries,
        desired_total=tg.count,
    )
    groups = {**deployment.task_groups, tg.name: state}
    description = deployment.status_description
    if canaries:
        promoting = all(s.auto_promote for s in groups.values() if s.desired_canaries)
        description = DESCRIPTION_AUTO_PROMOTION if promoting else DESCRIPTION_NEEDS_PROMOTION
    elif description == "":
        description = DESCRIPTION_RUNNING
    return dataclasses.replace(deployment, task_groups=groups, status_description=description)


def rolling_limit(
    strategy: UpdateStrategy | None,
    replacing: int,
    deployment: Deployment | None,
    untainted: Iterable[Allocation],
    *,
    halted: bool,
    canary_state: bool,
) -> int:
    """How many of `replacing` destructive updates may go now (Nomad's computeLimit)."""
    if strategy is None or replacing == 0:
        return replacing
    if halted or canary_state:
        return 0
    limit = strategy.max_parallel
    if deployment is not None:
        for alloc in untainted:
            if alloc.deployment_id != deployment.id:
                continue
            health = deployment.health_of(alloc.id)
            if health is False:
                return 0  # an unhealthy allocation stops the rollout
            if health is None:
                limit -= 1
    return max(0, limit)


def canary_names(
    canaries: Iterable[Allocation], destructive: Iterable[Allocation], wanted: int
) -> list[str]:
    """Names for new canaries: those of allocations to replace that have none yet (Nomad's
    NextCanaries), lowest index first."""
    taken = {a.name for a in canaries}
    names: list[str] = []
    for alloc in sorted(destructive, key=lambda a: a.index):
        if len(names) == wanted:
            break
        if alloc.name not in taken:
            taken.add(alloc.name)
            names.append(alloc.name)
    return names


def stale_canary(
    alloc: Allocation, current: Deployment | None, lookup: Callable[[str], Deployment | None]
) -> bool:
    """A canary of an earlier deployment that was never promoted: not needed any more."""
    if not alloc.deployment_id or (current is not None and alloc.deployment_id == current.id):
        return False
    earlier = lookup(alloc.deployment_id)
    if earlier is None:
        return False
    return any(
        alloc.id in state.placed_canaries and not state.promoted
        for state in earlier.task_groups.values()
    )
