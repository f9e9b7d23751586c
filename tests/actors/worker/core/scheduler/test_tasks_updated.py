"""In place or destructive, ported from Nomad's scheduler/util_test.go (TestTasksUpdated,
TestTaskUpdatedAffinity, TestTaskUpdatedSpread), with the jobs built like Nomad's mock.Job:
meta at every level, so that a job or group meta change reaches every task."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from actors.worker.core.scheduler.tasks_updated import (
    Difference,
    combined_task_meta,
    tasks_updated,
)
from contracts import (
    Affinity,
    Constraint,
    DeviceRequest,
    EvalStatus,
    Job,
    JobType,
    Resources,
    Spread,
    SpreadTarget,
    Task,
    TaskGroup,
)

GROUP = "web"
DC1 = Affinity("${node.datacenter}", "dc1", "=", 100)
RACKS = Spread("${node.datacenter}", 100, (SpreadTarget("r1", 50), SpreadTarget("r2", 50)))


def mock_job(**changes: Any) -> Job:
    """Nomad's mock.Job, in what drover models."""
    task = Task(
        name="web",
        driver="exec",
        config={"command": "/bin/date"},
        env={"FOO": "bar"},
        meta={"foo": "bar"},
        resources=Resources(cpu=500, memory_mb=256),
    )
    group = TaskGroup(
        name=GROUP,
        count=10,
        tasks=(task,),
        meta={"elb_check_type": "http", "elb_check_interval": "30s", "elb_check_min": "3"},
        ephemeral_disk_mb=150,
    )
    job = Job(id="mock-service", task_groups=(group,), meta={"owner": "armon"})
    return dataclasses.replace(job, **changes)


def with_group(job: Job, **changes: Any) -> Job:
    return job.replace(task_groups=(dataclasses.replace(job.task_groups[0], **changes),))


def with_task(job: Job, **changes: Any) -> Job:
    group = job.task_groups[0]
    return with_group(job, tasks=(dataclasses.replace(group.tasks[0], **changes),))


def with_resources(job: Job, **changes: Any) -> Job:
    return with_task(
        job, resources=dataclasses.replace(job.task_groups[0].tasks[0].resources, **changes)
    )


def updated(a: Job, b: Job) -> bool:
    return tasks_updated(a, b, GROUP) is not None


def test_identical_jobs_are_not_updated() -> None:
    assert tasks_updated(mock_job(), mock_job(), GROUP) is None


J1 = mock_job()


@pytest.mark.parametrize(
    ("case", "changed", "label"),
    [
        ("j2 config", with_task(J1, config={"command": "/bin/other"}), "task config"),
        ("j3 task renamed", with_task(J1, name="foo"), "task deleted"),
        ("j4 driver", with_task(J1, driver="foo"), "task driver"),
        (
            "j5 one more task",
            with_group(J1, tasks=J1.task_groups[0].tasks * 2),
            "number of tasks",
        ),
        ("j7 env", with_task(J1, env={"FOO": "bar", "NEW_ENV": "NEW_VALUE"}), "task env"),
        ("j8 user", with_task(J1, user="foo"), "task user"),
        ("j10 task meta", with_task(J1, meta={"foo": "bar", "baz": "boom"}), "task meta"),
        ("j11 cpu", with_resources(J1, cpu=1337), "task cpu"),
        ("memory", with_resources(J1, memory_mb=512), "task memory"),
        ("j16 ephemeral disk", with_group(J1, ephemeral_disk_mb=300), "ephemeral disk"),
        (
            "j17 group meta",
            with_group(J1, meta={**J1.task_groups[0].meta, "j17_test": "roll_baby_roll"}),
            "task meta",
        ),
        (
            "j18 job meta",
            J1.replace(meta={"owner": "armon", "j18_test": "roll_baby_roll"}),
            "task meta",
        ),
        ("job meta value", J1.replace(meta={"owner": "somebody else"}), "task meta"),
        ("group affinity", with_group(J1, affinities=(DC1,)), "affinities"),
        ("task affinity", with_task(J1, affinities=(DC1,)), "affinities"),
        ("group spread", with_group(J1, spreads=(RACKS,)), "spreads"),
    ],
)
def test_a_change_tasks_were_started_with_is_destructive(
    case: str, changed: Job, label: str
) -> None:
    difference = tasks_updated(J1, changed, GROUP)
    assert difference is not None, case
    assert difference.label == label, case
    assert str(difference).startswith(f"{label} changed; before: ")


