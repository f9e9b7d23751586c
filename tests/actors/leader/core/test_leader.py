"""LeaderCore: requests, plans, client reports and missed heartbeats become state changes."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from actors.leader.core.leader import NODE_DOWN_DESCRIPTION, LeaderCore, plan_completes_eval
from actors.state import StateStore
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    DriverInfo,
    EvalStatus,
    Job,
    JobType,
    Node,
    NodeResources,
    NodeStatus,
    Plan,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
    UpdateStrategy,
)
from contracts.messages import LeaderRequest, PlanSubmission, RequestKind
from contracts.state_log import (
    AllocClientUpdate,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
)


def node(node_id: str, status: NodeStatus = NodeStatus.READY) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        status=status,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=1024, disk_mb=1000),
    ).with_computed_class()


def job(job_id: str = "web", job_type: JobType = JobType.SERVICE) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=100))
    return Job(
        id=job_id, name=job_id, type=job_type, task_groups=(TaskGroup("g", 1, tasks=(task,)),)
    )


@pytest.fixture
def core_and_store() -> tuple[LeaderCore, StateStore]:
    store = StateStore()
    ids = (f"id-{n}" for n in itertools.count())
    return LeaderCore(store, now_ns=lambda: 1_000, new_id=lambda: next(ids)), store


def commit_all(store: StateStore, changes: list) -> None:
    for change in changes:
        store.commit(change)


def place(store: StateStore, alloc_id: str, node_id: str, job_id: str = "web") -> None:
    store.commit(
        UpsertAllocs(
            (
                Allocation(
                    id=alloc_id,
                    node_id=node_id,
                    job_id=job_id,
                    task_group="g",
                    allocated_resources=AllocatedResources(cpu=100, memory_mb=100),
                ),
            )
        )
    )


def test_register_request_writes_job_and_eval(core_and_store) -> None:
    core, store = core_and_store
    decision = core.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="r1", job=job()))
    assert decision.response is not None and decision.response.ok
    assert decision.response.eval_id
    (change,) = decision.changes
    assert isinstance(change, UpsertJob) and change.job.id == "web"
    commit_all(store, decision.changes)
    assert store.eval(decision.response.eval_id).triggered_by is TriggeredBy.JOB_REGISTER


def test_bad_requests_fail_with_the_reason(core_and_store) -> None:
    core, _ = core_and_store
    missing = core.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="r1"))
    assert not missing.response.ok and "Job is required" in missing.response.error
    unknown = core.handle(LeaderRequest(RequestKind.STOP_JOB, request_id="r2", job_id="nope"))
    assert not unknown.response.ok and "nope" in unknown.response.error
    assert unknown.changes == []


def test_plan_commits_what_fits_and_carries_worker_evals(core_and_store) -> None:
    core, store = core_and_store
    store.commit(UpsertNodes((node("n1"),)))
    fits = Allocation(
        id="a1",
        node_id="n1",
        job_id="web",
        task_group="g",
        allocated_resources=AllocatedResources(cpu=600),
    )
    too_big = Allocation(
        id="a2",
        node_id="n1",
        job_id="web",
        task_group="g",
        allocated_resources=AllocatedResources(cpu=600),
    )
    blocked = core._eval("default", "web", "service", TriggeredBy.QUEUED_ALLOCS)
    [change], result = core.apply_plan(
        PlanSubmission(
            Plan(eval_id="e1", node_allocation={"n1": (fits,)}), "reply", evals=(blocked,)
        )
    )
    assert isinstance(change, UpsertAllocs) and [a.id for a in change.allocs] == ["a1"]
    assert change.evals == (blocked,)
    store.commit(change)
    changes, result = core.apply_plan(
        PlanSubmission(Plan(eval_id="e2", node_allocation={"n1": (too_big,)}), "r")
    )
    assert changes == [] and result.rejected_nodes[0].reason == "cpu exhausted"
    assert result.refresh_index > 0


def test_a_plan_committed_in_full_writes_the_final_status_it_carries(core_and_store) -> None:
    """`completes` goes into the plan's entry only when nothing was rejected (a partial
    commit makes the scheduler retry, so the eval is not done)."""
    core, store = core_and_store
    store.commit(UpsertNodes((node("n1"),)))

    def alloc(alloc_id: str) -> Allocation:
        return Allocation(
            id=alloc_id,
            node_id="n1",
            job_id="web",
            task_group="g",
            allocated_resources=AllocatedResources(cpu=600),
        )

    done = dataclasses.replace(
        core._eval("default", "web", "service", TriggeredBy.JOB_REGISTER),
        status=EvalStatus.COMPLETE,
    )
    full = PlanSubmission(
        Plan(eval_id=done.id, node_allocation={"n1": (alloc("a1"),)}), "r", completes=done
    )
    [change], result = core.apply_plan(full)
    assert plan_completes_eval(result)
    assert isinstance(change, UpsertAllocs) and change.evals == (done,)
    store.commit(change)

    partial = PlanSubmission(
        Plan(eval_id="e2", node_allocation={"n1": (alloc("a2"),)}),
        "r",
        completes=dataclasses.replace(done, id="e2"),
    )
    changes, result = core.apply_plan(partial)
    assert not plan_completes_eval(result) and result.rejected_nodes
    assert changes == []  # nothing fit, and the eval is not done


def test_missed_heartbeats_mark_nodes_down_and_reevaluate_their_jobs(core_and_store) -> None:
    core, store = core_and_store
    store.commit(UpsertNodes((node("n1"), node("n2"))))
    store.commit(UpsertJob(job()))
    place(store, "a1", "n1")
    changes = core.mark_nodes_down(["n1", "n2", "missing"])
    commit_all(store, changes)
    assert store.node("n1").status is NodeStatus.DOWN
    assert store.node("n1").status_description == NODE_DOWN_DESCRIPTION
    evals = [e for e in store.evals() if e.triggered_by is TriggeredBy.NODE_UPDATE]
    assert [(e.job_id, e.node_id) for e in evals] == [("web", "n1")]  # n2 held no allocs
    assert core.mark_nodes_down(["n1"]) == []  # already down: nothing more


def test_node_coming_up_evaluates_system_jobs(core_and_store) -> None:
    core, store = core_and_store
    store.commit(UpsertJob(job("agentd", JobType.SYSTEM)))
    store.commit(UpsertJob(job("web")))
    commit_all(store, core.register_nodes([node("n9")]))
    evals = [e for e in store.evals() if e.triggered_by is TriggeredBy.NODE_UPDATE]
    assert [(e.job_id, e.type) for e in evals] == [("agentd", "system")]
    assert evals[0].status is EvalStatus.PENDING


def test_client_failures_create_one_eval_per_job_and_repeats_are_ignored(core_and_store) -> None:
    core, store = core_and_store
    store.commit(UpsertNodes((node("n1"),)))
    store.commit(UpsertJob(job()))
    place(store, "a1", "n1")
    place(store, "a2", "n1")
    updates = [
        AllocClientUpdate("a1", ClientStatus.FAILED, "exit 1"),
        AllocClientUpdate("a2", ClientStatus.FAILED, "exit 1"),
        AllocClientUpdate("ghost", ClientStatus.RUNNING),
    ]
    changes = core.client_updates(updates)
    assert isinstance(changes[0], UpdateAllocsClientStatus) and len(changes[0].updates) == 2
    assert isinstance(changes[1], UpsertEvals) and len(changes[1].evals) == 1
    assert changes[1].evals[0].triggered_by is TriggeredBy.ALLOC_FAILURE
    commit_all(store, changes)
    assert core.client_updates(updates) == []  # idempotent: already recorded
    running = core.client_updates([AllocClientUpdate("a1", ClientStatus.RUNNING)])
    assert len(running) == 1  # a status change, and no eval for a healthy report


def test_a_replacement_coming_up_continues_a_rolling_update(core_and_store) -> None:
    core, store = core_and_store
    store.commit(UpsertNodes((node("n1"),)))
    base = job()
    rolling = base.replace(
        task_groups=(
            dataclasses.replace(base.task_groups[0], update=UpdateStrategy(max_parallel=1)),
        )
    )
    store.commit(UpsertJob(rolling))
    old = store.job("default", "web")
    place(store, "old", "n1")  # placed at the current version...
    store.commit(UpsertJob(rolling.replace(meta={"release": "2"})))  # ...then the job changes
    new = store.job("default", "web")
    assert new.job_modify_index != old.job_modify_index
    store.commit(
        UpsertAllocs(
            (
                Allocation(
                    id="fresh",
                    node_id="n1",
                    job_id="web",
                    task_group="g",
                    job_modify_index=new.job_modify_index,
                ),
            )
        )
    )
    changes = core.client_updates([AllocClientUpdate("fresh", ClientStatus.RUNNING)])
    (evals,) = [c for c in changes if isinstance(c, UpsertEvals)]
    assert [e.triggered_by for e in evals.evals] == [TriggeredBy.ROLLING_UPDATE]

    # Without an update block there is no rollout to continue: running reports make no eval.
    store.commit(UpsertJob(base.replace(meta={"release": "3"})))
    store.commit(
        UpsertAllocs((Allocation(id="other", node_id="n1", job_id="web", task_group="g"),))
    )
    changes = core.client_updates([AllocClientUpdate("other", ClientStatus.RUNNING)])
    assert not any(isinstance(c, UpsertEvals) for c in changes)
