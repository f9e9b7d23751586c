"""The service and batch schedulers end to end, ported from Nomad's generic_sched_test.go.

Each test commits nodes, a job and its evaluation to a real state store, runs the scheduler
for the eval's type through `InProcessPlanner` (plans applied straight to the store), and
checks the plans, the evaluation updates and the allocations left in the store.
"""

from __future__ import annotations

import dataclasses

import pytest

from actors.worker.core.scheduler.base import (
    BLOCKED_EVAL_FAILED_PLACEMENTS,
    BLOCKED_EVAL_MAX_PLANS,
    SchedulerError,
)
from actors.worker.core.scheduler.reconcile import (
    ALLOC_LOST,
    ALLOC_MIGRATING,
    ALLOC_NOT_NEEDED,
    ALLOC_RESCHEDULED,
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
    NodeStatus,
    PlanResult,
    RescheduleEvent,
    TriggeredBy,
    UpdateStrategy,
)
from contracts.state_log import (
    AllocClientUpdate,
    PurgeJob,
    UpdateAllocsClientStatus,
    UpsertDeployments,
)


def _names(allocs):
    return sorted(a.name for a in allocs)


def _set_client_status(h, allocs, status):
    h.store.commit(UpdateAllocsClientStatus(tuple(AllocClientUpdate(a.id, status) for a in allocs)))


# -- registration -----------------------------------------------------------------------------


def test_job_register(h, build):
    """TestServiceSched_JobRegister: 10 nodes, count 10."""
    h.nodes(10)
    job, ev = h.register(build.job())

    planner = h.process(ev)

    assert len(planner.plans) == 1
    plan = planner.plans[0]
    assert len(build.placed(plan)) == 10
    assert plan.node_update == {}
    assert plan.annotations.desired_tg_updates["web"].place == 10
    assert planner.created_evals == []  # no blocked eval
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.plan_annotations.desired_tg_updates["web"].place == 10
    assert out.queued_allocations == {"web": 0}
    assert out.failed_tg_allocs == {}
    allocs = h.job_allocs(job)
    assert _names(allocs) == sorted(f"my-job.web[{i}]" for i in range(10))
    assert all(a.eval_id == ev.id and a.job_modify_index == job.job_modify_index for a in allocs)
    assert all(a.allocated_resources.cpu == 500 for a in allocs)
    assert h.store.eval(ev.id).status is EvalStatus.COMPLETE


def test_job_register_alloc_fail(h, build):
    """TestServiceSched_JobRegister_AllocFail: no nodes, count 10."""
    job, ev = h.register(build.job())

    planner = h.process(ev)

    assert planner.plans == []
    assert len(planner.created_evals) == 1
    blocked = planner.created_evals[0]
    assert blocked.status is EvalStatus.BLOCKED
    assert blocked.triggered_by is TriggeredBy.QUEUED_ALLOCS
    assert blocked.status_description == BLOCKED_EVAL_FAILED_PLACEMENTS
    assert blocked.previous_eval == ev.id
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.blocked_eval == blocked.id
    assert set(out.failed_tg_allocs) == {"web"}
    metric = out.failed_tg_allocs["web"]
    assert metric.coalesced_failures == 9
    assert metric.nodes_in_pool == 0
    assert out.queued_allocations["web"] == 10
    assert h.job_allocs(job) == []
    # The blocked eval is in the store too, still blocked.
    assert h.store.eval(blocked.id).status is EvalStatus.BLOCKED


