"""Which registrations the autoscaler's replica decodes whole (core/job_filter.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from actors.autoscaler.core.job_filter import may_bring_policy, wants_job
from contracts import Job, Resources, Task, TaskGroup
from contracts.codec import to_wire
from contracts.scaling import ScalingEvent, ScalingPolicy
from contracts.state_log import (
    GroupScalingEvent,
    JobImage,
    LogEntry,
    RestoreJobs,
    UpsertJob,
    encode_entry,
)

TASK = Task("t", "mock", {}, resources=Resources(100, 64))


def change(job: Job, **kw: Any) -> dict[str, Any]:
    wire: dict[str, Any] = to_wire(UpsertJob(job, **kw))
    return wire


def job(*, type: str = "service", scaling: ScalingPolicy | None = None) -> Job:
    groups = (TaskGroup("a", 1, tasks=(TASK,)), TaskGroup("b", 1, tasks=(TASK,), scaling=scaling))
    return Job("web", "web", type=type, task_groups=groups)


def nobody(namespace: str, job_id: str) -> bool:
    return False


def test_a_plain_service_job_is_read_as_its_evaluations() -> None:
    assert not wants_job(change(job()), nobody)
    assert not wants_job(change(job(type="batch")), nobody)


@pytest.mark.parametrize("kind", ["system", "sysbatch"])
def test_system_jobs_are_read_whole(kind: str) -> None:
    assert wants_job(change(job(type=kind)), nobody)


def test_a_job_with_a_policy_in_any_group_is_read_whole() -> None:
    assert wants_job(change(job(scaling=ScalingPolicy(min=1, max=3))), nobody)


def test_a_held_job_is_read_whole_so_that_a_removed_policy_is_seen() -> None:
    assert wants_job(change(job()), lambda ns, job_id: (ns, job_id) == ("default", "web"))
    assert not wants_job(change(job()), lambda ns, job_id: (ns, job_id) == ("other", "web"))


def test_bad_shapes_are_read_whole_for_the_decoder_to_name_the_field() -> None:
    for bad in ({}, {"Job": []}, {"Job": {"ID": 5}}, {"Job": {"ID": "x", "TaskGroups": 3}}):
        assert wants_job(bad, nobody)
    assert wants_job({"Job": {"ID": "x", "TaskGroups": [None]}}, nobody)


def test_a_registration_with_scaling_events_is_read_whole() -> None:
    events = (GroupScalingEvent("a", ScalingEvent(time=1, message="scaled")),)
    assert wants_job(change(job(), scaling_events=events, keep_version=True), nobody)


def encoded(change: Any) -> bytes:
    return encode_entry(LogEntry(7, 1, change))


def test_a_dozing_autoscaler_wakes_for_a_scaling_block_and_for_nothing_else() -> None:
    with_policy = job(scaling=ScalingPolicy(min=1, max=3))
    assert may_bring_policy(encoded(UpsertJob(with_policy)))
    assert may_bring_policy(encoded(RestoreJobs((JobImage(with_policy, (with_policy,), ()),))))
    assert not may_bring_policy(encoded(UpsertJob(job())))
    assert not may_bring_policy(encoded(UpsertJob(job(type="system"))))
    # A meta value named so is a string; scaling events are another key.
    meta = dataclasses.replace(job(), meta={"Scaling": "on"})
    assert not may_bring_policy(encoded(UpsertJob(meta)))
    events = (GroupScalingEvent("a", ScalingEvent(time=1, message="scaled")),)
    assert not may_bring_policy(encoded(UpsertJob(job(), scaling_events=events)))
