"""Job lifecycle (register, stop, revert, stable, scale) ported from Nomad's endpoint tests."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from actors.leader.core import (
    JobWrite,
    register_job,
    revert_job,
    scale_job,
    set_stable,
    stop_job,
)
from actors.state import StateStore
from contracts import (
    Allocation,
    ClientStatus,
    ConflictError,
    DesiredStatus,
    EvalStatus,
    Evaluation,
    Job,
    JobStatus,
    JobType,
    NotFoundError,
    ScalingPolicy,
    Task,
    TaskGroup,
    ValidationError,
)
from contracts.deployment import Deployment, DeploymentStatus
from contracts.state_log import (
    AllocClientUpdate,
    AppendScalingEvent,
    PurgeJob,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertDeployments,
    UpsertEvals,
    UpsertJob,
)

NOW = 1_700_000_000_000_000_000


def ids(prefix: str = "id") -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"{prefix}-{next(counter)}"


def group(name: str = "web", count: int = 3, **kw: Any) -> TaskGroup:
    return TaskGroup(name=name, count=count, tasks=(Task(name="t", driver="docker"),), **kw)


def make_job(*groups: TaskGroup, **kw: Any) -> Job:
    return Job(id="example", task_groups=groups or (group(),), **kw)


class Cluster:
    """A store plus the leader's commit step, to drive the lifecycle end to end."""

    def __init__(self) -> None:
        self.store = StateStore()
        self.new_id = ids()
        self.now = NOW

    def commit(self, write: JobWrite) -> int:
        assert write.change is not None
        self.now += 1
        return self.store.commit(write.change)

    def register(self, job: Job, **kw: Any) -> tuple[JobWrite, int]:
        write = register_job(self.store, job, now_ns=self.now, new_id=self.new_id, **kw)
        return write, self.commit(write)

    def completed(self, eval_id: str) -> Evaluation:
        ev = self.store.eval(eval_id)
        assert ev is not None
        return dataclasses.replace(ev, status=EvalStatus.COMPLETE)

    def job(self) -> Job:
        job = self.store.job("default", "example")
        assert job is not None
        return job

    def versions(self) -> list[Job]:
        return self.store.job_versions("default", "example")


# ---------------------------------------------------------------------------------------------
# Register


def test_register_new_job_writes_version_0_and_an_eval() -> None:
    c = Cluster()
    write, index = c.register(make_job(priority=70, status=JobStatus.DEAD, version=9, stable=True))
    assert isinstance(write.change, UpsertJob)
    assert write.eval is not None and write.eval_id == "id-0"
    assert write.reply_job_modify_index(index) == index
    job = c.job()
    assert (job.version, job.stable, job.submit_time, job.job_modify_index) == (0, False, NOW, 1)
    assert job.status is JobStatus.PENDING
    ev = c.store.eval("id-0")
    assert ev is not None
    assert (ev.triggered_by, ev.type, ev.priority, ev.status) == (
        "job-register",
        "service",
        70,
        EvalStatus.PENDING,
    )
    assert (ev.job_id, ev.job_modify_index, ev.create_time) == ("example", 1, NOW)


def test_register_eval_priority_override_and_type() -> None:
    c = Cluster()
    write, _ = c.register(make_job(type=JobType.BATCH), eval_priority=99)
    assert write.eval is not None and (write.eval.priority, write.eval.type) == (99, "batch")
    with pytest.raises(ValidationError):
        register_job(c.store, make_job(), now_ns=NOW, new_id=c.new_id, eval_priority=0)


def test_reregistering_identical_spec_creates_only_an_eval() -> None:
    c = Cluster()
    c.register(make_job())
    write, index = c.register(make_job())
    assert isinstance(write.change, UpsertEvals)
    assert write.reply_job_modify_index(index) == 1
    assert write.eval is not None and write.eval.job_modify_index == 1
    assert [j.version for j in c.versions()] == [0]
    assert len(c.store.evals_by_job("default", "example")) == 2


