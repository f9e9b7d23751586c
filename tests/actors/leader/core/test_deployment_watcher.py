"""The leader's deployment watcher, ported at the behaviour level from Nomad's
deploymentwatcher tests (TestWatcher_*): health from client reports and timers, success and
a stable version, failure and auto-revert, deadlines, promotion, pause and manual health.
Every decision is committed to a real store as the leader's loop would."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from actors.leader.core.deadlines import DeadlineKind
from actors.leader.core.leader import LeaderCore
from actors.state import StateStore
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
    DriverInfo,
    Job,
    Node,
    NodeResources,
    Plan,
    ReschedulePolicy,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
    UpdateStrategy,
)
from contracts.deployment import (
    DESCRIPTION_FAILED_ALLOCATIONS,
    DESCRIPTION_PROGRESS_DEADLINE,
    DESCRIPTION_SUCCESSFUL,
    Deployment,
    DeploymentState,
    DeploymentStatus,
)
from contracts.messages import LeaderRequest, LeaderResponse, PlanSubmission, RequestKind
from contracts.state_log import AllocClientUpdate, StateChange, UpsertJob, UpsertNodes

S = 1_000_000_000
START = 1_800_000_000 * S


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def core(clock: Clock) -> LeaderCore:
    store = StateStore()
    counter = itertools.count(1)
    leader = LeaderCore(store, now_ns=clock, new_id=lambda: f"id-{next(counter)}")
    node = Node(
        id="n1",
        name="n1",
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=100_000, memory_mb=100_000, disk_mb=100_000),
    ).with_computed_class()
    store.commit(UpsertNodes((node,)))
    return leader


def store_of(core: LeaderCore) -> StateStore:
    assert isinstance(core.state, StateStore)
    return core.state


def commit(core: LeaderCore, changes: list[StateChange]) -> None:
    for change in changes:
        store_of(core).commit(change)


def job(version_env: str = "1", count: int = 2, **strategy: object) -> Job:
    update = UpdateStrategy(
        max_parallel=2,
        min_healthy_time_s=10,
        healthy_deadline_s=60,
        **strategy,  # type: ignore[arg-type]
    )
    task = Task("t", "mock", env={"V": version_env}, resources=Resources(10, 10))
    return Job(
        id="web", name="web", task_groups=(TaskGroup("g", count, tasks=(task,), update=update),)
    )


def register(core: LeaderCore, spec: Job) -> Job:
    store_of(core).commit(UpsertJob(spec))
    current = core.state.job("default", "web")
    assert current is not None
    return current


def place(
    core: LeaderCore, current: Job, n: int, *, canaries: int = 0, **state: object
) -> list[str]:
    """A scheduler's plan: a deployment for `current` and `n` allocations joining it."""
    group = current.task_groups[0]
    assert group.update is not None
    deployment = core.state.latest_deployment("default", "web")
    if deployment is None or deployment.job_version != current.version:
        deployment = Deployment(
            f"dep-v{current.version}",
            job_id="web",
            job_version=current.version,
            job_create_index=current.create_index,
            task_groups={
                "g": DeploymentState(
                    auto_revert=group.update.auto_revert,
                    auto_promote=group.update.auto_promote,
                    progress_deadline_s=group.update.progress_deadline_s,
                    desired_canaries=canaries,
                    desired_total=group.count,
                    **state,  # type: ignore[arg-type]
                )
            },
        )
    allocs = tuple(
        Allocation(
            id=f"{deployment.id}-a{i}",
            node_id="n1",
            job_id="web",
            job_version=current.version,
            job_modify_index=current.job_modify_index,
            task_group="g",
            name=f"web.g[{i}]",
            allocated_resources=AllocatedResources(10, 10),
            deployment_id=deployment.id,
            create_time=core.now_ns(),
        )
        for i in range(n)
    )
    plan = Plan(
        eval_id="e",
        job_id="web",
        node_allocation={"n1": allocs},
        deployments=(deployment,),
        canaries=tuple(a.id for a in allocs[:canaries]),
    )
    changes, _ = core.apply_plan(PlanSubmission(plan, "r"))
    commit(core, changes)
    return [a.id for a in allocs]


def report(core: LeaderCore, status: ClientStatus, *alloc_ids: str) -> list[StateChange]:
    changes = core.client_updates([AllocClientUpdate(a, status) for a in alloc_ids])
    commit(core, changes)
    return changes


