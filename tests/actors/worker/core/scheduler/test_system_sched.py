"""The system and sysbatch schedulers, ported from Nomad's scheduler_system_test.go at the
behaviour level (TestSystemSched_JobRegister, _JobRegister_AddNode, _ExhaustResources,
_NodeDown, _NodeDrain, _JobDeregister, _Queued_With_Constraints, _JobModify, ...).

drover writes one blocked eval per evaluation (Nomad writes one per exhausted node with its
NodeID set): asserted as such below.
"""

from __future__ import annotations

import dataclasses

import pytest

from actors.worker.core.scheduler.reconcile import (
    ALLOC_LOST,
    ALLOC_NODE_TAINTED,
    ALLOC_NOT_NEEDED,
    ALLOC_UPDATING,
)
from contracts import (
    ClientStatus,
    Constraint,
    DesiredStatus,
    DesiredTransition,
    DrainStrategy,
    EvalStatus,
    JobType,
    NodeEligibility,
    NodeStatus,
    TriggeredBy,
)
from contracts.state_log import AllocClientUpdate, UpdateAllocsClientStatus


@pytest.fixture
def sys_job(build):
    return build.job("my-sys", build.group(count=1), type=JobType.SYSTEM)


def test_job_register(h, build, sys_job):
    """TestSystemSched_JobRegister: one alloc per node."""
    h.nodes(10)
    job, ev = h.register(sys_job)

    planner = h.process(ev)

    assert len(planner.plans) == 1
    placed = build.placed(planner.plans[0])
    assert len(placed) == 10
    assert build.distinct(a.node_id for a in placed)
    assert {a.name for a in placed} == {"my-sys.web[0]"}
    assert planner.plans[0].annotations.desired_tg_updates["web"].place == 10
    assert planner.created_evals == []
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.queued_allocations == {"web": 0}
    assert len(h.job_allocs(job)) == 10


def test_one_alloc_per_group_per_node(h, build):
    h.nodes(3)
    job = build.job(
        "my-sys", build.group("a", count=1), build.group("b", count=1), type=JobType.SYSTEM
    )
    job, ev = h.register(job)
    h.process(ev)
    allocs = h.job_allocs(job)
    assert len(allocs) == 6
    assert sorted((a.task_group, a.node_id) for a in allocs) == [
        (g, f"node-{i}") for g in ("a", "b") for i in range(3)
    ]


def test_constraint_filtered_nodes_are_skipped_silently(h, build):
    """TestSystemSched_Queued_With_Constraints: infeasible nodes are no failures."""
    h.add_nodes(*(build.node(f"linux-{i}", attributes={"kernel.name": "linux"}) for i in range(3)))
    h.add_nodes(*(build.node(f"win-{i}", attributes={"kernel.name": "windows"}) for i in range(3)))
    h.add_nodes(build.node("nodriver", drivers={}, attributes={"kernel.name": "linux"}))
    job = build.job(
        "my-sys",
        build.group(count=1),
        type=JobType.SYSTEM,
        constraints=(Constraint("${attr.kernel.name}", "linux", "="),),
    )
    job, ev = h.register(job)

    planner = h.process(ev)

    assert sorted(a.node_id for a in h.job_allocs(job)) == [f"linux-{i}" for i in range(3)]
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.failed_tg_allocs == {}
    assert out.queued_allocations == {"web": 0}
    assert planner.created_evals == []


def test_full_node_is_a_failure_with_blocked_eval(h, build, sys_job):
    """TestSystemSched_ExhaustResources: a feasible node without room fails the placement."""
    h.nodes(2)
    h.add_nodes(build.node("tiny", cpu=100))
    job, ev = h.register(sys_job)

    planner = h.process(ev)

    assert sorted(a.node_id for a in h.job_allocs(job)) == ["node-0", "node-1"]
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    metric = out.failed_tg_allocs["web"]
    assert metric.dimension_exhausted == {"cpu": 1}
    assert out.queued_allocations == {"web": 1}
    (blocked,) = planner.created_evals
    assert blocked.status is EvalStatus.BLOCKED
    assert blocked.triggered_by is TriggeredBy.QUEUED_ALLOCS
    assert out.blocked_eval == blocked.id


def test_full_nodes_coalesce(h, build, sys_job):
    h.add_nodes(*(build.node(f"tiny-{i}", cpu=100) for i in range(3)))
    _job, ev = h.register(sys_job)
    planner = h.process(ev)
    assert planner.plans == []
    metric = planner.evals[0].failed_tg_allocs["web"]
    assert metric.coalesced_failures == 2
    assert planner.evals[0].queued_allocations == {"web": 3}