def test_a_count_far_beyond_the_cluster_stops_at_the_first_failure(h, build):
    """A poison job: count 10^9 on 3 nodes. The evaluation places what fits, stops at the
    first failure and records the rest as queued and coalesced, without making a record per
    unplaced allocation (placements.py): it finishes at once instead of growing with the
    count. (The API refuses a count above 1,000,000; the scheduler is bounded whatever it.)"""
    h.nodes(3)
    _, ev = h.register(build.job("poison", build.group(count=1_000_000_000)))

    planner = h.process(ev)

    (plan,) = planner.plans
    placed = len(build.placed(plan))
    assert 0 < placed < 100  # what 3 nodes hold
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    metric = out.failed_tg_allocs["web"]
    # one failure, the rest coalesced: every allocation is accounted for
    assert placed + 1 + metric.coalesced_failures == 1_000_000_000
    assert out.queued_allocations["web"] == 1_000_000_000 - placed
    assert plan.annotations.desired_tg_updates["web"].place == 1_000_000_000
    assert planner.created_evals[0].status is EvalStatus.BLOCKED


def test_job_register_distinct_hosts(h, build):
    """TestServiceSched_JobRegister_DistinctHosts: 10 nodes, count 11."""
    h.nodes(10)
    job = build.job(
        "my-job",
        build.group(count=11),
        constraints=(Constraint(operand="distinct_hosts"),),
    )
    job, ev = h.register(job)

    planner = h.process(ev)

    assert len(planner.plans) == 1
    assert len(build.placed(planner.plans[0])) == 10
    assert len(planner.created_evals) == 1
    assert planner.created_evals[0].status is EvalStatus.BLOCKED
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert set(out.failed_tg_allocs) == {"web"}
    assert out.failed_tg_allocs["web"].coalesced_failures == 0
    assert out.queued_allocations == {"web": 1}
    allocs = h.job_allocs(job)
    assert len(allocs) == 10
    assert build.distinct(a.node_id for a in allocs)


def test_task_group_distinct_hosts_only_separates_the_group(h, build):
    """distinct_hosts on a group: two groups of the same job may share nodes."""
    h.nodes(3)
    constraint = (Constraint(operand="distinct_hosts"),)
    job = build.job(
        "my-job",
        build.group("a", count=3, constraints=constraint),
        build.group("b", count=3, constraints=constraint),
    )
    job, ev = h.register(job)

    planner = h.process(ev)

    build.assert_eval(planner, EvalStatus.COMPLETE)
    assert planner.created_evals == []
    allocs = h.job_allocs(job)
    for group in ("a", "b"):
        assert build.distinct(a.node_id for a in allocs if a.task_group == group)


def test_plan_partial_progress(h, build):
    """TestServiceSched_Plan_Partial_Progress: one small node, count 3."""
    h.nodes(1, cpu=4000)
    job, ev = h.register(build.job("my-job", build.group(count=3, cpu=3600)))

    planner = h.process(ev)

    assert len(planner.plans) == 1
    assert len(build.placed(planner.plans[0])) == 1
    assert len(h.job_allocs(job)) == 1
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.queued_allocations["web"] == 2
    assert out.failed_tg_allocs["web"].dimension_exhausted == {"cpu": 1}
    assert out.failed_tg_allocs["web"].coalesced_failures == 1


def test_retry_limit(h, build):
    """TestServiceSched_RetryLimit: every plan rejected (RejectPlan harness)."""
    h.nodes(10)
    job, ev = h.register(build.job())
    planner = build.reject_planner(h.store)

    h.process(ev, planner)

    assert len(planner.plans) == 5
    assert h.job_allocs(job) == []
    out = build.assert_eval(planner, EvalStatus.FAILED)
    assert out.status_description == "maximum attempts reached (5)"
    assert len(planner.created_evals) == 1
    blocked = planner.created_evals[0]
    assert blocked.status is EvalStatus.BLOCKED
    assert blocked.triggered_by is TriggeredBy.MAX_PLAN_ATTEMPTS
    assert blocked.status_description == BLOCKED_EVAL_MAX_PLANS
    assert out.blocked_eval == blocked.id
    assert h.store.eval(ev.id).status is EvalStatus.FAILED


