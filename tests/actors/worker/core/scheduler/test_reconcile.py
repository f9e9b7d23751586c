"""The reconciler on its own, ported from Nomad's reconcile_cluster_test.go (TestReconciler_*).

The deployment and canary scenarios are in test_reconcile_deployments.py; here the
per-group DesiredUpdates (Nomad's desiredTGUpdates) are asserted as is.
Nomad reports a migration as a stop plus a place; drover carries the stop inside the
placement (`Placement.stop_previous`) so that it is undone if the replacement does not fit.
"""

from __future__ import annotations

import dataclasses

import pytest

from actors.worker.core.scheduler.reconcile import (
    ALLOC_LOST,
    ALLOC_MIGRATING,
    ALLOC_NOT_NEEDED,
    ALLOC_RESCHEDULED,
    ALLOC_UPDATING,
    GroupUpdates,
    NameIndex,
    Reconciler,
    tainted_nodes,
)
from contracts import (
    ClientStatus,
    DesiredStatus,
    DesiredTransition,
    DrainStrategy,
    JobType,
    NodeStatus,
    RescheduleEvent,
    ReschedulePolicy,
    UpdateStrategy,
)
from contracts.deployment import Deployment, DeploymentState
from contracts.evaluation import DesiredUpdates

NOW = 1_700_000_000_000_000_000


@pytest.fixture
def job(build):
    """Version 1 of `my-job`, count 10, as the store would hold it."""
    return build.job().replace(version=1, job_modify_index=20)


def reconcile(job, allocs, tainted=None, *, batch=False, old_job=None, deployment=None):
    versions = {j.version: j for j in (job, old_job) if j is not None}
    return Reconciler(
        job,
        allocs,
        tainted or {},
        batch=batch,
        job_version=versions.get,
        now_ns=NOW,
        deployment=deployment,
    ).compute()


def updates(result, group="web"):
    return result.desired_tg_updates[group].freeze()


def allocs_of(build, job, n, node="node", **kw):
    return [build.alloc(job, f"{node}-{i}", i, **kw) for i in range(n)]


def names(items):
    return sorted(x.name for x in items)


def web(*indexes):
    return sorted(f"my-job.web[{i}]" for i in indexes)


def test_place_no_existing(job):
    """TestReconciler_Place_NoExisting."""
    result = reconcile(job, [])
    assert [p.name for p in result.place] == [f"my-job.web[{i}]" for i in range(10)]
    assert all(p.previous is None and not p.stop_previous for p in result.place)
    assert result.stop == [] and result.inplace == [] and result.destructive == []
    assert updates(result) == DesiredUpdates(place=10)


def test_place_existing(build, job):
    """TestReconciler_Place_Existing: 5 of 10 exist, the free indexes are filled."""
    allocs = [build.alloc(job, f"node-{i}", i) for i in (0, 2, 4, 6, 8)]
    result = reconcile(job, allocs)
    assert names(result.place) == web(1, 3, 5, 7, 9)
    assert updates(result) == DesiredUpdates(place=5, ignore=5)


def test_scale_down_partial(build, job):
    """TestReconciler_ScaleDown_Partial: 20 -> 10 stops indexes 10..19."""
    result = reconcile(job, allocs_of(build, job, 20))
    assert names(s.alloc for s in result.stop) == web(*range(10, 20))
    assert all(s.description == ALLOC_NOT_NEEDED and s.client_status is None for s in result.stop)
    assert result.place == []
    assert updates(result) == DesiredUpdates(stop=10, ignore=10)


def test_scale_down_zero(build, job):
    """TestReconciler_ScaleDown_Zero: count 0 stops everything."""
    job = job.replace(task_groups=(dataclasses.replace(job.task_groups[0], count=0),))
    result = reconcile(job, allocs_of(build, job, 20))
    assert len(result.stop) == 20
    assert updates(result) == DesiredUpdates(stop=20)


def test_scale_up_uses_free_names(build, job):
    """TestReconciler_ScaleUp_Partial: 10 -> 15 places indexes 10..14."""
    job = job.replace(task_groups=(dataclasses.replace(job.task_groups[0], count=15),))
    result = reconcile(job, allocs_of(build, job, 10))
    assert names(result.place) == web(*range(10, 15))
    assert updates(result) == DesiredUpdates(place=5, ignore=10)


def test_lost_node(build, job):
    """TestReconciler_LostNode: 2 allocs on down nodes -> 2 stops (lost) + 2 places."""
    allocs = allocs_of(build, job, 10)
    down = {f"node-{i}": build.node(f"node-{i}", status=NodeStatus.DOWN) for i in range(2)}
    result = reconcile(job, allocs, down)
    assert names(s.alloc for s in result.stop) == web(0, 1)
    assert all(s.description == ALLOC_LOST for s in result.stop)
    assert all(s.client_status is ClientStatus.LOST for s in result.stop)
    assert names(result.place) == web(0, 1)
    assert {p.previous.id for p in result.place} == {a.id for a in allocs[:2]}
    assert updates(result) == DesiredUpdates(place=2, stop=2, ignore=8)