def test_new_node_gets_an_alloc(h, build, sys_job):
    """TestSystemSched_JobRegister_AddNode: existing allocs are ignored, the new node gets
    one."""
    h.nodes(3)
    job, ev = h.register(sys_job)
    h.process(ev)

    h.add_nodes(build.node("new"))
    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE, node_id="new"))

    assert len(planner.plans) == 1
    plan = planner.plans[0]
    assert list(plan.node_allocation) == ["new"]
    assert plan.node_update == {}
    updates = plan.annotations.desired_tg_updates["web"]
    assert (updates.place, updates.ignore) == (1, 3)
    assert len(h.job_allocs(job)) == 4


def test_no_change_makes_no_plan(h, build, sys_job):
    h.nodes(3)
    job, ev = h.register(sys_job)
    h.process(ev)
    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE))
    assert planner.plans == []
    build.assert_eval(planner, EvalStatus.COMPLETE)


def test_down_node_alloc_is_lost(h, build, sys_job):
    """TestSystemSched_NodeDown."""
    h.nodes(3)
    job, ev = h.register(sys_job)
    h.process(ev)
    h.update_node("node-0", status=NodeStatus.DOWN)

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE, node_id="node-0"))

    plan = planner.plans[0]
    (stop,) = plan.node_update["node-0"]
    assert stop.desired_status is DesiredStatus.STOP
    assert stop.client_status is ClientStatus.LOST
    assert stop.desired_description == ALLOC_LOST
    assert plan.node_allocation == {}
    assert h.store.alloc(stop.id).client_status is ClientStatus.LOST
    assert sorted(a.node_id for a in h.live_allocs(job)) == ["node-1", "node-2"]


def test_drained_node_alloc_is_stopped(h, build, sys_job):
    """TestSystemSched_NodeDrain: the drainer marked the allocation for migration."""
    h.nodes(2)
    job, ev = h.register(sys_job)
    h.process(ev)
    h.update_node("node-0", drain_strategy=DrainStrategy())
    (alloc,) = [a for a in h.live_allocs(job) if a.node_id == "node-0"]
    h.add_allocs(dataclasses.replace(alloc, desired_transition=DesiredTransition(migrate=True)))

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_DRAIN, node_id="node-0"))

    (stop,) = planner.plans[0].node_update["node-0"]
    assert stop.desired_description == ALLOC_NODE_TAINTED
    assert stop.client_status is not ClientStatus.LOST
    assert "node-0" not in planner.plans[0].node_allocation


def test_unmarked_alloc_on_a_draining_node_stays_until_the_drainer_marks_it(h, build, sys_job):
    """Nomad's diffSystemAllocsForNode ignores an allocation on a tainted node that is not
    marked: the drainer leaves system work to the end of a drain."""
    h.nodes(2)
    job, ev = h.register(sys_job)
    h.process(ev)
    h.update_node("node-0", drain_strategy=DrainStrategy())
    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE, node_id="node-0"))
    assert planner.plans == []
    assert sorted(a.node_id for a in h.live_allocs(job)) == ["node-0", "node-1"]


def test_drain_ignoring_system_jobs_keeps_alloc(h, build, sys_job):
    h.nodes(2)
    job, ev = h.register(sys_job)
    h.process(ev)
    h.update_node("node-0", drain_strategy=DrainStrategy(ignore_system_jobs=True))
    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_DRAIN, node_id="node-0"))
    assert planner.plans == []


def test_ineligible_node_keeps_its_alloc(h, build, sys_job):
    h.nodes(2)
    job, ev = h.register(sys_job)
    h.process(ev)
    h.update_node("node-0", scheduling_eligibility=NodeEligibility.INELIGIBLE)
    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE, node_id="node-0"))
    assert planner.plans == []
    assert len(h.live_allocs(job)) == 2


def test_job_stop_stops_all(h, build, sys_job):
    """TestSystemSched_JobDeregister_Stopped."""
    h.nodes(4)
    job, ev = h.register(sys_job)
    h.process(ev)

    job2, ev = h.register(job.replace(stop=True), triggered_by=TriggeredBy.JOB_DEREGISTER)
    planner = h.process(ev)

    stops = build.stopped(planner.plans[0])
    assert len(stops) == 4
    assert all(s.desired_description == ALLOC_NOT_NEEDED for s in stops)
    assert planner.plans[0].node_allocation == {}
    build.assert_eval(planner, EvalStatus.COMPLETE)
    assert h.live_allocs(job2) == []