def test_retry_limit_batch(h, build):
    """maxBatchScheduleAttempts = 2."""
    h.nodes(3)
    _job, ev = h.register(build.job("my-batch", build.group(count=2), type=JobType.BATCH))
    planner = build.reject_planner(h.store)

    h.process(ev, planner)

    assert len(planner.plans) == 2
    out = build.assert_eval(planner, EvalStatus.FAILED)
    assert out.status_description == "maximum attempts reached (2)"
    assert planner.created_evals[0].triggered_by is TriggeredBy.MAX_PLAN_ATTEMPTS


# -- job updates ------------------------------------------------------------------------------


def _register_and_run(h, build, job, nodes=10, **node_kw):
    h.nodes(nodes, **node_kw)
    job, ev = h.register(job)
    planner = h.process(ev)
    build.assert_eval(planner, EvalStatus.COMPLETE)
    return job


def test_job_modify_rolling(h, build):
    """TestServiceSched_JobModify_Rolling: a destructive change replaces only max_parallel."""
    group = build.group(count=10, update=UpdateStrategy(max_parallel=3))
    job = _register_and_run(h, build, build.job("my-job", group))
    _set_client_status(h, h.job_allocs(job), ClientStatus.RUNNING)
    old_ids = {a.id for a in h.job_allocs(job)}

    task = dataclasses.replace(group.tasks[0], config={"command": "/bin/other"})
    job2, ev = h.register(job.replace(task_groups=(dataclasses.replace(group, tasks=(task,)),)))
    planner = h.process(ev)

    assert len(planner.plans) == 1
    plan = planner.plans[0]
    stops, places = build.stopped(plan), build.placed(plan)
    assert len(stops) == 3 and len(places) == 3
    assert all(s.desired_description == ALLOC_UPDATING for s in stops)
    assert {s.id for s in stops} <= old_ids
    # Each replacement keeps the name of the alloc it replaces and links to it.
    by_id = {s.id: s for s in stops}
    for new in places:
        assert new.previous_allocation in by_id
        assert by_id[new.previous_allocation].name == new.name
        assert by_id[new.previous_allocation].next_allocation == new.id
        assert new.job_version == job2.version
    updates = plan.annotations.desired_tg_updates["web"]
    assert (updates.destructive_update, updates.ignore, updates.place) == (3, 7, 0)
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.queued_allocations == {"web": 0}

    # The change made a deployment that the replacements joined.
    deployment = h.store.latest_deployment("default", job2.id)
    assert deployment is not None and deployment.job_version == job2.version
    assert {a.deployment_id for a in places} == {deployment.id}
    assert deployment.task_groups["web"].placed_allocs == 3
    # While the new allocations are not yet healthy, the next eval replaces nothing more.
    _set_client_status(h, places, ClientStatus.RUNNING)
    planner = h.process(h.new_eval(job2, triggered_by=TriggeredBy.DEPLOYMENT_WATCHER))
    assert planner.plans == []
    # Once the deployment watcher found them healthy, the next max_parallel go.
    web = dataclasses.replace(
        deployment.task_groups["web"], healthy_ids=tuple(a.id for a in places)
    )
    h.store.commit(UpsertDeployments((dataclasses.replace(deployment, task_groups={"web": web}),)))
    planner = h.process(h.new_eval(job2, triggered_by=TriggeredBy.DEPLOYMENT_WATCHER))
    assert len(build.stopped(planner.plans[0])) == 3
    assert len(build.placed(planner.plans[0])) == 3
    assert len(h.live_allocs(job2)) == 10


def test_job_modify_destructive_without_update_block_replaces_all(h, build):
    """No update block: every allocation is replaced in one plan (limit = count)."""
    group = build.group(count=5)
    job = _register_and_run(h, build, build.job("my-job", group), nodes=5)

    job2, ev = h.register(job.replace(task_groups=(build.group(count=5, cpu=600),)))
    planner = h.process(ev)

    plan = planner.plans[0]
    assert len(build.stopped(plan)) == 5 and len(build.placed(plan)) == 5
    assert all(a.allocated_resources.cpu == 600 for a in build.placed(plan))
    live = h.live_allocs(job2)
    assert len(live) == 5 and all(a.job_version == job2.version for a in live)


