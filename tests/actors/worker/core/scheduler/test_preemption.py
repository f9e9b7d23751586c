"""Preemption: the victim choice on its own (Nomad's preemption_test.go, TestPreemption's
cases at the behaviour level) and the schedulers with it (TestSystemSched_Preemption,
TestServiceSched_Preemption), under the scheduler configuration's switches."""

from __future__ import annotations

from actors.api.core.dry_run import plan_job
from actors.worker.core.scheduler.preemption import (
    MAX_CANDIDATES,
    Candidate,
    best_eviction,
    choose_victims,
)
from actors.worker.core.scheduler.preemptor import PREEMPTED_BY
from contracts import AllocatedResources, Allocation, DesiredStatus, EvalStatus, JobType
from contracts.scheduler_config import (
    PreemptionConfig,
    SchedulerAlgorithm,
    SchedulerConfiguration,
)
from contracts.state_log import UpsertSchedulerConfig


def victim(alloc_id: str, priority: int, cpu: int, mem: int) -> Candidate:
    alloc = Allocation(alloc_id, allocated_resources=AllocatedResources(cpu, mem))
    return Candidate(alloc, priority)


def ids(allocs: tuple[Allocation, ...] | None) -> list[str] | None:
    return None if allocs is None else sorted(a.id for a in allocs)


def test_nothing_missing_evicts_nothing_and_too_little_is_none() -> None:
    candidates = [victim("a", 10, 500, 512)]
    assert choose_victims((0, -5, 0), candidates) == ()
    assert choose_victims((600, 0, 0), candidates) is None


def test_the_lowest_priorities_go_first() -> None:
    candidates = [victim("p30", 30, 1000, 1024), victim("p10", 10, 1000, 1024)]
    assert ids(choose_victims((800, 512, 0), candidates)) == ["p10"]


def test_within_a_priority_the_closest_in_shape_goes() -> None:
    candidates = [
        victim("big", 10, 3000, 4096),
        victim("fits", 10, 1000, 1000),
        victim("small", 10, 200, 200),
    ]
    assert ids(choose_victims((900, 900, 0), candidates)) == ["fits"]


def test_victims_not_needed_after_all_are_dropped() -> None:
    """filterSuperset: a small one taken first becomes unneeded once a larger one is in."""
    candidates = [victim("small", 10, 100, 100), victim("large", 20, 1000, 1000)]
    assert ids(choose_victims((1000, 1000, 0), candidates)) == ["large"]


def test_the_node_whose_victims_have_the_lowest_priority_wins() -> None:
    per_node = {
        "n1": [victim("n1-a", 40, 1000, 1000)],
        "n2": [victim("n2-a", 20, 1000, 1000)],
        "n3": [],
    }
    eviction = best_eviction(per_node, lambda _n: (500, 500, 0), lambda n: per_node[n])
    assert eviction is not None and eviction.node_id == "n2"
    assert [v.id for v in eviction.victims] == ["n2-a"]


# -- the schedulers ----------------------------------------------------------------------------


def fill(h, build, node_id: str, priority: int, job_id: str = "low"):
    """A job of `priority` whose one allocation takes all of the node's cpu."""
    job = build.job(job_id, build.group(count=1, cpu=4000, memory_mb=512), priority=priority)
    stored, _ = h.register(job)
    alloc = build.alloc(stored, node_id, 0, allocated_resources=AllocatedResources(4000, 512))
    h.add_allocs(alloc)
    return stored, alloc


def test_a_system_job_preempts_lower_priority_work_by_default(h, build) -> None:
    h.nodes(1)
    _, low = fill(h, build, "node-0", priority=50)
    system = build.job(
        "sys", build.group(count=1, cpu=1000, memory_mb=256), type=JobType.SYSTEM, priority=100
    )
    _, ev = h.register(system)
    planner = h.process(ev)
    [plan] = planner.plans
    [evicted] = build.stopped(plan)
    [placed] = build.placed(plan)
    assert evicted.id == low.id and evicted.desired_status is DesiredStatus.EVICT
    assert evicted.desired_description == PREEMPTED_BY.format(placed.id)
    assert evicted.preempted_by_allocation == placed.id
    assert placed.preempted_allocations == (low.id,)
    build.assert_eval(planner, EvalStatus.COMPLETE)


def test_no_preemption_within_ten_priority_points(h, build) -> None:
    h.nodes(1)
    fill(h, build, "node-0", priority=95)
    system = build.job(
        "sys", build.group(count=1, cpu=1000, memory_mb=256), type=JobType.SYSTEM, priority=100
    )
    _, ev = h.register(system)
    planner = h.process(ev)
    assert planner.plans == []


def test_a_service_job_preempts_only_when_the_configuration_says_so(h, build) -> None:
    h.nodes(2)
    fill(h, build, "node-0", priority=20, job_id="low-a")
    fill(h, build, "node-1", priority=40, job_id="low-b")
    web = build.job("web", build.group(count=1, cpu=1000, memory_mb=256), priority=80)
    _, ev = h.register(web)
    planner = h.process(ev)
    assert planner.plans == []  # service preemption is off by default: blocked instead
    config = SchedulerConfiguration(
        preemption_config=PreemptionConfig(service_scheduler_enabled=True)
    )
    h.store.commit(UpsertSchedulerConfig(config))
    planner = h.process(h.new_eval(web))
    [plan] = planner.plans
    [evicted] = build.stopped(plan)
    assert evicted.job_id == "low-a"  # the lower of the two priorities
    assert build.placed(plan)[0].node_id == "node-0"


def test_the_configured_algorithm_is_used(h, build) -> None:
    """SchedulerAlgorithm spread puts the next allocation on the emptier node."""
    h.nodes(2)
    _, used = fill(h, build, "node-0", priority=50)
    h.store.commit(UpsertSchedulerConfig(SchedulerConfiguration(SchedulerAlgorithm.SPREAD)))
    web = build.job("web", build.group(count=1, cpu=10, memory_mb=16))
    _, ev = h.register(web)
    [plan] = h.process(ev).plans
    assert build.placed(plan)[0].node_id == "node-1" != used.node_id


def test_at_most_max_candidates_are_considered_on_a_node() -> None:
    """A node crowded with tiny allocations costs a bounded search: beyond MAX_CANDIDATES
    (the lowest priorities first) none is looked at, even if more would make room."""
    tiny = [victim(f"t{i:03d}", 10, 10, 10) for i in range(3 * MAX_CANDIDATES)]
    enough = choose_victims((10 * MAX_CANDIDATES, 0, 0), tiny)
    assert enough is not None and len(enough) == MAX_CANDIDATES
    assert choose_victims((10 * MAX_CANDIDATES + 1, 0, 0), tiny) is None


def test_a_job_plan_annotates_what_it_would_preempt(h, build) -> None:
    """Nomad's plan annotations: PreemptedAllocs, and the placing group's Preemptions."""
    h.nodes(1)
    _, low = fill(h, build, "node-0", priority=50)
    system = build.job(
        "sys", build.group(count=1, cpu=1000, memory_mb=256), type=JobType.SYSTEM, priority=100
    )
    outcome = plan_job(h.store.snapshot(), system)
    assert [a.id for a in outcome.preempted] == [low.id]
    assert outcome.preempted[0].desired_status is DesiredStatus.EVICT
    [group] = system.task_groups
    assert outcome.desired_updates[group.name].preemptions == 1
    assert outcome.desired_updates[group.name].place == 1
    stored = h.store.alloc(low.id)
    assert stored is not None and stored.desired_status is DesiredStatus.RUN  # a dry run
