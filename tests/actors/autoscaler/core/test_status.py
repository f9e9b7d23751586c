"""A job group as the autoscaler's target, read from a state store the real leader core
wrote: running allocations counted, starting ones apart, stopped jobs not ready, and the
latest scaling event's time (where a restarted autoscaler resumes its cooldown)."""

from __future__ import annotations

import itertools

from actors.autoscaler.core.status import META_DESIRED, META_LAST_EVENT, group_status
from actors.leader.core import register_job, scale_job, stop_job
from actors.state import StateStore
from contracts import (
    Allocation,
    ClientStatus,
    DesiredStatus,
    Job,
    ScalingPolicy,
    Task,
    TaskGroup,
)
from contracts.state_log import AllocClientUpdate, UpdateAllocsClientStatus, UpsertAllocs

NOW = 1_700_000_000_000_000_000
ids = itertools.count()


def new_id() -> str:
    return f"id-{next(ids)}"


def job() -> Job:
    scaling = ScalingPolicy(min=1, max=10)
    api = TaskGroup("api", 4, scaling=scaling, tasks=(Task("t", "mock"),))
    worker = TaskGroup("worker", 1, tasks=(Task("t", "mock"),))
    return Job(id="web", task_groups=(api, worker))


def alloc(alloc_id: str, group: str = "api", **kw: object) -> Allocation:
    return Allocation(id=alloc_id, job_id="web", node_id="n1", task_group=group, **kw)  # type: ignore[arg-type]


def store_with_job() -> StateStore:
    store = StateStore()
    write = register_job(store, job(), now_ns=NOW, new_id=new_id)
    assert write.change is not None
    store.commit(write.change)
    return store


def test_a_missing_job_or_group_has_no_status() -> None:
    store = StateStore()
    assert group_status(store, "default", "web", "api") is None
    store = store_with_job()
    assert group_status(store, "default", "web", "ghost") is None
    assert group_status(store, "other", "web", "api") is None


def test_count_is_the_running_allocations_and_starting_the_pending_ones() -> None:
    store = store_with_job()
    store.commit(
        UpsertAllocs(
            (
                alloc("r1"),
                alloc("r2"),
                alloc("p1"),
                alloc("done"),
                alloc("stopping", desired_status=DesiredStatus.STOP),
                alloc("w1", group="worker"),
            )
        )
    )
    running = ("r1", "r2", "stopping", "w1")
    updates = [AllocClientUpdate(a, ClientStatus.RUNNING) for a in running]
    updates.append(AllocClientUpdate("done", ClientStatus.COMPLETE))
    store.commit(UpdateAllocsClientStatus(tuple(updates)))
    status = group_status(store, "default", "web", "api")
    assert status is not None
    assert (status.ready, status.count, status.starting) == (True, 2, 1)
    assert status.last_event_s is None and status.meta == {META_DESIRED: "4"}


def test_the_latest_scaling_event_gives_the_last_event_time() -> None:
    store = store_with_job()
    for i, count in enumerate((5, None, 3)):
        write = scale_job(
            store, "default", "web", "api", count, now_ns=NOW + i * 10**9, new_id=new_id
        )
        assert write.change is not None
        store.commit(write.change)
    status = group_status(store, "default", "web", "api")
    assert status is not None
    assert status.last_event_s == NOW / 1e9 + 2
    assert status.meta == {META_DESIRED: "3", META_LAST_EVENT: str(NOW + 2 * 10**9)}
    # Events are kept per group: the other group has none.
    worker = group_status(store, "default", "web", "worker")
    assert worker is not None and worker.last_event_s is None


def test_a_stopped_job_is_not_ready() -> None:
    store = store_with_job()
    write = stop_job(store, "default", "web", now_ns=NOW, new_id=new_id)
    assert write.change is not None
    store.commit(write.change)
    status = group_status(store, "default", "web", "api")
    assert status is not None and not status.ready
