"""The reconciler's deployment rules, ported from Nomad's reconcile_cluster_test.go
(TestReconciler_CreateDeployment_*, _NewCanaries*, _PausedOrFailedDeployment_*,
_PromoteCanaries_*, _CancelDeployment_*, _StopOldCanaries and the computeLimit cases)."""

from __future__ import annotations

import dataclasses

import pytest

from actors.worker.core.scheduler.reconcile import ALLOC_NOT_NEEDED, Reconciler
from contracts import Allocation, Job, UpdateStrategy
from contracts.deployment import (
    DESCRIPTION_AUTO_PROMOTION,
    DESCRIPTION_NEEDS_PROMOTION,
    DESCRIPTION_NEWER_JOB,
    DESCRIPTION_STOPPED_JOB,
    Deployment,
    DeploymentState,
    DeploymentStatus,
)
from contracts.evaluation import DesiredUpdates

NOW = 1_700_000_000_000_000_000
IDS = iter(range(10_000))


def ids() -> str:
    return f"dep-{next(IDS)}"


def versions(build, strategy: UpdateStrategy) -> tuple[Job, Job]:
    """v0 of `my-job` (count 10) and v1 that changes the task (a destructive update)."""
    group = build.group(update=strategy)
    old = build.job("my-job", group).replace(version=0, job_modify_index=10, create_index=5)
    task = dataclasses.replace(group.tasks[0], env={"V": "2"})
    new = old.replace(
        version=1,
        job_modify_index=20,
        task_groups=(dataclasses.replace(group, tasks=(task,)),),
    )
    return old, new


def reconcile(job, allocs, old=None, deployment=None, lookup=None):
    known = {j.version: j for j in (job, old) if j is not None}
    return Reconciler(
        job,
        allocs,
        {},
        batch=False,
        job_version=known.get,
        now_ns=NOW,
        deployment=deployment,
        deployment_of=lookup,
        new_id=ids,
    ).compute()


def updates(result) -> DesiredUpdates:
    return result.desired_tg_updates["web"].freeze()


def deployment_for(job: Job, state: DeploymentState, **kw) -> Deployment:
    return Deployment(
        "current",
        job_id=job.id,
        job_version=job.version,
        job_create_index=job.create_index,
        task_groups={"web": state},
        **kw,
    )


def joined(alloc: Allocation, deployment_id: str = "current") -> Allocation:
    return dataclasses.replace(alloc, deployment_id=deployment_id)


def test_a_first_registration_creates_a_deployment_for_its_placements(build) -> None:
    _, job = versions(build, UpdateStrategy(max_parallel=2))
    result = reconcile(job, [])
    assert len(result.place) == 10 and result.deployment is not None
    assert result.deployment_id == result.deployment.id
    state = result.deployment.task_groups["web"]
    assert state.desired_total == 10 and state.desired_canaries == 0
    assert result.deployment.job_version == job.version


def test_destructive_update_creates_a_deployment_and_replaces_max_parallel(build) -> None:
    """TestReconciler_CreateDeployment_RollingUpgrade_Destructive."""
    old, job = versions(build, UpdateStrategy(max_parallel=4))
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(10)]
    result = reconcile(job, allocs, old)
    assert result.deployment is not None and result.deployment_updates == []
    assert updates(result) == DesiredUpdates(destructive_update=4, ignore=6)
    assert [p.name for p in result.destructive] == [f"my-job.web[{i}]" for i in range(4)]


def test_no_new_deployment_when_this_version_runs_and_nothing_changes(build) -> None:
    _, job = versions(build, UpdateStrategy(max_parallel=2))
    allocs = [build.alloc(job, f"node-{i}", i) for i in range(8)]
    result = reconcile(job, allocs)
    assert result.deployment is None and len(result.place) == 2


@pytest.mark.parametrize(
    ("auto_promote", "description"),
    [(False, DESCRIPTION_NEEDS_PROMOTION), (True, DESCRIPTION_AUTO_PROMOTION)],
)
def test_new_canaries_before_any_replacement(build, auto_promote: bool, description: str) -> None:
    """TestReconciler_NewCanaries: canary 2 of 10, nothing destroyed yet."""
    strategy = UpdateStrategy(max_parallel=4, canary=2, auto_promote=auto_promote)
    old, job = versions(build, strategy)
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(10)]
    result = reconcile(job, allocs, old)
    assert result.destructive == []
    canaries = [p for p in result.place if p.canary]
    assert [p.name for p in canaries] == ["my-job.web[0]", "my-job.web[1]"]
    assert updates(result) == DesiredUpdates(canary=2, ignore=10)
    assert result.deployment is not None
    assert result.deployment.task_groups["web"].desired_canaries == 2
    assert result.deployment.status_description == description


def test_canaries_waiting_for_promotion_hold_the_rollout(build) -> None:
    old, job = versions(build, UpdateStrategy(max_parallel=4, canary=2))
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(10)]
    canaries = [joined(build.alloc(job, f"canary-{i}", i)) for i in range(2)]
    state = DeploymentState(
        desired_canaries=2,
        desired_total=10,
        placed_canaries=tuple(c.id for c in canaries),
        healthy_ids=tuple(c.id for c in canaries),
    )
    result = reconcile(job, allocs + canaries, old, deployment_for(job, state))
    assert result.place == [] and result.destructive == [] and result.stop == []
    assert result.deployment is None and result.deployment_id == "current"
    assert updates(result) == DesiredUpdates(ignore=12)


