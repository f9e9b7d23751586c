"""The server's job limits: each problem names the place, the value and the limit."""

from __future__ import annotations

import pytest

from contracts.errors import ValidationError
from contracts.job import Job, Task, TaskGroup
from contracts.jobspec import canonicalize, parse_json, validate
from contracts.jobspec.limits import DEFAULT_LIMITS, JobLimits, limit_problems, size_problem

TASK = Task(name="t", driver="mock")


def job(*groups: TaskGroup, meta: dict[str, str] | None = None) -> Job:
    return canonicalize(Job(id="x", task_groups=groups, meta=meta or {}))


def test_defaults_hold_a_large_sound_job() -> None:
    big = job(TaskGroup("g", count=1_000_000, tasks=(TASK,)))
    assert limit_problems(big) == []
    validate(big)


def test_every_limit_names_the_place_value_and_limit() -> None:
    limits = JobLimits(max_count=10, max_groups=2, max_tasks=2, max_meta_bytes=8)
    tasks = tuple(Task(name=f"t{i}", driver="mock") for i in range(3))
    groups = (
        TaskGroup("a", count=11, tasks=(TASK,), meta={"k": "v"}),
        TaskGroup("b", tasks=tasks),
        TaskGroup("c", tasks=(TASK,)),
    )
    assert limit_problems(job(*groups, meta={"owner": "me"}), limits) == [
        'job "x": 3 task groups, above the limit of 2',
        'job "x" > group "a": count 11 is above the limit of 10',
        'job "x" > group "b": 3 tasks, above the limit of 2',
        'job "x": meta of 9 bytes (job, groups and tasks), above the limit of 8',
    ]
    assert size_problem(5_000_000) == "Job: 5000000 bytes, above the limit of 4194304"
    assert size_problem(100) is None


def test_parsing_applies_the_limits_given() -> None:
    body = {"Job": {"ID": "x", "TaskGroups": [{"Name": "g", "Count": 50, "Tasks": [
        {"Name": "t", "Driver": "mock"}]}]}}  # fmt: skip
    assert parse_json(body).task_groups[0].count == 50
    from contracts.jobspec import parse_json_with_warnings

    with pytest.raises(ValidationError, match="count 50 is above the limit of 20"):
        parse_json_with_warnings(body, JobLimits(max_count=20))


def test_limits_are_positive() -> None:
    with pytest.raises(ValueError, match="max_tasks: expected a number >= 1, got 0"):
        JobLimits(max_tasks=0)
    assert DEFAULT_LIMITS.max_count == 1_000_000