def test_job_modify_in_place(h, build):
    """TestServiceSched_JobModify_InPlace: a change that touches no task is in place."""
    job = _register_and_run(h, build, build.job())
    before = {a.id: a for a in h.job_allocs(job)}

    job2, ev = h.register(job.replace(priority=60))
    planner = h.process(ev)

    assert len(planner.plans) == 1
    plan = planner.plans[0]
    assert plan.node_update == {}
    updated = build.placed(plan)
    assert {a.id for a in updated} == set(before)
    assert all(a.node_id == before[a.id].node_id for a in updated)
    updates = plan.annotations.desired_tg_updates["web"]
    assert (updates.in_place_update, updates.place, updates.stop) == (10, 0, 0)
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.queued_allocations == {"web": 0}
    allocs = h.job_allocs(job2)
    assert len(allocs) == 10
    assert all(a.job_version == job2.version for a in allocs)
    assert all(a.job_modify_index == job2.job_modify_index for a in allocs)
    assert not any(a.terminal() for a in allocs)


def test_job_modify_count_up_is_in_place_plus_placements(h, build):
    job = _register_and_run(h, build, build.job())
    group = job.task_groups[0]

    job2, ev = h.register(job.replace(task_groups=(dataclasses.replace(group, count=12),)))
    planner = h.process(ev)

    updates = planner.plans[0].annotations.desired_tg_updates["web"]
    assert (updates.in_place_update, updates.place, updates.stop) == (10, 2, 0)
    assert _names(h.live_allocs(job2)) == sorted(f"my-job.web[{i}]" for i in range(12))


def test_scale_down_stops_highest_indexes(h, build):
    job = _register_and_run(h, build, build.job())
    group = job.task_groups[0]

    job2, ev = h.register(job.replace(task_groups=(dataclasses.replace(group, count=5),)))
    planner = h.process(ev)

    plan = planner.plans[0]
    stops = build.stopped(plan)
    assert _names(stops) == sorted(f"my-job.web[{i}]" for i in range(5, 10))
    assert all(s.desired_description == ALLOC_NOT_NEEDED for s in stops)
    updates = plan.annotations.desired_tg_updates["web"]
    assert (updates.stop, updates.in_place_update) == (5, 5)
    assert _names(h.live_allocs(job2)) == sorted(f"my-job.web[{i}]" for i in range(5))


def test_job_stop_stops_everything(h, build):
    job = _register_and_run(h, build, build.job())

    job2, ev = h.register(job.replace(stop=True), triggered_by=TriggeredBy.JOB_DEREGISTER)
    planner = h.process(ev)

    assert len(planner.plans) == 1
    plan = planner.plans[0]
    assert plan.node_allocation == {}
    stops = build.stopped(plan)
    assert len(stops) == 10
    assert all(s.desired_status is DesiredStatus.STOP for s in stops)
    assert all(s.desired_description == ALLOC_NOT_NEEDED for s in stops)
    assert plan.annotations.desired_tg_updates["web"].stop == 10
    build.assert_eval(planner, EvalStatus.COMPLETE)
    assert h.live_allocs(job2) == []


def test_removed_task_group_is_stopped_and_new_group_placed(h, build):
    job = _register_and_run(h, build, build.job())

    job2, ev = h.register(job.replace(task_groups=(build.group("api", count=3),)))
    planner = h.process(ev)

    plan = planner.plans[0]
    assert len(build.stopped(plan)) == 10
    assert _names(build.placed(plan)) == [f"my-job.api[{i}]" for i in range(3)]
    assert {a.task_group for a in h.live_allocs(job2)} == {"api"}