def tick(core: LeaderCore, clock: Clock, seconds: float) -> list[StateChange]:
    clock.now += int(seconds * S)
    changes = core.due()
    commit(core, changes)
    return changes


def ask(core: LeaderCore, **fields: object) -> LeaderResponse:
    decision = core.handle(LeaderRequest(**fields))  # type: ignore[arg-type]
    commit(core, decision.changes)
    assert decision.response is not None
    return decision.response


def latest(core: LeaderCore) -> Deployment:
    deployment = core.state.latest_deployment("default", "web")
    assert deployment is not None
    return deployment


def watcher_evals(core: LeaderCore) -> list[str]:
    return [
        e.id
        for e in core.state.evals_by_job("default", "web")
        if e.triggered_by is TriggeredBy.DEPLOYMENT_WATCHER
    ]


def test_running_for_min_healthy_time_is_healthy_and_all_healthy_is_success(
    core: LeaderCore, clock: Clock
) -> None:
    current = register(core, job())
    a0, a1 = place(core, current, 2)
    state = latest(core).task_groups["g"]
    assert state.placed_allocs == 2 and state.require_progress_by == START + 600 * S
    report(core, ClientStatus.RUNNING, a0, a1)
    assert tick(core, clock, 9.9) == []
    tick(core, clock, 0.1)
    deployment = latest(core)
    assert deployment.status is DeploymentStatus.SUCCESSFUL
    assert deployment.status_description == DESCRIPTION_SUCCESSFUL
    assert set(deployment.task_groups["g"].healthy_ids) == {a0, a1}
    assert core.state.job_version("default", "web", current.version).stable  # type: ignore[union-attr]


def test_each_healthy_allocation_lets_the_scheduler_go_on(core: LeaderCore, clock: Clock) -> None:
    current = register(core, job(count=4))
    a0, _a1 = place(core, current, 2)
    report(core, ClientStatus.RUNNING, a0)
    tick(core, clock, 10)
    assert latest(core).status is DeploymentStatus.RUNNING
    assert len(watcher_evals(core)) == 1


def test_a_failed_allocation_fails_the_deployment_without_a_progress_deadline(
    core: LeaderCore, clock: Clock
) -> None:
    current = register(core, job(progress_deadline_s=0))
    a0, _ = place(core, current, 2)
    report(core, ClientStatus.FAILED, a0)
    deployment = latest(core)
    assert deployment.status is DeploymentStatus.FAILED
    assert deployment.status_description == DESCRIPTION_FAILED_ALLOCATIONS
    assert deployment.task_groups["g"].unhealthy_ids == (a0,)


def test_with_a_progress_deadline_a_failed_allocation_is_allowed_a_replacement(
    core: LeaderCore, clock: Clock
) -> None:
    """Nomad's shouldFailEarly: a group with a progress deadline (Nomad's default is 10
    minutes) does not fail on its first unhealthy allocation while it can be rescheduled;
    the allocation is marked for replacement, with an eval to place it."""
    current = register(core, job(progress_deadline_s=600))
    a0, _ = place(core, current, 2)
    report(core, ClientStatus.FAILED, a0)
    deployment = latest(core)
    assert deployment.status is DeploymentStatus.RUNNING
    assert deployment.task_groups["g"].unhealthy_ids == (a0,)
    failed = core.state.alloc(a0)
    assert failed is not None and failed.desired_transition.reschedule
    assert failed.client_status is ClientStatus.FAILED  # the mark keeps the client's report
    assert len(watcher_evals(core)) == 1
    report(core, ClientStatus.FAILED, a0)  # reported again: marked and evaluated once
    assert len(watcher_evals(core)) == 1
    # No healthy replacement by the deadline: that fails it.
    tick(core, clock, 600)
    assert latest(core).status_description == DESCRIPTION_PROGRESS_DEADLINE


def test_with_a_progress_deadline_an_allocation_out_of_reschedule_attempts_fails_it(
    core: LeaderCore, clock: Clock
) -> None:
    """Waiting for the deadline could bring no healthy replacement: it fails at once."""
    spec = job(progress_deadline_s=600)
    no_retries = ReschedulePolicy(attempts=0, unlimited=False)
    spec = dataclasses.replace(
        spec,
        task_groups=(dataclasses.replace(spec.task_groups[0], reschedule_policy=no_retries),),
    )
    current = register(core, spec)
    a0, _ = place(core, current, 2)
    report(core, ClientStatus.FAILED, a0)
    deployment = latest(core)
    assert deployment.status is DeploymentStatus.FAILED
    assert deployment.status_description == DESCRIPTION_FAILED_ALLOCATIONS