def test_lost_node_gone(build, job):
    """A node missing from the state (None in the tainted map) counts as down."""
    allocs = allocs_of(build, job, 10)
    result = reconcile(job, allocs, {"node-3": None})
    assert [s.alloc.name for s in result.stop] == web(3)
    assert result.stop[0].client_status is ClientStatus.LOST
    assert names(result.place) == web(3)


def test_lost_node_scale_down(build, job):
    """TestReconciler_LostNode_ScaleDown: lost allocs are not replaced beyond count."""
    job = job.replace(task_groups=(dataclasses.replace(job.task_groups[0], count=5),))
    allocs = allocs_of(build, job, 10)
    down = {f"node-{i}": build.node(f"node-{i}", status=NodeStatus.DOWN) for i in range(2)}
    result = reconcile(job, allocs, down)
    assert result.place == []
    stopped = names(s.alloc for s in result.stop)
    # 2 lost, then the 3 highest of the 8 untainted.
    assert stopped == web(0, 1, 7, 8, 9)
    assert updates(result) == DesiredUpdates(stop=5, ignore=5)


def test_drain_node(build, job):
    """TestReconciler_DrainNode: 2 allocs flagged migrate on a draining node."""
    allocs = allocs_of(build, job, 10)
    for i in range(2):
        allocs[i] = dataclasses.replace(
            allocs[i], desired_transition=DesiredTransition(migrate=True)
        )
    draining = {
        f"node-{i}": build.node(f"node-{i}", drain_strategy=DrainStrategy()) for i in range(2)
    }
    result = reconcile(job, allocs, draining)
    assert result.stop == []
    assert names(result.place) == web(0, 1)
    assert all(p.stop_previous == ALLOC_MIGRATING for p in result.place)
    assert [p.previous.id for p in result.place] == [a.id for a in allocs[:2]]
    assert updates(result) == DesiredUpdates(migrate=2, ignore=8)


def test_drain_node_without_migrate_flag_is_untainted(build, job):
    allocs = allocs_of(build, job, 10)
    draining = {"node-0": build.node("node-0", drain_strategy=DrainStrategy())}
    result = reconcile(job, allocs, draining)
    assert result.place == [] and result.stop == []
    assert updates(result) == DesiredUpdates(ignore=10)


def test_drain_node_scale_down(build, job):
    """TestReconciler_DrainNode_ScaleDown: migrating allocs are the first to go."""
    job = job.replace(task_groups=(dataclasses.replace(job.task_groups[0], count=8),))
    allocs = allocs_of(build, job, 10)
    for i in range(3):
        allocs[i] = dataclasses.replace(
            allocs[i], desired_transition=DesiredTransition(migrate=True)
        )
    draining = {
        f"node-{i}": build.node(f"node-{i}", drain_strategy=DrainStrategy()) for i in range(3)
    }
    result = reconcile(job, allocs, draining)
    # Highest-indexed migrating allocs are stopped first, the last one is migrated.
    assert names(s.alloc for s in result.stop) == web(1, 2)
    assert names(result.place) == web(0)
    assert updates(result) == DesiredUpdates(stop=2, migrate=1, ignore=7)


def test_inplace(build, job):
    """TestReconciler_Inplace: a new job version that changes no task."""
    old = job.replace(version=0, job_modify_index=10)
    allocs = allocs_of(build, old, 10)
    result = reconcile(job, allocs, old_job=old)
    assert {a.id for a in result.inplace} == {a.id for a in allocs}
    assert result.place == [] and result.stop == [] and result.destructive == []
    assert updates(result) == DesiredUpdates(in_place_update=10)


def test_inplace_scale_up(build, job):
    """TestReconciler_Inplace_ScaleUp."""
    old = job.replace(version=0, job_modify_index=10)
    job = job.replace(task_groups=(dataclasses.replace(job.task_groups[0], count=15),))
    result = reconcile(job, allocs_of(build, old, 10), old_job=old)
    assert len(result.inplace) == 10
    assert names(result.place) == web(*range(10, 15))
    assert updates(result) == DesiredUpdates(place=5, in_place_update=10)


def test_destructive(build, job):
    """TestReconciler_Destructive: no update block, every alloc is replaced."""
    old = job.replace(version=0, job_modify_index=10)
    task = dataclasses.replace(job.task_groups[0].tasks[0], config={"image": "v2"})
    job = job.replace(task_groups=(dataclasses.replace(job.task_groups[0], tasks=(task,)),))
    allocs = allocs_of(build, old, 10)
    result = reconcile(job, allocs, old_job=old)
    assert [p.name for p in result.destructive] == web(*range(10))
    assert all(p.stop_previous == ALLOC_UPDATING for p in result.destructive)
    assert updates(result) == DesiredUpdates(destructive_update=10)