# -- node failures ----------------------------------------------------------------------------


def test_node_down(h, build):
    """TestServiceSched_NodeDown: a running alloc on a down node is lost and replaced."""
    h.nodes(2)
    job, _ = h.register(build.job("my-job", build.group(count=1)))
    alloc = build.alloc(job, "node-0", 0)
    h.add_allocs(alloc)
    h.update_node("node-0", status=NodeStatus.DOWN)

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE, node_id="node-0"))

    assert len(planner.plans) == 1
    plan = planner.plans[0]
    (stop,) = plan.node_update["node-0"]
    assert stop.id == alloc.id
    assert stop.desired_status is DesiredStatus.STOP
    assert stop.client_status is ClientStatus.LOST
    assert stop.desired_description == ALLOC_LOST
    (new,) = plan.node_allocation["node-1"]
    assert new.name == alloc.name
    assert new.previous_allocation == alloc.id
    build.assert_eval(planner, EvalStatus.COMPLETE)
    assert h.store.alloc(alloc.id).client_status is ClientStatus.LOST
    assert [a.node_id for a in h.live_allocs(job)] == ["node-1"]


def test_node_down_stopped_alloc_is_marked_lost(h, build):
    """TestServiceSched_NodeDown, desired stop/evict + running: the scheduler marks it lost
    (Nomad's updateNonTerminalAllocsToLost) so the client status does not stay running."""
    h.nodes(1)
    job, _ = h.register(build.job("my-job", build.group(count=2)))
    stop = build.alloc(job, "node-0", 0, desired_status=DesiredStatus.STOP)
    evict = build.alloc(job, "node-0", 1, desired_status=DesiredStatus.EVICT)
    h.add_allocs(stop, evict)
    h.update_node("node-0", status=NodeStatus.DOWN)

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE, node_id="node-0"))

    assert len(planner.plans) == 1
    out = {a.id: a for a in planner.plans[0].node_update["node-0"]}
    assert set(out) == {stop.id, evict.id}
    assert all(a.client_status is ClientStatus.LOST for a in out.values())
    assert all(h.store.alloc(i).client_status is ClientStatus.LOST for i in out)


def test_node_down_terminal_allocs_make_no_plan(h, build):
    """TestServiceSched_NodeDown, client lost/complete: nothing to stop, and with no ready
    node nothing to place either."""
    h.nodes(1)
    job, _ = h.register(build.job("my-job", build.group(count=2)))
    h.add_allocs(
        build.alloc(job, "node-0", 0, client_status=ClientStatus.LOST),
        build.alloc(job, "node-0", 1, client_status=ClientStatus.COMPLETE),
    )
    h.update_node("node-0", status=NodeStatus.DOWN)

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE, node_id="node-0"))

    assert planner.plans == []
    assert len(planner.created_evals) == 1  # the replacements are blocked


def test_node_drain(h, build):
    """TestServiceSched_NodeDrain: allocs flagged migrate on a draining node move."""
    h.nodes(10)
    h.add_nodes(build.node("drained", cpu=40_000, memory_mb=40_000))
    job, _ = h.register(build.job())
    allocs = [
        build.alloc(job, "drained", i, desired_transition=DesiredTransition(migrate=True))
        for i in range(10)
    ]
    h.add_allocs(*allocs)
    h.update_node("drained", drain_strategy=DrainStrategy())

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_DRAIN, node_id="drained"))

    assert len(planner.plans) == 1
    plan = planner.plans[0]
    stops = plan.node_update["drained"]
    assert len(stops) == 10
    assert all(s.desired_description == ALLOC_MIGRATING for s in stops)
    assert all(s.client_status is not ClientStatus.LOST for s in stops)
    places = build.placed(plan)
    assert len(places) == 10
    assert "drained" not in plan.node_allocation
    assert _names(places) == _names(allocs)
    assert plan.annotations.desired_tg_updates["web"].migrate == 10
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.queued_allocations == {"web": 0}
    live = h.live_allocs(job)
    assert len(live) == 10 and all(a.node_id != "drained" for a in live)