def test_a_device_count_change_is_destructive() -> None:
    """j11d1 / j11d2: the same device, asked for in another count."""
    one = with_resources(J1, devices=(DeviceRequest("gpu", 1),))
    two = with_resources(J1, devices=(DeviceRequest("gpu", 2),))
    assert tasks_updated(one, two, GROUP) == Difference(
        "task devices", (DeviceRequest("gpu", 1),), (DeviceRequest("gpu", 2),)
    )


def test_job_meta_is_part_of_every_tasks_meta() -> None:
    group = J1.task_groups[0]
    assert combined_task_meta(J1, group, group.tasks[0]) == {
        "owner": "armon",
        "elb_check_type": "http",
        "elb_check_interval": "30s",
        "elb_check_min": "3",
        "foo": "bar",
    }
    # A task's own key wins over its group's, which wins over the job's.
    shadowed = with_task(J1.replace(meta={"foo": "job"}), meta={"foo": "task"})
    shadowed = with_group(shadowed, meta={"foo": "group"})
    group = shadowed.task_groups[0]
    assert combined_task_meta(shadowed, group, group.tasks[0]) == {"foo": "task"}


def test_meta_moved_between_levels_unchanged_is_not_an_update() -> None:
    """What the task sees is compared, not where it was written."""
    moved = with_task(J1.replace(meta={}), meta={"foo": "bar", "owner": "armon"})
    assert tasks_updated(J1, moved, GROUP) is None
    # A shadowed job key changing is invisible to the task too.
    shadowed = with_task(J1, meta={"foo": "bar", "owner": "task"})
    assert tasks_updated(shadowed, shadowed.replace(meta={"owner": "other"}), GROUP) is None


def test_affinities_and_spreads_compare_at_every_level_together() -> None:
    """TestTaskUpdatedAffinity j5/j6 and TestTaskUpdatedSpread j5/j6: the same rule moved
    from the job to the group is no update."""
    assert (
        tasks_updated(J1.replace(affinities=(DC1,)), with_group(J1, affinities=(DC1,)), GROUP)
        is None
    )
    assert (
        tasks_updated(J1.replace(spreads=(RACKS,)), with_group(J1, spreads=(RACKS,)), GROUP) is None
    )
    # A job-level affinity added is destructive as well.
    assert updated(J1, J1.replace(affinities=(DC1,)))


@pytest.mark.parametrize(
    "changed",
    [
        J1.replace(priority=60),
        with_group(J1, count=3),
        with_group(J1, constraints=(Constraint("${attr.kernel.name}", "linux", "="),)),
        with_task(J1, constraints=(Constraint("${attr.kernel.name}", "linux", "="),)),
        J1.replace(datacenters=("dc2",)),
        with_task(J1, kill_timeout_s=30.0),
    ],
)
def test_changes_that_leave_the_tasks_alone_are_in_place(changed: Job) -> None:
    """Nomad checks constraints and datacenters on the node afterwards (allocUpdateFn)."""
    assert tasks_updated(J1, changed, GROUP) is None


def test_an_unknown_old_version_or_group_is_destructive() -> None:
    assert updated(J1, J1) is False
    assert tasks_updated(None, J1, GROUP) == Difference("task group", None, J1.task_groups[0])
    renamed = with_group(J1, name="api")
    assert updated(renamed, J1)


# -- through the scheduler --------------------------------------------------------------------


@pytest.mark.parametrize("job_type", [JobType.SERVICE, JobType.SYSTEM])
def test_a_job_meta_change_replaces_every_allocation(h: Any, build: Any, job_type: JobType) -> None:
    """The bug this port fixed: job-level meta was applied in place; in Nomad it is part of
    every task's environment, so the allocations are replaced."""
    h.nodes(3)
    count = 3 if job_type is JobType.SERVICE else 1
    job, ev = h.register(
        build.job("meta", build.group(count=count), type=job_type, meta={"a": "1"})
    )
    build.assert_eval(h.process(ev), EvalStatus.COMPLETE)
    before = {a.id for a in h.live_allocs(job)}
    assert len(before) == 3

    job2, ev = h.register(job.replace(meta={"a": "2"}))
    planner = h.process(ev)

    updates = planner.plans[0].annotations.desired_tg_updates["web"]
    assert (updates.destructive_update, updates.in_place_update) == (3, 0)
    live = h.live_allocs(job2)
    assert len(live) == 3 and before.isdisjoint(a.id for a in live)
    assert all(a.job_version == job2.version for a in live)

    # A priority change, by contrast, stays in place.
    _, ev = h.register(job2.replace(priority=70))
    updates = h.process(ev).plans[0].annotations.desired_tg_updates["web"]
    assert (updates.destructive_update, updates.in_place_update) == (0, 3)