def test_destructive_rolling(build, job):
    """TestReconciler_CreateDeployment_RollingUpgrade_Destructive: max_parallel 4."""
    old = job.replace(version=0, job_modify_index=10)
    task = dataclasses.replace(job.task_groups[0].tasks[0], env={"V": "2"})
    group = dataclasses.replace(
        job.task_groups[0], tasks=(task,), update=UpdateStrategy(max_parallel=4)
    )
    job = job.replace(task_groups=(group,))
    allocs = allocs_of(build, old, 10)
    result = reconcile(job, allocs, old_job=old)
    # Lowest name indexes first.
    assert [p.name for p in result.destructive] == web(0, 1, 2, 3)
    assert [p.previous.id for p in result.destructive] == [a.id for a in allocs[:4]]
    assert result.place == [] and result.stop == []
    assert updates(result) == DesiredUpdates(destructive_update=4, ignore=6)


def test_destructive_rolling_waits_for_replacements_not_yet_healthy(build, job):
    """With max_parallel replacements of the deployment not yet healthy, only what is left
    of max_parallel goes (Nomad's computeLimit)."""
    old = job.replace(version=0, job_modify_index=10)
    task = dataclasses.replace(job.task_groups[0].tasks[0], env={"V": "2"})
    group = dataclasses.replace(
        job.task_groups[0], tasks=(task,), update=UpdateStrategy(max_parallel=4)
    )
    job = job.replace(task_groups=(group,))
    allocs = [build.alloc(old, f"node-{i}", i) for i in range(4, 10)]
    allocs += [
        dataclasses.replace(
            build.alloc(job, f"new-{i}", i, client_status=ClientStatus.PENDING),
            deployment_id="dep",
        )
        for i in range(3)
    ]
    healthy = dataclasses.replace(
        build.alloc(job, "new-3", 3, client_status=ClientStatus.RUNNING), deployment_id="dep"
    )
    allocs.append(healthy)
    deployment = Deployment(
        "dep",
        job_id=job.id,
        job_version=job.version,
        job_create_index=job.create_index,
        task_groups={"web": DeploymentState(desired_total=10, healthy_ids=(healthy.id,))},
    )
    result = reconcile(job, allocs, old_job=old, deployment=deployment)
    # 3 pending of the new version: one more slot.
    assert [p.name for p in result.destructive] == web(4)
    assert updates(result) == DesiredUpdates(destructive_update=1, ignore=9)


def test_job_stopped(build, job):
    """TestReconciler_JobStopped: a stopped job (and a purged one) stops everything."""
    allocs = allocs_of(build, job, 10)
    for stopped_job in (job.replace(stop=True), None):
        result = Reconciler(
            stopped_job, allocs, {}, batch=False, job_version=lambda v: None, now_ns=NOW
        ).compute()
        assert names(s.alloc for s in result.stop) == web(*range(10))
        assert all(s.description == ALLOC_NOT_NEEDED for s in result.stop)
        assert result.place == []
        assert updates(result) == DesiredUpdates(stop=10)


def test_job_stopped_terminal_allocs(build, job):
    """TestReconciler_JobStopped_TerminalAllocs: nothing to stop."""
    allocs = allocs_of(build, job, 5, client_status=ClientStatus.COMPLETE)
    allocs += [
        build.alloc(job, f"x-{i}", i + 5, desired_status=DesiredStatus.STOP) for i in range(5)
    ]
    result = reconcile(job.replace(stop=True), allocs)
    assert result.stop == []


def test_job_stopped_lost_allocs_are_marked_lost(build, job):
    allocs = allocs_of(build, job, 2)
    down = {"node-0": build.node("node-0", status=NodeStatus.DOWN)}
    result = reconcile(job.replace(stop=True), allocs, down)
    status = {s.alloc.node_id: s.client_status for s in result.stop}
    assert status == {"node-0": ClientStatus.LOST, "node-1": None}


def test_removed_tg(build, job):
    """TestReconciler_RemovedTG: the old group's 10 stop, the new group's 10 place."""
    allocs = allocs_of(build, job, 10)
    job = job.replace(task_groups=(dataclasses.replace(job.task_groups[0], name="api"),))
    result = reconcile(job, allocs)
    assert len(result.stop) == 10
    assert updates(result, "web") == DesiredUpdates(stop=10)
    assert [p.name for p in result.place] == [f"my-job.api[{i}]" for i in range(10)]
    assert updates(result, "api") == DesiredUpdates(place=10)