def test_enforce_index_check_and_set() -> None:
    c = Cluster()
    with pytest.raises(ConflictError, match="Enforcing job modify index 5: job does not exist"):
        register_job(c.store, make_job(), now_ns=NOW, new_id=c.new_id, enforce_index=5)
    c.register(make_job(), enforce_index=0)
    with pytest.raises(ConflictError, match="Enforcing job modify index 0: job already exists"):
        register_job(c.store, make_job(), now_ns=NOW, new_id=c.new_id, enforce_index=0)
    with pytest.raises(
        ConflictError,
        match="Enforcing job modify index 7: job exists with conflicting job modify index: 1",
    ):
        register_job(c.store, make_job(priority=1), now_ns=NOW, new_id=c.new_id, enforce_index=7)
    c.register(make_job(priority=1), enforce_index=1)
    assert c.job().version == 1


def test_register_preserve_counts() -> None:
    """TestJobEndpoint_Register_PreserveCounts: group1 keeps 10, new group2 takes 2."""
    c = Cluster()
    c.register(make_job(group("group1", 10)))
    file_job = make_job(group("group1", 0), group("group2", 2))
    c.register(file_job, preserve_counts=True)
    counts = {tg.name: tg.count for tg in c.job().task_groups}
    assert counts == {"group1": 10, "group2": 2}
    assert c.job().version == 1


def test_preserve_counts_store_level() -> None:
    """TestStateStore_UpsertJobWithRequest_PreserveCount: without the flag the file wins;
    with it a file that differs only in count writes no version; new jobs ignore it."""
    c = Cluster()
    c.register(make_job(group("web", 4)), preserve_counts=True)
    assert c.job().task_groups[0].count == 4  # new job: the file's count
    write, _ = c.register(make_job(group("web", 1)), preserve_counts=True)
    assert isinstance(write.change, UpsertEvals)
    assert c.job().task_groups[0].count == 4 and c.job().version == 0
    c.register(make_job(group("web", 1)))
    assert c.job().task_groups[0].count == 1 and c.job().version == 1


def test_register_unstops_a_stopped_job() -> None:
    c = Cluster()
    c.register(make_job())
    c.commit(stop_job(c.store, "default", "example", now_ns=NOW, new_id=c.new_id))
    assert c.job().stop and c.job().version == 1
    write, _ = c.register(make_job())
    assert isinstance(write.change, UpsertJob)
    assert not c.job().stop and c.job().version == 2


# ---------------------------------------------------------------------------------------------
# Stop / purge


def test_stop_writes_a_stopped_version_and_a_deregister_eval() -> None:
    c = Cluster()
    c.register(make_job(type=JobType.SYSTEM, priority=80))
    write = stop_job(c.store, "default", "example", now_ns=NOW, new_id=c.new_id)
    index = c.commit(write)
    assert write.eval is not None
    assert (write.eval.triggered_by, write.eval.type, write.eval.priority) == (
        "job-deregister",
        "system",
        80,
    )
    job = c.job()
    assert job.stop and job.version == 1 and job.job_modify_index == index
    assert job.status is JobStatus.DEAD  # system jobs: dead once stopped
    stored = c.store.eval(write.eval_id)
    assert stored is not None and stored.job_modify_index == index


def test_stop_unknown_job() -> None:
    with pytest.raises(NotFoundError):
        stop_job(StateStore(), "default", "nope", now_ns=NOW, new_id=ids())


def test_purge_removes_job_and_history_keeps_allocs_and_evals() -> None:
    c = Cluster()
    c.register(make_job())
    c.store.commit(UpsertAllocs((Allocation(id="a1", job_id="example", node_id="n1"),)))
    c.commit(
        scale_job(
            c.store, "default", "example", "web", None, message="m", now_ns=NOW, new_id=c.new_id
        )
    )
    write = stop_job(c.store, "default", "example", now_ns=NOW, new_id=c.new_id, purge=True)
    assert isinstance(write.change, PurgeJob)
    index = c.commit(write)
    assert write.reply_job_modify_index(index) == index
    assert c.store.job("default", "example") is None
    assert c.versions() == [] and c.store.scaling_events("default", "example") == {}
    assert [a.id for a in c.store.allocs_by_job("default", "example")] == ["a1"]
    assert write.eval_id in {e.id for e in c.store.evals_by_job("default", "example")}