def test_an_allocation_the_server_stopped_gets_no_health_when_its_tasks_exit(
    core: LeaderCore, clock: Clock
) -> None:
    """`nomad alloc stop` (or a migration) during a rollout: its client stops watching its
    health, so the exit of its tasks neither marks it unhealthy nor fails the deployment."""
    current = register(core, job())
    a0, a1 = place(core, current, 2)
    stopped = core.state.alloc(a0)
    assert stopped is not None
    stop = dataclasses.replace(stopped, desired_status=DesiredStatus.STOP)
    changes, _ = core.apply_plan(
        PlanSubmission(Plan(eval_id="e2", job_id="web", node_update={"n1": (stop,)}), "r")
    )
    commit(core, changes)
    report(core, ClientStatus.COMPLETE, a0)
    report(core, ClientStatus.RUNNING, a1)
    deployment = latest(core)
    assert deployment.status is DeploymentStatus.RUNNING
    assert deployment.health_of(a0) is None
    tick(core, clock, 10)
    assert latest(core).health_of(a1) is True


def test_auto_revert_goes_back_to_the_latest_stable_version(core: LeaderCore, clock: Clock) -> None:
    v0 = register(core, job(auto_revert=True, progress_deadline_s=0))
    ids = place(core, v0, 2)
    report(core, ClientStatus.RUNNING, *ids)
    tick(core, clock, 10)  # v0's deployment succeeds: v0 is stable
    v1 = register(core, job("2", auto_revert=True, progress_deadline_s=0))
    bad, _ = place(core, v1, 2)
    report(core, ClientStatus.FAILED, bad)
    failed = latest(core)
    assert failed.job_version == v1.version and failed.status is DeploymentStatus.FAILED
    assert failed.status_description == (
        f"{DESCRIPTION_FAILED_ALLOCATIONS} - rolling back to job version {v0.version}"
    )
    reverted = core.state.job("default", "web")
    assert reverted is not None and reverted.version == v1.version + 1
    assert reverted.task_groups[0].tasks[0].env == {"V": "1"}


def test_auto_revert_without_a_stable_version_says_so(core: LeaderCore, clock: Clock) -> None:
    current = register(core, job(auto_revert=True, progress_deadline_s=0))
    bad, _ = place(core, current, 2)
    report(core, ClientStatus.FAILED, bad)
    assert latest(core).status_description.endswith("no stable job version to auto revert to")


def test_not_healthy_by_the_healthy_deadline_is_unhealthy(core: LeaderCore, clock: Clock) -> None:
    current = register(core, job(progress_deadline_s=0))
    place(core, current, 2)
    tick(core, clock, 60)
    deployment = latest(core)
    assert deployment.status is DeploymentStatus.FAILED
    # The first one fails the deployment; a failed deployment records no more health.
    assert len(deployment.task_groups["g"].unhealthy_ids) == 1


def test_no_progress_by_the_progress_deadline_fails(core: LeaderCore, clock: Clock) -> None:
    current = register(core, job(progress_deadline_s=30, health_check="manual"))
    place(core, current, 2)
    tick(core, clock, 30)
    deployment = latest(core)
    assert deployment.status is DeploymentStatus.FAILED
    assert deployment.status_description == DESCRIPTION_PROGRESS_DEADLINE


def test_promotion_needs_healthy_canaries(core: LeaderCore, clock: Clock) -> None:
    current = register(core, job(canary=2, health_check="manual"))
    c0, c1 = place(core, current, 2, canaries=2)
    deployment = latest(core)
    assert deployment.task_groups["g"].placed_canaries == (c0, c1)
    early = ask(core, kind=RequestKind.PROMOTE_DEPLOYMENT, deployment_id=deployment.id)
    assert not early.ok and 'Task group "g" has 0/2 healthy allocations' in early.error
    healthy = ask(
        core,
        kind=RequestKind.SET_ALLOC_HEALTH,
        deployment_id=deployment.id,
        healthy_alloc_ids=(c0, c1),
    )
    assert healthy.ok
    promoted = ask(core, kind=RequestKind.PROMOTE_DEPLOYMENT, deployment_id=deployment.id)
    assert promoted.ok and promoted.eval_id
    assert latest(core).task_groups["g"].promoted