def test_service_client_terminal_allocs_are_replaced(build, job):
    """Service: complete or lost allocs do not count, their slots are placed again."""
    allocs = allocs_of(build, job, 10)
    allocs[0] = dataclasses.replace(allocs[0], client_status=ClientStatus.COMPLETE)
    allocs[1] = dataclasses.replace(allocs[1], client_status=ClientStatus.LOST)
    result = reconcile(job, allocs)
    assert names(result.place) == web(0, 1)
    assert updates(result) == DesiredUpdates(place=2, ignore=10)


def test_batch_complete_allocs_count(build, job):
    job = job.replace(type=JobType.BATCH)
    allocs = allocs_of(build, job, 10, client_status=ClientStatus.COMPLETE)
    result = reconcile(job, allocs, batch=True)
    assert result.place == []
    assert updates(result) == DesiredUpdates(ignore=10)


def test_batch_old_version_terminal_allocs_are_ignored(build, job):
    """Nomad's filterOldTerminalAllocs."""
    job = job.replace(type=JobType.BATCH)
    old = job.replace(version=0, job_modify_index=10)
    allocs = allocs_of(build, old, 10, client_status=ClientStatus.COMPLETE)
    result = reconcile(job, allocs, batch=True, old_job=old)
    assert names(result.place) == web(*range(10))
    assert updates(result) == DesiredUpdates(place=10, ignore=10)


def test_reschedule_now(build, job):
    """A failed alloc is replaced with its own name and stopped with the reschedule reason."""
    allocs = allocs_of(build, job, 10)
    allocs[4] = dataclasses.replace(allocs[4], client_status=ClientStatus.FAILED)
    result = reconcile(job, allocs)
    (placement,) = result.place
    assert placement.name == allocs[4].name
    assert placement.previous.id == allocs[4].id
    assert placement.reschedule and placement.stop_previous == ALLOC_RESCHEDULED
    assert updates(result) == DesiredUpdates(place=1, ignore=9)


def test_reschedule_out_of_attempts_keeps_slot(build, job):
    policy = ReschedulePolicy(attempts=1, interval_s=3600, unlimited=False)
    job = job.replace(
        task_groups=(dataclasses.replace(job.task_groups[0], reschedule_policy=policy),)
    )
    allocs = allocs_of(build, job, 10)
    recent = RescheduleEvent(reschedule_time=NOW - 10**9, prev_alloc_id="x", prev_node_id="n")
    allocs[0] = dataclasses.replace(
        allocs[0], client_status=ClientStatus.FAILED, reschedule_events=(recent,)
    )
    # An attempt outside the interval does not count.
    old = RescheduleEvent(reschedule_time=NOW - 7200 * 10**9, prev_alloc_id="y", prev_node_id="n")
    allocs[1] = dataclasses.replace(
        allocs[1], client_status=ClientStatus.FAILED, reschedule_events=(old,)
    )
    result = reconcile(job, allocs)
    assert [p.previous.id for p in result.place] == [allocs[1].id]
    assert result.stop == []


def test_server_terminal_allocs_are_dropped(build, job):
    allocs = allocs_of(build, job, 10)
    allocs[0] = dataclasses.replace(allocs[0], desired_status=DesiredStatus.STOP)
    allocs[1] = dataclasses.replace(allocs[1], desired_status=DesiredStatus.EVICT)
    result = reconcile(job, allocs)
    assert names(result.place) == web(0, 1)
    assert result.stop == []


def test_name_index_fills_gaps_then_reuses():
    index = NameIndex("j", "g", 4, used=[1, 3])
    assert index.next(2) == ["j.g[0]", "j.g[2]"]
    assert index.next(2) == ["j.g[0]", "j.g[1]"]  # out of free indexes: reuse from 0
    index.release(3)
    assert index.next(1) == ["j.g[3]"]


def test_tainted_nodes(build):
    nodes = {
        "ready": build.node("ready"),
        "down": build.node("down", status=NodeStatus.DOWN),
        "disconnected": build.node("disconnected", status=NodeStatus.DISCONNECTED),
        "drain": build.node("drain", drain_strategy=DrainStrategy()),
    }
    job = build.job()
    allocs = [build.alloc(job, n, i) for i, n in enumerate([*nodes, "gone"])]
    tainted = tainted_nodes(allocs, nodes.get)
    assert set(tainted) == {"down", "disconnected", "drain", "gone"}
    assert tainted["gone"] is None


def test_a_groups_update_counts_freeze_field_for_field() -> None:
    names = [f.name for f in dataclasses.fields(GroupUpdates)]
    counts = GroupUpdates(*range(1, len(names) + 1))
    frozen = counts.freeze()
    assert {n: getattr(frozen, n) for n in names} == {n: getattr(counts, n) for n in names}
    assert frozen.preemptions == 0  # counted by the scheduler, not the reconciler