def test_node_drain_without_migrate_flag_leaves_allocs(h, build):
    h.nodes(3)
    h.add_nodes(build.node("drained"))
    job, _ = h.register(build.job("my-job", build.group(count=2)))
    h.add_allocs(*(build.alloc(job, "drained", i) for i in range(2)))
    h.update_node("drained", drain_strategy=DrainStrategy())

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_DRAIN, node_id="drained"))

    assert planner.plans == []
    build.assert_eval(planner, EvalStatus.COMPLETE)


def test_node_drain_with_no_room_keeps_migrations_queued(h, build):
    """Migrations that cannot be placed are queued allocations (Nomad counts every
    results.Place entry, migrations included) and block the eval."""
    h.add_nodes(build.node("drained"))
    job, _ = h.register(build.job("my-job", build.group(count=2)))
    h.add_allocs(
        *(
            build.alloc(job, "drained", i, desired_transition=DesiredTransition(migrate=True))
            for i in range(2)
        )
    )
    h.update_node("drained", drain_strategy=DrainStrategy())

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_DRAIN, node_id="drained"))

    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.queued_allocations == {"web": 2}
    assert len(planner.created_evals) == 1
    # drover keeps an unplaceable migration running (its stop is undone with the failed
    # placement); Nomad would stop it regardless.
    assert planner.plans == []


def test_failed_alloc_rescheduled_away_from_previous_node(h, build):
    """A failed alloc is replaced now, and its node carries the rescheduling penalty."""
    # node-0 is the tight binpack fit; without the penalty the replacement would go there.
    h.add_nodes(
        build.node("node-0", cpu=1000, memory_mb=512),
        build.node("node-1", cpu=8000, memory_mb=8192),
    )
    job, _ = h.register(build.job("my-job", build.group(count=1)))
    failed = build.alloc(job, "node-0", 0, client_status=ClientStatus.FAILED)
    h.add_allocs(failed)

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.ALLOC_FAILURE))

    plan = planner.plans[0]
    (stop,) = plan.node_update["node-0"]
    assert stop.id == failed.id and stop.desired_description == ALLOC_RESCHEDULED
    (new,) = plan.node_allocation["node-1"]
    assert new.name == failed.name
    assert new.previous_allocation == failed.id
    assert new.reschedule_events == (
        RescheduleEvent(reschedule_time=build.now, prev_alloc_id=failed.id, prev_node_id="node-0"),
    )
    assert h.store.alloc(failed.id).next_allocation == new.id

    # Control: a fresh job of the same shape does land on node-0.
    other, ev = h.register(build.job("other", build.group(count=1)))
    h.process(ev)
    assert [a.node_id for a in h.job_allocs(other)] == ["node-0"]


def test_batch_failed_alloc_out_of_attempts_is_not_rescheduled(h, build):
    """Batch default policy: 1 attempt per 24h; a second failure keeps its slot."""
    h.nodes(2)
    job, _ = h.register(build.job("my-batch", build.group(count=1), type=JobType.BATCH))
    event = RescheduleEvent(reschedule_time=build.now - 1, prev_alloc_id="x", prev_node_id="node-1")
    h.add_allocs(
        build.alloc(job, "node-0", 0, client_status=ClientStatus.FAILED, reschedule_events=(event,))
    )

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.ALLOC_FAILURE))

    assert planner.plans == []
    build.assert_eval(planner, EvalStatus.COMPLETE)