def test_auto_promote_promotes_once_the_canaries_are_healthy(
    core: LeaderCore, clock: Clock
) -> None:
    current = register(core, job(canary=1, auto_promote=True, count=3))
    [canary] = place(core, current, 1, canaries=1)
    report(core, ClientStatus.RUNNING, canary)
    tick(core, clock, 10)
    state = latest(core).task_groups["g"]
    assert state.promoted and latest(core).status is DeploymentStatus.RUNNING


def test_pause_resume_and_the_errors_for_a_terminal_deployment(
    core: LeaderCore, clock: Clock
) -> None:
    current = register(core, job(health_check="manual"))
    a0, _ = place(core, current, 2)
    dep = latest(core).id
    assert ask(core, kind=RequestKind.PAUSE_DEPLOYMENT, deployment_id=dep, pause=True).ok
    assert latest(core).status is DeploymentStatus.PAUSED
    resumed = ask(core, kind=RequestKind.PAUSE_DEPLOYMENT, deployment_id=dep, pause=False)
    assert resumed.ok and resumed.eval_id and latest(core).status is DeploymentStatus.RUNNING
    unknown = ask(
        core, kind=RequestKind.SET_ALLOC_HEALTH, deployment_id=dep, healthy_alloc_ids=("x",)
    )
    assert not unknown.ok and "has no allocation 'x'" in unknown.error
    assert ask(core, kind=RequestKind.FAIL_DEPLOYMENT, deployment_id=dep).ok
    assert latest(core).status is DeploymentStatus.FAILED
    for kind, extra, error in [
        (RequestKind.FAIL_DEPLOYMENT, {}, "can't fail terminal deployment"),
        (RequestKind.PAUSE_DEPLOYMENT, {"pause": False}, "can't resume terminal deployment"),
        (RequestKind.PROMOTE_DEPLOYMENT, {}, "can't promote terminal deployment"),
        (
            RequestKind.SET_ALLOC_HEALTH,
            {"healthy_alloc_ids": (a0,)},
            "can't set health of allocations for a terminal deployment",
        ),
    ]:
        refused = ask(core, kind=kind, deployment_id=dep, **extra)
        assert not refused.ok and refused.error == error
    missing = ask(core, kind=RequestKind.FAIL_DEPLOYMENT, deployment_id="nope")
    assert not missing.ok and missing.error_kind == "not-found"


def test_a_new_leader_times_the_health_of_running_allocations(
    core: LeaderCore, clock: Clock
) -> None:
    current = register(core, job())
    ids = place(core, current, 2)
    report(core, ClientStatus.RUNNING, *ids)
    fresh = LeaderCore(core.state, now_ns=clock, new_id=lambda: "fresh")
    fresh.rebuild_deadlines()
    assert len(fresh.deadlines.times(DeadlineKind.ALLOC_HEALTH)) == 4  # healthy + deadline each
    assert len(fresh.deadlines.times(DeadlineKind.PROGRESS)) == 1
    clock.now += 10 * S
    commit(fresh, fresh.due())
    assert latest(fresh).status is DeploymentStatus.SUCCESSFUL


def test_a_replacement_mark_keeps_a_drains_mark_made_in_the_same_commit(
    core: LeaderCore,
) -> None:
    """The drainer and the watcher both rewrite the allocation in one turn: the later
    record carries both transitions, not just the watcher's."""
    from actors.leader.core.deployment_watcher import Pending
    from contracts import DesiredTransition
    from contracts.state_log import UpsertAllocs

    alloc = Allocation(id="a1", job_id="web", node_id="n1", task_group="g")
    pending = Pending(core.state, core.eval_for)
    pending.allocs["a1"] = dataclasses.replace(
        alloc, desired_transition=DesiredTransition(reschedule=True)
    )
    drained = dataclasses.replace(alloc, desired_transition=DesiredTransition(migrate=True))
    (written,) = [
        c for c in pending.changes(after=[UpsertAllocs((drained,))]) if isinstance(c, UpsertAllocs)
    ]
    (record,) = written.allocs
    assert record.desired_transition == DesiredTransition(migrate=True, reschedule=True)