# ---------------------------------------------------------------------------------------------
# Revert and stability


def test_revert() -> None:
    """TestJobEndpoint_Revert."""
    c = Cluster()
    c.register(make_job())
    c.register(make_job(priority=100))
    assert c.job().version == 1
    with pytest.raises(ValidationError, match="can't revert to current version"):
        revert_job(c.store, "default", "example", 1, now_ns=NOW, new_id=c.new_id)
    with pytest.raises(NotFoundError, match="at version 9 not found"):
        revert_job(c.store, "default", "example", 9, now_ns=NOW, new_id=c.new_id)
    with pytest.raises(NotFoundError):
        revert_job(c.store, "default", "nope", 0, now_ns=NOW, new_id=c.new_id)
    with pytest.raises(ConflictError, match="current job has version 1; enforcing version 10"):
        revert_job(
            c.store, "default", "example", 0, now_ns=NOW, new_id=c.new_id, enforce_prior_version=10
        )
    write = revert_job(
        c.store, "default", "example", 0, now_ns=NOW, new_id=c.new_id, enforce_prior_version=1
    )
    index = c.commit(write)
    job = c.job()
    assert (job.version, job.priority, job.job_modify_index) == (2, 50, index)
    # Reverting to v0 while at v2 (== v0): no new version, but an eval.
    write = revert_job(c.store, "default", "example", 0, now_ns=NOW, new_id=c.new_id)
    assert isinstance(write.change, UpsertEvals) and write.eval is not None
    c.commit(write)
    assert write.reply_job_modify_index(999) == index
    assert c.job().version == 2 and len(c.versions()) == 3


def test_revert_clears_stable() -> None:
    c = Cluster()
    c.register(make_job())
    c.commit(set_stable(c.store, "default", "example", 0, True))
    c.register(make_job(priority=10))
    c.commit(revert_job(c.store, "default", "example", 0, now_ns=NOW, new_id=c.new_id))
    assert c.job().version == 2 and not c.job().stable
    v0 = c.store.job_version("default", "example", 0)
    assert v0 is not None and v0.stable


def test_set_stable() -> None:
    c = Cluster()
    c.register(make_job())
    c.register(make_job(priority=10))
    write = set_stable(c.store, "default", "example", 1, True)
    assert isinstance(write.change, UpsertJob) and write.change.keep_version
    c.commit(write)
    assert c.job().stable and c.job().version == 1 and len(c.versions()) == 2
    assert write.reply_job_modify_index(99) == 2
    assert set_stable(c.store, "default", "example", 1, True).change is None  # no-op
    c.commit(set_stable(c.store, "default", "example", 0, True))
    v0 = c.store.job_version("default", "example", 0)
    assert v0 is not None and v0.stable and c.job().version == 1
    with pytest.raises(NotFoundError):
        set_stable(c.store, "default", "example", 7, True)