def test_scheduler_algorithm_binpack_vs_spread(h, build):
    """TestServiceSched_JobRegister_SchedulerAlgorithm (global setting only: drover has no
    per-node-pool scheduler configuration)."""
    h.nodes(2)
    busy, _ = h.register(build.job("busy", build.group(count=1)))
    h.add_allocs(build.alloc(busy, "node-0", 0))

    for algorithm, expected in (("binpack", "node-0"), ("spread", "node-1")):
        job, ev = h.register(build.job(f"job-{algorithm}", build.group(count=1)))
        planner = h.process(ev, algorithm=algorithm)
        build.assert_eval(planner, EvalStatus.COMPLETE)
        assert [a.node_id for a in h.job_allocs(job)] == [expected], algorithm


# -- batch ------------------------------------------------------------------------------------


def test_batch_completed_allocs_are_not_rerun(h, build):
    h.nodes(3)
    job, ev = h.register(build.job("my-batch", build.group(count=2), type=JobType.BATCH))
    h.process(ev)
    allocs = h.job_allocs(job)
    _set_client_status(h, allocs, ClientStatus.COMPLETE)

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE))

    assert planner.plans == []
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.plan_annotations.desired_tg_updates["web"].ignore == 2
    assert len(h.job_allocs(job)) == 2


def test_batch_new_version_reruns_completed_allocs(h, build):
    """Nomad's filterOldTerminalAllocs: terminal batch allocs of an older job version are
    ignored, so a new version of the job runs again."""
    h.nodes(3)
    job, ev = h.register(build.job("my-batch", build.group(count=2), type=JobType.BATCH))
    h.process(ev)
    _set_client_status(h, h.job_allocs(job), ClientStatus.COMPLETE)

    group = dataclasses.replace(job.task_groups[0], meta={"run": "2"})
    job2, ev = h.register(job.replace(task_groups=(group,)))
    planner = h.process(ev)

    assert len(planner.plans) == 1
    assert len(build.placed(planner.plans[0])) == 2
    updates = planner.plans[0].annotations.desired_tg_updates["web"]
    assert (updates.place, updates.ignore) == (2, 2)
    assert len([a for a in h.job_allocs(job2) if a.job_version == job2.version]) == 2


def test_service_completed_allocs_are_replaced(h, build):
    h.nodes(3)
    job, ev = h.register(build.job("my-job", build.group(count=2)))
    h.process(ev)
    _set_client_status(h, h.job_allocs(job), ClientStatus.COMPLETE)

    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.NODE_UPDATE))

    assert len(build.placed(planner.plans[0])) == 2
    assert len(h.live_allocs(job)) == 2


# -- blocked evaluations ----------------------------------------------------------------------


def test_blocked_eval_is_reblocked_when_still_unplaceable(h, build):
    job, _ = h.register(build.job("my-job", build.group(count=2)))
    blocked = h.new_eval(job, status=EvalStatus.BLOCKED, triggered_by=TriggeredBy.QUEUED_ALLOCS)

    planner = h.process(blocked)

    assert planner.plans == []
    assert planner.created_evals == []  # no second blocked eval
    assert planner.evals == []  # not completed
    assert len(planner.reblocked) == 1
    again = planner.reblocked[0]
    assert again.id == blocked.id and again.status is EvalStatus.BLOCKED
    assert set(again.failed_tg_allocs) == {"web"}
    assert h.store.eval(blocked.id).status is EvalStatus.BLOCKED

    # Capacity arrives: the same blocked eval now places everything and completes.
    h.nodes(2)
    planner = h.process(h.store.eval(blocked.id))
    assert planner.reblocked == []
    build.assert_eval(planner, EvalStatus.COMPLETE)
    assert len(h.live_allocs(job)) == 2


def test_unknown_trigger_fails_the_eval(h, build):
    job, _ = h.register(build.job())
    planner = h.process(h.new_eval(job, triggered_by=TriggeredBy.SCHEDULED))
    out = build.assert_eval(planner, EvalStatus.FAILED)
    assert "cannot handle" in out.status_description
    assert planner.plans == []