def test_job_modify_destructive(h, build, sys_job):
    """TestSystemSched_JobModify: a task change replaces every alloc on its own node."""
    h.nodes(3)
    job, ev = h.register(sys_job)
    h.process(ev)
    before = {a.id: a.node_id for a in h.job_allocs(job)}

    job2, ev = h.register(job.replace(task_groups=(build.group(count=1, cpu=700),)))
    planner = h.process(ev)

    plan = planner.plans[0]
    stops = build.stopped(plan)
    assert {s.id for s in stops} == set(before)
    assert all(s.desired_description == ALLOC_UPDATING for s in stops)
    placed = build.placed(plan)
    assert sorted(a.node_id for a in placed) == sorted(before.values())
    assert all(a.previous_allocation in before for a in placed)
    assert all(before[a.previous_allocation] == a.node_id for a in placed)
    assert plan.annotations.desired_tg_updates["web"].destructive_update == 3
    live = h.live_allocs(job2)
    assert len(live) == 3 and all(a.allocated_resources.cpu == 700 for a in live)


def test_job_modify_in_place(h, build, sys_job):
    """TestSystemSched_JobModify_InPlace."""
    h.nodes(3)
    job, ev = h.register(sys_job)
    h.process(ev)
    ids = {a.id for a in h.job_allocs(job)}

    job2, ev = h.register(job.replace(priority=70))
    planner = h.process(ev)

    plan = planner.plans[0]
    assert plan.node_update == {}
    assert {a.id for a in build.placed(plan)} == ids
    assert plan.annotations.desired_tg_updates["web"].in_place_update == 3
    assert all(a.job_version == job2.version for a in h.job_allocs(job2))


def test_removed_group_is_stopped(h, build):
    h.nodes(2)
    job = build.job(
        "my-sys", build.group("a", count=1), build.group("b", count=1), type=JobType.SYSTEM
    )
    job, ev = h.register(job)
    h.process(ev)
    job2, ev = h.register(job.replace(task_groups=(job.task_groups[0],)))
    planner = h.process(ev)
    stops = build.stopped(planner.plans[0])
    assert sorted(s.task_group for s in stops) == ["b", "b"]
    assert {a.task_group for a in h.live_allocs(job2)} == {"a"}


def test_failed_system_alloc_is_replaced(h, build, sys_job):
    h.nodes(2)
    job, ev = h.register(sys_job)
    h.process(ev)
    failed = h.store.allocs_by_node("node-0")[0]
    h.store.commit(UpdateAllocsClientStatus((AllocClientUpdate(failed.id, ClientStatus.FAILED),)))

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.ALLOC_FAILURE))

    (new,) = planner.plans[0].node_allocation["node-0"]
    assert new.id != failed.id
    assert len(h.live_allocs(job)) == 2


def test_sysbatch_completed_allocs_are_not_rerun(h, build):
    h.nodes(2)
    job, ev = h.register(build.job("my-sb", build.group(count=1), type=JobType.SYSBATCH))
    h.process(ev)
    allocs = h.job_allocs(job)
    h.store.commit(
        UpdateAllocsClientStatus(
            tuple(AllocClientUpdate(a.id, ClientStatus.COMPLETE) for a in allocs)
        )
    )
    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE))
    assert planner.plans == []
    assert len(h.job_allocs(job)) == 2


@pytest.mark.parametrize(("job_type", "attempts"), [(JobType.SYSTEM, 5), (JobType.SYSBATCH, 2)])
def test_retry_limit(h, build, job_type, attempts):
    h.nodes(2)
    job, ev = h.register(build.job("my-sys", build.group(count=1), type=job_type))
    planner = build.reject_planner(h.store)
    h.process(ev, planner)
    assert len(planner.plans) == attempts
    out = build.assert_eval(planner, EvalStatus.FAILED)
    assert out.status_description == f"maximum attempts reached ({attempts})"
    assert planner.created_evals[0].triggered_by is TriggeredBy.MAX_PLAN_ATTEMPTS
    assert h.job_allocs(job) == []


def test_datacenter_change_stops_allocs_outside(h, build, sys_job):
    h.add_nodes(build.node("a", datacenter="dc1"), build.node("b", datacenter="dc2"))
    job, ev = h.register(sys_job)
    h.process(ev)
    job2, ev = h.register(dataclasses.replace(job, datacenters=("dc1",)))
    planner = h.process(ev)
    stops = build.stopped(planner.plans[0])
    assert [s.node_id for s in stops] == ["b"]
    assert [a.node_id for a in h.live_allocs(job2)] == ["a"]