def test_inspect_version_status_after_stop_and_revert_issue_24957() -> None:
    """run (v0), stop (v1), revert to v0 (v2): v1 must read dead and v2 running."""
    c = Cluster()

    def check() -> None:
        job = c.job()
        row = c.store.job_version("default", "example", job.version)
        assert row is not None and row.status is job.status

    w0, _ = c.register(make_job(group("web", 2)))
    check()
    assert c.job().status is JobStatus.PENDING
    allocs = [
        Allocation(id=f"a{i}", job_id="example", node_id="n1", task_group="web") for i in range(2)
    ]
    done0 = c.completed(w0.eval_id)
    c.store.commit(UpsertAllocs(tuple(allocs), evals=(done0,)))
    c.store.commit(
        UpdateAllocsClientStatus(
            tuple(AllocClientUpdate(a.id, ClientStatus.RUNNING) for a in allocs)
        )
    )
    check()
    assert c.job().status is JobStatus.RUNNING

    w1 = stop_job(c.store, "default", "example", now_ns=NOW, new_id=c.new_id)
    c.commit(w1)
    check()
    assert c.job().version == 1 and c.job().status is JobStatus.RUNNING  # allocs still up
    stopped = tuple(dataclasses.replace(a, desired_status=DesiredStatus.STOP) for a in allocs)
    done1 = c.completed(w1.eval_id)
    c.store.commit(UpsertAllocs(stopped, evals=(done1,)))
    check()
    c.store.commit(
        UpdateAllocsClientStatus(
            tuple(AllocClientUpdate(a.id, ClientStatus.COMPLETE) for a in allocs)
        )
    )
    check()
    assert c.job().status is JobStatus.DEAD

    w2 = revert_job(c.store, "default", "example", 0, now_ns=NOW, new_id=c.new_id)
    c.commit(w2)
    check()
    assert c.job().version == 2 and not c.job().stop and c.job().status is JobStatus.PENDING
    fresh = [
        Allocation(id=f"b{i}", job_id="example", node_id="n1", task_group="web") for i in range(2)
    ]
    done2 = c.completed(w2.eval_id)
    c.store.commit(UpsertAllocs(tuple(fresh), evals=(done2,)))
    check()

    statuses = {j.version: j.status for j in c.versions()}
    assert statuses[2] is JobStatus.RUNNING
    assert statuses[1] is JobStatus.DEAD
    assert c.job().status is JobStatus.RUNNING


# ---------------------------------------------------------------------------------------------
# Scale


def scalable_job() -> Job:
    return make_job(group("web", 3, scaling=ScalingPolicy(min=1, max=30)))


def test_scale_writes_version_eval_and_event() -> None:
    """TestJobEndpoint_Scale."""
    c = Cluster()
    c.register(scalable_job())
    write = scale_job(
        c.store,
        "default",
        "example",
        "web",
        10,
        message="more",
        meta={"by": "me"},
        now_ns=NOW + 5,
        new_id=c.new_id,
    )
    index = c.commit(write)
    assert isinstance(write.change, UpsertJob) and write.eval is not None
    job = c.job()
    assert (job.version, job.task_groups[0].count, job.job_modify_index) == (1, 10, index)
    ev = c.store.eval(write.eval_id)
    assert ev is not None
    assert (ev.triggered_by, ev.type, ev.priority, ev.job_modify_index) == (
        "job-scaling",
        "service",
        50,
        index,
    )
    events = c.store.scaling_events("default", "example")["web"]
    assert len(events) == 1
    event = events[0]
    assert (event.count, event.previous_count, event.message, event.time) == (
        10,
        3,
        "more",
        NOW + 5,
    )
    assert (event.eval_id, event.meta, event.error) == (write.eval_id, {"by": "me"}, False)


def test_a_stopped_job_is_not_scaled_but_an_event_is_still_recorded() -> None:
    c = Cluster()
    c.register(scalable_job())
    c.commit(stop_job(c.store, "default", "example", now_ns=NOW, new_id=c.new_id))
    stopped_version = c.job().version
    with pytest.raises(ValidationError) as exc:
        scale_job(c.store, "default", "example", "web", 5, now_ns=NOW, new_id=c.new_id)
    assert str(exc.value) == 'job "example" is stopped: run it again before scaling it'
    assert (c.job().version, c.job().task_groups[0].count) == (stopped_version, 3)
    write = scale_job(
        c.store, "default", "example", "web", None, message="noted", now_ns=NOW, new_id=c.new_id
    )
    c.commit(write)
    (event,) = c.store.scaling_events("default", "example")["web"]
    assert (event.count, event.message) == (None, "noted")


def test_scale_without_count_records_only_an_event() -> None:
    c = Cluster()
    c.register(scalable_job())
    write = scale_job(
        c.store,
        "default",
        "example",
        "web",
        None,
        message="tried",
        error=True,
        now_ns=NOW,
        new_id=c.new_id,
    )
    assert isinstance(write.change, AppendScalingEvent) and write.eval is None
    c.commit(write)
    assert c.job().version == 0 and write.reply_job_modify_index(50) == 1
    (event,) = c.store.scaling_events("default", "example")["web"]
    assert (event.count, event.previous_count, event.error, event.eval_id) == (None, 3, True, None)