def test_purged_job_stops_its_allocs(h, build):
    job = _register_and_run(h, build, build.job("my-job", build.group(count=3)), nodes=3)
    ev = build.eval(job, "eval-purge", triggered_by=TriggeredBy.JOB_DEREGISTER)
    h.store.commit(PurgeJob(job.namespace, job.id, evals=(ev,)))

    planner = h.process(h.store.eval(ev.id))

    assert len(build.stopped(planner.plans[0])) == 3
    assert h.live_allocs(job) == []


def test_job_register_count_zero(h, build):
    """TestServiceSched_JobRegister_CountZero: nothing to do, no plan, eval complete."""
    h.nodes(3)
    job, ev = h.register(build.job("my-job", build.group(count=0)))
    planner = h.process(ev)
    assert planner.plans == []
    assert planner.created_evals == []
    out = build.assert_eval(planner, EvalStatus.COMPLETE)
    assert out.queued_allocations == {"web": 0}
    assert h.job_allocs(job) == []


class _PartialWithoutRefresh:
    """A planner that drops every placement but sends no refreshed state back."""

    def __init__(self) -> None:
        self.evals: list = []

    def submit_plan(self, plan):
        return PlanResult(), None

    def update_eval(self, evaluation):
        self.evals.append(evaluation)

    create_eval = reblock_eval = update_eval


def test_partial_commit_without_refresh_is_an_error(h, build):
    """Nomad's "missing state refresh after partial commit"."""
    h.nodes(2)
    _job, ev = h.register(build.job("my-job", build.group(count=2)))
    with pytest.raises(SchedulerError, match="missing state refresh after partial commit"):
        h.process(ev, _PartialWithoutRefresh())


def test_job_modify_datacenters_moves_allocs_out(h, build):
    """allocUpdateFn: an alloc on a node no longer in the job's datacenters is replaced
    (destructive), not updated in place."""
    h.add_nodes(build.node("a", datacenter="dc1"), build.node("b", datacenter="dc2"))
    job, ev = h.register(build.job("my-job", build.group(count=2), datacenters=("dc1", "dc2")))
    h.process(ev)
    assert sorted(a.node_id for a in h.job_allocs(job)) == ["a", "b"]

    job2, ev = h.register(job.replace(datacenters=("dc1",)))
    planner = h.process(ev)

    updates = planner.plans[0].annotations.desired_tg_updates["web"]
    assert (updates.in_place_update, updates.destructive_update) == (1, 1)
    assert [s.node_id for s in build.stopped(planner.plans[0])] == ["b"]
    assert sorted(a.node_id for a in h.live_allocs(job2)) == ["a", "a"]


def test_job_modify_node_pool_moves_allocs_out(h, build):
    h.add_nodes(build.node("a", node_pool="default"), build.node("b", node_pool="gpu"))
    job, ev = h.register(build.job("my-job", build.group(count=1), node_pool="default"))
    h.process(ev)

    job2, ev = h.register(job.replace(node_pool="gpu"))
    h.process(ev)

    assert [a.node_id for a in h.live_allocs(job2)] == ["b"]


def test_job_modify_constraint_moves_allocs_off_infeasible_nodes(h, build):
    """allocUpdateFn runs the stack on the alloc's own node: a new constraint that node fails
    makes the update destructive."""
    h.add_nodes(
        build.node("r1", attributes={"rack": "r1"}), build.node("r2", attributes={"rack": "r2"})
    )
    job, ev = h.register(build.job("my-job", build.group(count=2)))
    h.process(ev)
    assert len({a.node_id for a in h.job_allocs(job)}) == 2

    job2, ev = h.register(job.replace(constraints=(Constraint("${attr.rack}", "r1", "="),)))
    planner = h.process(ev)

    updates = planner.plans[0].annotations.desired_tg_updates["web"]
    assert (updates.in_place_update, updates.destructive_update) == (1, 1)
    assert sorted(a.node_id for a in h.live_allocs(job2)) == ["r1", "r1"]