def test_promoted_canaries_replace_their_namesakes_and_the_rollout_goes_on(build) -> None:
    """TestReconciler_PromoteCanaries_Unblock: the old allocations the canaries took the
    names of stop; the rest are replaced max_parallel at a time."""
    old, job = versions(build, UpdateStrategy(max_parallel=4, canary=2))
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(10)]
    canaries = [joined(build.alloc(job, f"canary-{i}", i)) for i in range(2)]
    state = DeploymentState(
        promoted=True,
        desired_canaries=2,
        desired_total=10,
        placed_canaries=tuple(c.id for c in canaries),
        healthy_ids=tuple(c.id for c in canaries),
    )
    result = reconcile(job, allocs + canaries, old, deployment_for(job, state))
    assert sorted(s.alloc.name for s in result.stop) == ["my-job.web[0]", "my-job.web[1]"]
    assert all(s.description == ALLOC_NOT_NEEDED for s in result.stop)
    assert [p.name for p in result.destructive] == [f"my-job.web[{i}]" for i in range(2, 6)]


@pytest.mark.parametrize("status", [DeploymentStatus.PAUSED, DeploymentStatus.FAILED])
def test_a_paused_or_failed_deployment_places_nothing_more(build, status) -> None:
    """TestReconciler_PausedOrFailedDeployment_NoMoreDestructiveUpdates / _NoMorePlacements."""
    old, job = versions(build, UpdateStrategy(max_parallel=4))
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(8)]
    current = deployment_for(job, DeploymentState(desired_total=10), status=status)
    result = reconcile(job, allocs, old, current)
    assert result.destructive == [] and result.place == []


def test_an_unhealthy_replacement_stops_the_rollout(build) -> None:
    old, job = versions(build, UpdateStrategy(max_parallel=4))
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(2, 10)]
    bad = joined(build.alloc(job, "new-0", 0))
    good = joined(build.alloc(job, "new-1", 1))
    state = DeploymentState(desired_total=10, healthy_ids=(good.id,), unhealthy_ids=(bad.id,))
    result = reconcile(job, [*allocs, bad, good], old, deployment_for(job, state))
    assert result.destructive == []


def test_a_newer_version_cancels_the_active_deployment(build) -> None:
    """TestReconciler_CancelDeployment_JobUpdate."""
    old, job = versions(build, UpdateStrategy(max_parallel=4))
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(10)]
    running = deployment_for(old, DeploymentState(desired_total=10))
    result = reconcile(job, allocs, old, running)
    [cancelled] = result.deployment_updates
    assert cancelled.status is DeploymentStatus.CANCELLED
    assert cancelled.status_description == DESCRIPTION_NEWER_JOB
    assert result.deployment is not None and result.deployment.id != running.id


def test_a_stopped_job_cancels_its_deployment(build) -> None:
    """TestReconciler_CancelDeployment_JobStop."""
    _, job = versions(build, UpdateStrategy(max_parallel=4))
    allocs = [build.alloc(job, f"node-{i}", i) for i in range(10)]
    running = deployment_for(job, DeploymentState(desired_total=10))
    result = reconcile(job.replace(stop=True), allocs, deployment=running)
    [cancelled] = result.deployment_updates
    assert cancelled.status_description == DESCRIPTION_STOPPED_JOB
    assert len(result.stop) == 10


def test_canaries_of_an_earlier_unpromoted_deployment_are_stopped(build) -> None:
    """TestReconciler_StopOldCanaries."""
    old, job = versions(build, UpdateStrategy(max_parallel=4, canary=2))
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(10)]
    stale = joined(build.alloc(old, "old-canary", 0), "earlier")
    earlier = Deployment(
        "earlier",
        job_id=job.id,
        status=DeploymentStatus.CANCELLED,
        task_groups={"web": DeploymentState(desired_canaries=2, placed_canaries=(stale.id,))},
    )
    result = reconcile(job, [*allocs, stale], old, lookup={"earlier": earlier}.get)
    assert [s.alloc.id for s in result.stop] == [stale.id]
    assert len([p for p in result.place if p.canary]) == 2


def test_a_failed_allocation_of_the_active_deployment_waits_for_the_watcher(build) -> None:
    """Nomad's updateByReschedulable: it is replaced only once the deployment watcher marks
    it (desired transition `reschedule`); once the deployment ended, the policy rules."""
    from contracts import ClientStatus, DesiredTransition

    _, job = versions(build, UpdateStrategy(max_parallel=2))
    allocs = [joined(build.alloc(job, f"node-{i}", i)) for i in range(10)]
    allocs[3] = dataclasses.replace(allocs[3], client_status=ClientStatus.FAILED)
    state = DeploymentState(desired_total=10, progress_deadline_s=600)
    running = deployment_for(job, state)

    held = reconcile(job, allocs, deployment=running)
    assert held.place == [] and updates(held).place == 0

    marked = list(allocs)
    marked[3] = dataclasses.replace(
        allocs[3], desired_transition=DesiredTransition(reschedule=True)
    )
    allowed = reconcile(job, marked, deployment=running)
    assert [p.previous.id for p in allowed.place if p.previous] == [allocs[3].id]

    ended = dataclasses.replace(running, status=DeploymentStatus.FAILED)
    after = reconcile(job, allocs, deployment=ended)
    assert [p.previous.id for p in after.place if p.previous] == [allocs[3].id]