def test_scale_keeps_20_events_per_group() -> None:
    c = Cluster()
    c.register(scalable_job())
    for i in range(25):
        c.commit(
            scale_job(
                c.store,
                "default",
                "example",
                "web",
                None,
                message=str(i),
                now_ns=i,
                new_id=c.new_id,
            )
        )
    events = c.store.scaling_events("default", "example")["web"]
    assert [e.message for e in events] == [str(i) for i in range(24, 4, -1)]


@pytest.mark.parametrize(
    ("group_name", "count", "kw", "message"),
    [
        ("web", 40, {}, 'group "web": count 40 is above scaling max 30'),
        ("web", 0, {}, 'group "web": count 0 is below scaling min 1'),
        ("web", -1, {}, "scaling action count can't be negative"),
        ("web", 2, {"error": True}, "scaling action should not contain count if error is true"),
        ("db", 2, {}, 'task group "db" specified for scaling does not exist in job'),
        ("", 2, {}, "missing task group name for scaling action"),
    ],
)
def test_scale_validation(group_name: str, count: int, kw: dict[str, Any], message: str) -> None:
    """TestJobEndpoint_Scale_TaskGroupOutOfBounds and the other 400s."""
    c = Cluster()
    c.register(scalable_job())
    with pytest.raises(ValidationError) as exc:
        scale_job(
            c.store, "default", "example", group_name, count, now_ns=NOW, new_id=c.new_id, **kw
        )
    assert str(exc.value) == message
    assert c.job().version == 0


def test_scale_system_job_only_0_or_1() -> None:
    c = Cluster()
    c.register(make_job(type=JobType.SYSTEM))
    with pytest.raises(ValidationError, match="can only be scaled between 0 and 1"):
        scale_job(c.store, "default", "example", "web", 2, now_ns=NOW, new_id=c.new_id)
    c.commit(scale_job(c.store, "default", "example", "web", 0, now_ns=NOW, new_id=c.new_id))
    assert c.job().task_groups[0].count == 0


def test_scale_limits_total_count_and_enforces_index() -> None:
    c = Cluster()
    c.register(make_job(group("web", 1), group("db", 40_000)))
    with pytest.raises(ValidationError, match="maximum of 50000"):
        scale_job(c.store, "default", "example", "web", 10_001, now_ns=NOW, new_id=c.new_id)
    with pytest.raises(ConflictError, match="conflicting job modify index: 1"):
        scale_job(
            c.store, "default", "example", "web", 2, now_ns=NOW, new_id=c.new_id, enforce_index=3
        )
    with pytest.raises(NotFoundError):
        scale_job(c.store, "default", "nope", "web", 2, now_ns=NOW, new_id=c.new_id)
    c.commit(
        scale_job(
            c.store, "default", "example", "web", 2, now_ns=NOW, new_id=c.new_id, enforce_index=1
        )
    )
    assert c.job().task_groups[0].count == 2


def test_scale_is_blocked_during_an_active_deployment() -> None:
    """TestJobEndpoint_Scale_DeploymentBlocking: a count change is refused while the job's
    deployment is active; once it is done, scaling goes through."""
    c = Cluster()
    c.register(scalable_job())
    job = c.job()
    running = Deployment(
        "d1", job_id="example", job_version=job.version, job_create_index=job.create_index
    )
    c.store.commit(UpsertDeployments((running,)))

    def scale(count: int | None) -> JobWrite:
        return scale_job(
            c.store, "default", "example", "web", count, message="m", now_ns=NOW, new_id=c.new_id
        )

    with pytest.raises(ValidationError, match="job scaling blocked due to active deployment"):
        scale(5)
    assert scale(None).change is not None  # an event alone is still recorded
    done = dataclasses.replace(running, status=DeploymentStatus.SUCCESSFUL)
    c.store.commit(UpsertDeployments((done,)))
    assert isinstance(scale(5).change, UpsertJob)
