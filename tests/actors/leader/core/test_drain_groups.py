"""Nomad's drainer decisions (drain_groups.py), ported from nomad/drainer/watch_jobs_test.go:
TestDrainingJobWatcher_HandleTaskGroup's table (ten allocations of a count-10 group, healthy
on the draining node unless the case says otherwise), TestHandleTaskGroup_Migrations and
_GarbageCollectedNode, and what drover adds (health from running time, in-flight marks)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from actors.leader.core.drain_groups import (
    handle_job,
    handle_task_group,
    has_health,
    health_due,
)
from contracts import (
    Allocation,
    ClientStatus,
    DesiredStatus,
    DesiredTransition,
    Job,
    JobType,
    MigrateStrategy,
    Task,
    TaskGroup,
)

S = 1_000_000_000
NOW = 10_000 * S
DRAINING, RUNNING = "draining", "running"
Edit = Callable[[int, Allocation], Allocation]


def group(count: int = 10, max_parallel: int = 1, **migrate: float) -> TaskGroup:
    strategy = MigrateStrategy(max_parallel=max_parallel, **migrate)
    return TaskGroup("web", count, migrate=strategy, tasks=(Task("t", driver="mock"),))


def alloc(i: int, **fields: object) -> Allocation:
    """Nomad's default in the table: healthy (running long enough) on the draining node."""
    base = Allocation(
        id=f"a{i:02d}",
        name=f"j.web[{i}]",
        job_id="j",
        task_group="web",
        node_id=DRAINING,
        client_status=ClientStatus.RUNNING,
        create_time=0,
        modify_time=0,
    )
    return dataclasses.replace(base, **fields)


def on_draining(node_id: str) -> bool:
    return node_id == DRAINING


def no_health(a: Allocation) -> Allocation:
    """Nomad's `DeploymentStatus = nil`: placed just now, not yet running."""
    return dataclasses.replace(a, client_status=ClientStatus.PENDING, create_time=NOW)


def stopped_complete(a: Allocation) -> Allocation:
    return dataclasses.replace(
        a, desired_status=DesiredStatus.STOP, client_status=ClientStatus.COMPLETE
    )


def moved(a: Allocation) -> Allocation:
    return dataclasses.replace(a, node_id=RUNNING)


def edits(**by_index: Callable[[Allocation], Allocation]) -> Edit:
    """Per-allocation edits: keys `i0`, `i1`, ... or `rest` for the others."""

    def apply(i: int, a: Allocation) -> Allocation:
        edit = by_index.get(f"i{i}", by_index.get("rest"))
        return edit(a) if edit is not None else a

    return apply


def each(*fns: Callable[[Allocation], Allocation]) -> Callable[[Allocation], Allocation]:
    def apply(a: Allocation) -> Allocation:
        for fn in fns:
            a = fn(a)
        return a

    return apply


def marked(a: Allocation) -> Allocation:
    return dataclasses.replace(a, desired_transition=DesiredTransition(migrate=True))


def evens(fn: Callable[[Allocation], Allocation]) -> Edit:
    return lambda i, a: fn(a) if i % 2 == 0 else a


CASES: list[tuple[str, bool, int, Edit | None, int, bool]] = [
    # name, batch, max_parallel, edit, expect drained, expect done
    ("drain-respects-max-parallel-1", False, 1, None, 1, False),
    ("allocs-on-non-draining-node-should-not-drain", False, 1, edits(rest=moved), 0, True),
    (
        "unhealthy-allocs-on-non-draining-node-should-not-drain",
        False,
        1,
        evens(each(moved, no_health)),
        0,
        False,
    ),
    ("healthy-alloc-draining-node-should-drain", False, 1, edits(i0=None, rest=moved), 1, False),
    (
        "still-draining-alloc-no-new-updates",
        False,
        1,
        edits(i0=marked, rest=moved),
        0,
        False,
    ),
    (
        "client-terminal-alloc-drain-should-be-finished",
        False,
        1,
        edits(i0=stopped_complete, rest=moved),
        0,
        True,
    ),
    (
        "client-terminal-batch-alloc-drain-should-be-finished",
        True,
        1,
        edits(i0=stopped_complete, rest=moved),
        0,
        True,
    ),
    (
        "all-client-terminal-drain-should-be-finished",
        False,
        1,
        edits(rest=stopped_complete),
        0,
        True,
    ),
    (
        "half-client-terminal-drain-should-not-be-finished",
        False,
        1,
        lambda i, a: (
            stopped_complete(a)
            if i % 2 == 0
            else dataclasses.replace(a, desired_status=DesiredStatus.STOP)
        ),
        0,
        False,
    ),
    ("all-terminal-batch", True, 1, edits(rest=stopped_complete), 0, True),
    ("drain-respects-max-parallel-all-at-once", False, 10, None, 10, False),
    ("drain-respects-max-parallel-2", False, 2, None, 2, False),
    (
        "notify-migrated-1-on-new-1-drained-1-draining",
        False,
        2,
        edits(i0=moved, i1=stopped_complete),
        1,
        False,
    ),
    (
        "notify-migrated-8-on-new-1-drained-1-draining",
        False,
        2,
        lambda i, a: moved(a) if i < 8 else stopped_complete(a) if i == 8 else a,
        1,
        False,
    ),
    (
        "notify-migrated-5-on-new-2-drained-3-draining",
        False,
        5,
        lambda i, a: moved(a) if i < 5 else stopped_complete(a) if i >= 8 else a,
        3,
        False,
    ),
    (
        "pending-health-blocks",
        False,
        3,
        lambda i, a: (
            no_health(moved(a))
            if i == 0
            else moved(a)
            if i < 5
            else stopped_complete(a)
            if i == 9
            else a
        ),
        1,
        False,
    ),
    (
        "pending-health-blocks-higher-max",
        False,
        5,
        lambda i, a: (
            no_health(moved(a))
            if i < 2
            else moved(a)
            if i < 5
            else stopped_complete(a)
            if i == 9
            else a
        ),
        2,
        False,
    ),
]


