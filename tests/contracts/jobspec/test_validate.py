"""Semantic validation (Nomad's Job/TaskGroup/Task Validate) and canonicalize on records."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.constraints import Affinity, Constraint, Spread, SpreadTarget
from contracts.errors import ValidationError
from contracts.job import (
    DEFAULT_BATCH_RESCHEDULE,
    DEFAULT_MIGRATE,
    DEFAULT_SERVICE_RESCHEDULE,
    Job,
    JobType,
    MigrateStrategy,
    ReschedulePolicy,
    Task,
    TaskGroup,
    UpdateStrategy,
)
from contracts.jobspec import canonicalize, parse_hcl, validate
from contracts.resources import DeviceRequest, Resources
from contracts.scaling import ScalingPolicy

TASK = Task(name="t", driver="mock")


def job(*groups: TaskGroup, **fields: Any) -> Job:
    """A canonical job "x"; with no groups, one sound group "g"."""
    default = (TaskGroup("g", tasks=(TASK,)),)
    return canonicalize(Job(id="x", task_groups=groups or default, **fields))


def problems(j: Job) -> list[str]:
    with pytest.raises(ValidationError) as info:
        validate(j)
    return info.value.problems


def test_a_sound_job_passes() -> None:
    validate(job())


def test_count_above_scaling_max() -> None:
    tg = TaskGroup("web", count=40, scaling=ScalingPolicy(min=1, max=30), tasks=(TASK,))
    assert problems(job(tg)) == ['job "x" > group "web": count 40 is above scaling max 30']


def test_a_count_beyond_the_limit_is_named_with_the_limit() -> None:
    tg = TaskGroup("g", count=1_000_000_000, tasks=(TASK,))
    assert problems(job(tg)) == [
        'job "x" > group "g": count 1000000000 is above the limit of 1000000'
    ]
    validate(job(TaskGroup("g", count=1_000_000, tasks=(TASK,))))


def test_scaling_min_above_max_is_named() -> None:
    tg = TaskGroup("g", count=4, scaling=ScalingPolicy(min=5, max=3), tasks=(TASK,))
    found = problems(job(tg))
    assert 'job "x" > group "g": scaling min 5 is above max 3' in found
    assert 'job "x" > group "g": count 4 is above scaling max 3' in found
    assert 'job "x" > group "g": count 4 is below scaling min 5' in found


def test_priority_out_of_range() -> None:
    assert problems(job(priority=200)) == ['job "x": priority 200 is out of range 1..100']


def test_unknown_type_on_a_record() -> None:
    j = job().replace(type="cron")
    assert problems(j) == ['job "x": type "cron" is not one of service, batch, system, sysbatch']


@pytest.mark.parametrize(
    ("job_id", "expected"),
    [
        ("", 'job "": ID is required'),
        ("my job", 'job "my job": ID must not contain spaces'),
        ("a\x00b", "must not contain a null character"),
    ],
)
def test_bad_job_ids(job_id: str, expected: str) -> None:
    found = problems(job().replace(id=job_id, name="n"))
    assert any(expected in p for p in found), found


def test_duplicate_groups_and_tasks_and_empty_groups() -> None:
    twice = TaskGroup("g", tasks=(TASK, TASK))
    found = problems(job(twice, TaskGroup("g")))
    assert found == [
        'job "x": group "g" is defined 2 times',
        'job "x" > group "g": task "t" is defined 2 times',
        'job "x" > group "g": has no tasks',
    ]


def test_job_without_groups() -> None:
    assert problems(Job(id="x", name="x")) == ['job "x": has no task groups']


def test_task_without_driver_and_bad_resources() -> None:
    bad = Task(
        name="api",
        resources=Resources(cpu=0, memory_mb=5, disk_mb=-1, devices=(DeviceRequest("gpu", 0),)),
    )
    assert problems(job(TaskGroup("g", tasks=(bad,)))) == [
        'job "x" > group "g" > task "api": driver is required',
        'job "x" > group "g" > task "api": resources.cpu 0 must be at least 1 MHz',
        'job "x" > group "g" > task "api": resources.memory 5 must be at least 10 MB',
        'job "x" > group "g" > task "api": resources.disk -1 must not be negative',
        'job "x" > group "g" > task "api": resources.device "gpu": count 0 must be at least 1',
    ]


def test_negative_count() -> None:
    tg = TaskGroup("g", count=-1, tasks=(TASK,))
    assert problems(job(tg)) == ['job "x" > group "g": count -1 must not be negative']


def test_system_job_rejects_scaling_affinity_and_spread() -> None:
    tg = TaskGroup(
        "g",
        scaling=ScalingPolicy(max=1),
        affinities=(Affinity("${node.class}", "a", "=", 50),),
        spreads=(Spread("${node.datacenter}"),),
        tasks=(TASK,),
    )
    assert problems(job(tg, type=JobType.SYSTEM)) == [
        'job "x" > group "g": system jobs may not have a scaling block',
        'job "x" > group "g": system jobs may not have an affinity block',
        'job "x" > group "g": system jobs may not have a spread block',
    ]


def test_constraint_checks() -> None:
    constraints = (
        Constraint("${attr.a}", "b", "~="),
        Constraint("${attr.a}", "(", "regexp"),
        Constraint("", "b", "="),
        Constraint("${attr.a}", "", "!="),
        Constraint("${attr.a}", "yes", "is_set"),
        Constraint("${meta.rack}", "0", "distinct_property"),
        Constraint("", "", "distinct_hosts"),  # needs neither side
    )
    found = problems(job(TaskGroup("g", constraints=constraints, tasks=(TASK,))))
    where = 'job "x" > group "g": '
    assert found[0] == where + 'constraint[0]: unknown operator "~="'
    assert found[1].startswith(where + 'constraint[1]: regexp "(" does not compile')
    assert found[2:] == [
        where + 'constraint[2]: operator "=" needs an attribute',
        where + 'constraint[3]: operator "!=" needs a value',
        where + 'constraint[4]: operator "is_set" takes no value, got "yes"',
        where + 'constraint[5]: distinct_property limit "0" must be 1 or more',
    ]


def test_affinity_weights_and_operators() -> None:
    affinities = (
        Affinity("${attr.a}", "b", "=", 0),
        Affinity("${attr.a}", "b", "=", 150),
        Affinity("${attr.a}", "", "distinct_hosts", -100),
    )
    assert problems(job(TaskGroup("g", affinities=affinities, tasks=(TASK,)))) == [
        'job "x" > group "g": affinity[0]: weight must not be zero',
        'job "x" > group "g": affinity[1]: weight 150 is out of range -100..100',
        'job "x" > group "g": affinity[2]: unknown operator "distinct_hosts"',
    ]


def test_spread_percent_sum_and_duplicates() -> None:
    spread = Spread(
        "${node.datacenter}",
        50,
        (SpreadTarget("dc1", 70), SpreadTarget("dc2", 40), SpreadTarget("dc2", 0)),
    )
    assert problems(job(TaskGroup("g", spreads=(spread,), tasks=(TASK,)))) == [
        'job "x" > group "g": spread[0]: target "dc2" is defined 2 times',
        'job "x" > group "g": spread[0]: target percentages add up to 110, more than 100',
    ]


def test_update_and_reschedule_checks() -> None:
    tg = TaskGroup(
        "g",
        update=UpdateStrategy(max_parallel=-1, min_healthy_time_s=60, healthy_deadline_s=30),
        reschedule_policy=ReschedulePolicy(attempts=2, interval_s=0, unlimited=False),
        tasks=(TASK,),
    )
    assert problems(job(tg)) == [
        'job "x" > group "g": update.max_parallel -1 must not be negative',
        'job "x" > group "g": reschedule.interval must be set when attempts is 2',
    ]
    tg2 = TaskGroup(
        "g", update=UpdateStrategy(min_healthy_time_s=60, healthy_deadline_s=30), tasks=(TASK,)
    )
    assert problems(job(tg2)) == [
        'job "x" > group "g": update.min_healthy_time 60s must be less than healthy_deadline 30s'
    ]


def test_migrate_checks_and_only_service_jobs_may_have_one() -> None:
    """Nomad's MigrateStrategy.Validate, and TaskGroup.Validate's "does not allow"."""
    bad = MigrateStrategy(max_parallel=-1, min_healthy_time_s=60, healthy_deadline_s=30)
    assert problems(job(TaskGroup("g", migrate=bad, tasks=(TASK,)))) == [
        'job "x" > group "g": migrate.max_parallel -1 must not be negative',
        'job "x" > group "g": migrate.min_healthy_time 60s must be less than healthy_deadline 30s',
    ]
    manual = MigrateStrategy(health_check="manual")
    assert problems(job(TaskGroup("g", migrate=manual, tasks=(TASK,)))) == [
        'job "x" > group "g": migrate.health_check "manual" is not one of checks, task_states'
    ]
    batch = job(TaskGroup("g", migrate=MigrateStrategy(), tasks=(TASK,)), type=JobType.BATCH)
    assert problems(batch) == [
        'job "x" > group "g": job type "batch" does not allow a migrate block'
    ]
    validate(job(TaskGroup("g", migrate=MigrateStrategy(max_parallel=0), tasks=(TASK,))))


def test_device_level_constraints_are_checked() -> None:
    device = DeviceRequest(
        "nvidia/gpu", 1, constraints=(Constraint("${device.attr.memory}", "", ">="),)
    )
    task = Task("t", driver="mock", resources=Resources(devices=(device,)))
    assert problems(job(TaskGroup("g", tasks=(task,)))) == [
        'job "x" > group "g" > task "t" > device "nvidia/gpu": constraint[0]: operator ">=" needs '
        "a value"
    ]


def test_all_problems_are_collected_from_hcl() -> None:
    text = """job "x" {
      priority = 200
      group "web" {
        count = 40
        scaling {
          min = 5
          max = 30
        }
        task "a" { }
      }
    }"""
    with pytest.raises(ValidationError) as info:
        parse_hcl(text)
    assert info.value.problems == [
        'job "x": priority 200 is out of range 1..100',
        'job "x" > group "web": count 40 is above scaling max 30',
        'job "x" > group "web" > task "a": driver is required',
    ]


# --- canonicalize ------------------------------------------------------------------------------


def test_canonicalize_fills_nomad_defaults() -> None:
    raw = Job(
        id="api",
        name="",
        namespace="",
        node_pool="",
        priority=0,
        datacenters=(),
        update=UpdateStrategy(max_parallel=3),
        task_groups=(
            TaskGroup("a", count=2, scaling=ScalingPolicy(max=5), tasks=(TASK,)),
            TaskGroup("b", update=UpdateStrategy(canary=1), tasks=(TASK,)),
        ),
    )
    j = canonicalize(raw)
    assert (j.name, j.namespace, j.node_pool, j.priority) == ("api", "default", "default", 50)
    assert j.datacenters == ("*",)
    a, b = j.task_groups
    assert a.scaling is not None and a.scaling.min == 2
    assert a.update == UpdateStrategy(max_parallel=3)
    assert b.update == UpdateStrategy(canary=1)
    assert a.reschedule_policy == DEFAULT_SERVICE_RESCHEDULE
    # Nomad gives every service group its default migrate block.
    assert a.migrate == b.migrate == DEFAULT_MIGRATE
    assert canonicalize(j) == j


def test_canonicalize_reschedule_by_type() -> None:
    group = TaskGroup("g", tasks=(TASK,))
    assert (
        job(group, type=JobType.BATCH).task_groups[0].reschedule_policy == DEFAULT_BATCH_RESCHEDULE
    )
    assert job(group, type=JobType.SYSTEM).task_groups[0].reschedule_policy is None
    assert job(group, type=JobType.BATCH).task_groups[0].migrate is None
    sysbatch = job(group, type=JobType.SYSBATCH).task_groups[0].reschedule_policy
    assert sysbatch is not None and sysbatch.attempts == 0 and not sysbatch.unlimited
