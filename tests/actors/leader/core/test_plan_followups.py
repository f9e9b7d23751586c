"""A plan's preemptions get the preempted jobs re-evaluated; the scheduler configuration's
check-and-set (Nomad's Operator.SchedulerSetConfiguration)."""

from __future__ import annotations

import dataclasses
import itertools

from actors.leader.core.leader import LeaderCore
from actors.state import StateStore
from contracts import (
    AllocatedResources,
    Allocation,
    DesiredStatus,
    DriverInfo,
    Job,
    JobType,
    Node,
    NodeResources,
    Plan,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.messages import LeaderRequest, PlanSubmission, RequestKind
from contracts.scheduler_config import PreemptionConfig, SchedulerConfiguration
from contracts.state_log import UpsertAllocs, UpsertEvals, UpsertJob, UpsertNodes


def setup() -> tuple[LeaderCore, StateStore]:
    store = StateStore()
    counter = itertools.count(1)
    core = LeaderCore(store, now_ns=lambda: 1_000, new_id=lambda: f"id-{next(counter)}")
    node = Node(
        id="n1",
        name="n1",
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=1000, disk_mb=1000),
    ).with_computed_class()
    store.commit(UpsertNodes((node,)))
    return core, store


def job(job_id: str, priority: int, job_type: JobType = JobType.SERVICE) -> Job:
    task = Task("t", "mock", resources=Resources(1000, 100))
    group = TaskGroup("g", 1, tasks=(task,))
    return Job(id=job_id, name=job_id, type=job_type, priority=priority, task_groups=(group,))


def test_a_plan_that_preempts_makes_a_preemption_eval_for_each_victim_job() -> None:
    core, store = setup()
    store.commit(UpsertJob(job("low", 20)))
    store.commit(UpsertJob(job("sys", 100, JobType.SYSTEM)))
    victim = Allocation(
        "v1",
        node_id="n1",
        job_id="low",
        task_group="g",
        allocated_resources=AllocatedResources(1000, 100),
    )
    store.commit(UpsertAllocs((victim,)))
    placed = Allocation(
        "p1",
        node_id="n1",
        job_id="sys",
        task_group="g",
        allocated_resources=AllocatedResources(1000, 100),
        preempted_allocations=("v1",),
    )
    evicted = dataclasses.replace(
        store.alloc("v1"),  # type: ignore[arg-type]
        desired_status=DesiredStatus.EVICT,
        preempted_by_allocation="p1",
    )
    plan = Plan(
        eval_id="e", job_id="sys", node_update={"n1": (evicted,)}, node_allocation={"n1": (placed,)}
    )
    changes, result = core.apply_plan(PlanSubmission(plan, "r"))
    assert not result.rejected_nodes
    [upsert] = [c for c in changes if isinstance(c, UpsertAllocs)]
    [follow_up] = upsert.evals
    assert follow_up.job_id == "low" and follow_up.triggered_by is TriggeredBy.PREEMPTION
    for change in changes:
        store.commit(change)
    assert store.alloc("v1").desired_status is DesiredStatus.EVICT  # type: ignore[union-attr]
    assert not any(isinstance(c, UpsertEvals) for c in changes)


def test_the_scheduler_configuration_is_set_with_a_check_and_set() -> None:
    core, store = setup()
    assert store.scheduler_config().preemption_config.system_scheduler_enabled
    wanted = SchedulerConfiguration(
        preemption_config=PreemptionConfig(service_scheduler_enabled=True)
    )
    stale = core.handle(
        LeaderRequest(RequestKind.SET_SCHEDULER_CONFIG, scheduler_config=wanted, enforce_index=7)
    )
    assert stale.response is not None and stale.response.ok and not stale.response.updated
    assert stale.changes == []
    decision = core.handle(
        LeaderRequest(RequestKind.SET_SCHEDULER_CONFIG, scheduler_config=wanted, enforce_index=0)
    )
    assert decision.response is not None and decision.response.updated
    index = store.commit(decision.changes[0])
    config = store.scheduler_config()
    assert config.preemption_config.service_scheduler_enabled
    assert config.create_index == config.modify_index == index
    missing = core.handle(LeaderRequest(RequestKind.SET_SCHEDULER_CONFIG))
    assert missing.response is not None and not missing.response.ok