@pytest.mark.parametrize(
    ("batch", "max_parallel", "edit", "drained", "done"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_handle_task_group(
    batch: bool, max_parallel: int, edit: Edit | None, drained: int, done: bool
) -> None:
    """TestDrainingJobWatcher_HandleTaskGroup (its `migrated` output is drover's drain
    completion instead, drainer.py)."""
    allocs = [alloc(i) for i in range(10)]
    if edit is not None:
        allocs = [edit(i, a) for i, a in enumerate(allocs)]
    result = handle_task_group(
        group(max_parallel=max_parallel),
        allocs,
        batch=batch,
        on_draining_node=on_draining,
        now_ns=NOW,
    )
    assert len(result.drain) == drained
    assert result.remaining is not done
    assert all(a.node_id == DRAINING and not a.desired_transition.migrate for a in result.drain)


@pytest.mark.parametrize("gone_node", [False, True])
@pytest.mark.parametrize("batch", [False, True])
def test_finished_allocations_leave_nothing_to_drain(batch: bool, gone_node: bool) -> None:
    """TestHandleTaskGroup_Migrations and _GarbageCollectedNode: ten allocations that are
    done (stopped and complete, or failed), one of them on a node that no longer exists."""
    allocs = [
        stopped_complete(alloc(i)) if i % 2 == 0 else alloc(i, client_status=ClientStatus.FAILED)
        for i in range(10)
    ]
    if gone_node:
        allocs[0] = dataclasses.replace(allocs[0], node_id="collected")
    result = handle_task_group(
        group(), allocs, batch=batch, on_draining_node=on_draining, now_ns=NOW
    )
    assert result.drain == () and not result.remaining and not result.waiting


# -- what drover adds -----------------------------------------------------------------------------


def test_health_is_running_for_min_healthy_time_or_a_passed_healthy_deadline() -> None:
    migrate = MigrateStrategy(min_healthy_time_s=10, healthy_deadline_s=300)
    started = alloc(0, modify_time=NOW - 9 * S, create_time=NOW - 20 * S)
    assert not has_health(started, migrate, NOW)
    assert health_due(started, migrate) == NOW + S
    assert has_health(started, migrate, NOW + S)
    stuck = alloc(1, client_status=ClientStatus.PENDING, create_time=NOW - 299 * S)
    assert not has_health(stuck, migrate, NOW)
    assert health_due(stuck, migrate) == NOW + S
    assert has_health(stuck, migrate, NOW + S), "unhealthy past its deadline still counts"


def test_a_marked_allocation_is_in_flight_until_its_replacement_is_healthy() -> None:
    """Nomad counts a marked allocation healthy until the scheduler stops it, so a second
    look in between would mark a second batch; here the first is in flight at once."""
    allocs = [alloc(i) for i in range(3)]
    first = handle_task_group(
        group(count=3), allocs, batch=False, on_draining_node=on_draining, now_ns=NOW
    )
    assert [a.id for a in first.drain] == ["a00"] and first.waiting
    allocs[0] = marked(allocs[0])
    again = handle_task_group(
        group(count=3), allocs, batch=False, on_draining_node=on_draining, now_ns=NOW
    )
    assert again.drain == () and again.waiting and again.healthy == 2
    # The scheduler stopped it and placed a replacement, which came up at NOW.
    replacement = alloc(3, node_id=RUNNING, create_time=NOW, modify_time=NOW)
    allocs = [stopped_complete(allocs[0]), *allocs[1:], replacement]
    blocked = handle_task_group(
        group(count=3), allocs, batch=False, on_draining_node=on_draining, now_ns=NOW
    )
    assert blocked.drain == () and blocked.recheck_at == NOW + 10 * S
    healthy = handle_task_group(
        group(count=3), allocs, batch=False, on_draining_node=on_draining, now_ns=NOW + 10 * S
    )
    assert [a.id for a in healthy.drain] == ["a01"]


def job_of(job_type: JobType, *groups: TaskGroup) -> Job:
    return Job(id="j", type=job_type, task_groups=groups)


def test_handle_job_paces_each_group_by_its_own_block_and_leaves_batch_and_system() -> None:
    web = group(count=4, max_parallel=2)
    api = dataclasses.replace(group(count=2), name="api")
    allocs = [alloc(i) for i in range(4)] + [
        alloc(i, id=f"api{i}", name=f"j.api[{i}]", task_group="api") for i in range(2)
    ]
    drained = handle_job(
        job_of(JobType.SERVICE, web, api), allocs, on_draining_node=on_draining, now_ns=NOW
    )
    assert sorted(a.id for a in drained.drain) == ["a00", "a01", "api0"] and drained.waiting
    for job_type in (JobType.BATCH, JobType.SYSTEM, JobType.SYSBATCH):
        other = handle_job(job_of(job_type, web), allocs, on_draining_node=on_draining, now_ns=NOW)
        assert other.drain == () and not other.waiting
