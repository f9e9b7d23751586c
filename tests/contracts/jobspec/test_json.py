"""Nomad JSON jobs: `{"Job": ...}` bodies, bare jobs, nanosecond durations, allow-lists."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import ValidationError
from contracts.job import (
    DEFAULT_MIGRATE,
    DEFAULT_SERVICE_RESCHEDULE,
    MigrateStrategy,
    ReschedulePolicy,
    UpdateStrategy,
)
from contracts.jobspec import parse_job_file, parse_json, parse_json_with_warnings
from contracts.jobspec.json_spec import _value, walk
from contracts.jobspec.schema import JOB, Field, Kind, Obj
from contracts.jobspec.where import JsonWhere, Problems

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
S = 1_000_000_000


def minimal(**job: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ID": "j",
        "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}],
    }
    body.update(job)
    return body


def problems_of(raw: Any) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse_json(raw if isinstance(raw, str | bytes) else json.dumps(raw))
    return info.value.problems


def test_web_json_matches_web_nomad() -> None:
    from_json = parse_job_file(EXAMPLES / "web.json")
    assert from_json == parse_job_file(EXAMPLES / "web.nomad")
    assert parse_json_with_warnings((EXAMPLES / "web.json").read_bytes())[1] == []


def test_web_json_canonical_values() -> None:
    job = parse_job_file(EXAMPLES / "web.json")
    frontend, api = job.task_groups
    assert api.count == 2  # "Count": null falls back to Scaling.Min
    assert api.reschedule_policy == ReschedulePolicy(3, 3600.0, 10.0, False)
    assert api.tasks[0].kill_timeout_s == 20.0  # nanoseconds -> seconds
    assert frontend.update == job.update == UpdateStrategy(2, 15.0, 2.0, 120.0)
    assert frontend.reschedule_policy == DEFAULT_SERVICE_RESCHEDULE


def test_migrate_in_nanoseconds_is_merged_from_the_job_into_its_groups() -> None:
    """Nomad's api Canonicalize: the job's Migrate under each group's, Nomad's defaults for
    the rest; a service group with none gets the default block."""
    groups = [
        {"Name": "a", "Tasks": [{"Name": "t", "Driver": "mock"}], "Migrate": {"MaxParallel": 2}},
        {"Name": "b", "Tasks": [{"Name": "t", "Driver": "mock"}], "Migrate": None},
    ]
    job = parse_json(minimal(TaskGroups=groups, Migrate={"MinHealthyTime": 3 * S}))
    a, b = (g.migrate for g in job.task_groups)
    assert a == MigrateStrategy(max_parallel=2, min_healthy_time_s=3.0)
    assert b == MigrateStrategy(min_healthy_time_s=3.0)
    assert parse_json(minimal()).task_groups[0].migrate == DEFAULT_MIGRATE
    assert parse_json(minimal(Type="batch")).task_groups[0].migrate is None
    bad = minimal(Migrate={"HealthCheck": "manual"})
    assert problems_of(bad) == ['$.Migrate.HealthCheck: "manual" is not one of checks, task_states']


def test_bare_wrapped_and_dict_inputs_agree() -> None:
    bare = minimal(Type="batch")
    wrapped = {"Job": bare, "PreserveCounts": True, "EnforceIndex": False}
    assert parse_json(json.dumps(bare)) == parse_json(json.dumps(wrapped).encode())
    assert parse_json(wrapped) == parse_json(bare)


def test_field_names_match_case_insensitively_like_go() -> None:
    job = parse_json(
        {
            "job": {
                "id": "x",
                "taskgroups": [{"name": "g", "tasks": [{"name": "t", "driver": "mock"}]}],
            }
        }
    )
    assert job.id == "x" and job.task_groups[0].tasks[0].driver == "mock"


def test_resources_devices_and_placement() -> None:
    task = {
        "Name": "t",
        "Driver": "mock",
        "Resources": {
            "CPU": 2000,
            "MemoryMB": 4096,
            "DiskMB": 10,
            "Devices": [
                {
                    "Name": "nvidia/gpu",
                    "Count": 2,
                    "Constraints": [
                        {"LTarget": "${device.attr.memory}", "RTarget": "40 GiB", "Operand": ">="}
                    ],
                    "Affinities": None,
                }
            ],
        },
        "Constraints": [{"LTarget": "${attr.kernel.name}", "RTarget": "linux", "Operand": ""}],
    }
    group = {"Name": "g", "Count": 3, "Tasks": [task], "EphemeralDisk": {"SizeMB": 300}}
    job = parse_json(minimal(TaskGroups=[group]))
    tg = job.task_groups[0]
    resources = tg.tasks[0].resources
    assert (resources.cpu, resources.memory_mb, resources.disk_mb) == (2000, 4096, 10)
    assert resources.devices[0].count == 2 and resources.devices[0].constraints[0].operand == ">="
    assert tg.tasks[0].constraints[0].operand == "="  # empty Operand means "="
    assert tg.ephemeral_disk_mb == 300


@pytest.mark.parametrize("disk", [{}, {"EphemeralDisk": None}, {"EphemeralDisk": {"SizeMB": None}}])
def test_ephemeral_disk_defaults_to_300_mb(disk: dict[str, Any]) -> None:
    """Nomad's api Canonicalize: a group without EphemeralDisk.SizeMB gets 300 MB."""
    task = {"Name": "t", "Driver": "mock"}
    job = parse_json(minimal(TaskGroups=[{"Name": "g", "Tasks": [task], **disk}]))
    assert job.task_groups[0].ephemeral_disk_mb == 300


def test_known_unmodelled_fields_warn_only_when_set() -> None:
    task = {
        "Name": "t",
        "Driver": "mock",
        "Services": [{"Name": "web"}],
        "Templates": None,
        "Leader": False,
        "KillSignal": "",
        "LogConfig": {"MaxFiles": 3},
    }
    group = {"Name": "g", "Networks": [], "RestartPolicy": None, "Tasks": [task]}
    body = minimal(
        TaskGroups=[group],
        Region="global",
        Multiregion={"Strategy": {"MaxParallel": 1}},
        ConsulToken=None,
        Status="running",
        Version=4,
        Update={"MaxParallel": 1, "HealthCheck": "checks", "AutoPromote": True},
        Migrate={"MaxParallel": 1},
    )
    job, warnings = parse_json_with_warnings({"Job": body})
    assert job.task_groups[0].tasks[0].driver == "mock"
    assert sorted(warnings) == [
        "$.Job.Multiregion: not supported by drover yet; ignored",
        "$.Job.TaskGroups[0].Tasks[0].LogConfig: not supported by drover yet; ignored",
        "$.Job.TaskGroups[0].Tasks[0].Services: not supported by drover yet; ignored",
    ]


def test_server_owned_fields_are_skipped() -> None:
    body = minimal(CreateIndex=10, ModifyIndex=12, JobModifyIndex=12, SubmitTime=1, Stable=True)
    job = parse_json(body)
    assert job.create_index == 0 and not job.stable


def test_stop_is_read() -> None:
    assert parse_json(minimal(Stop=True)).stop


# --- malformed input ----------------------------------------------------------------------------


def test_unknown_field_names_its_json_path() -> None:
    body = minimal()
    body["TaskGroups"][0]["Tasks"][0]["Resources"] = {"CPUU": 3}
    assert problems_of({"Job": body}) == [
        "$.Job.TaskGroups[0].Tasks[0].Resources.CPUU: unknown field"
    ]


def test_type_errors_name_path_and_value() -> None:
    body = minimal(Priority="high")
    body["TaskGroups"][0]["Count"] = "3"
    body["TaskGroups"][0]["Tasks"][0]["KillTimeout"] = "5s"
    assert sorted(problems_of({"Job": body})) == [
        '$.Job.Priority: must be an integer, got "high"',
        '$.Job.TaskGroups[0].Count: must be an integer, got "3"',
        '$.Job.TaskGroups[0].Tasks[0].KillTimeout: must be a duration in nanoseconds, got "5s"',
    ]


def test_invalid_json_is_a_validation_error() -> None:
    (problem,) = problems_of('{"Job": ')
    assert problem.startswith("$: not valid JSON")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda b: {"Job": b, "Bogus": 1}, "$.Bogus: unknown field"),
        (lambda b: [b], "$: must be a JSON object"),
        (lambda b: {**b, "Type": "cron"}, '$.Type: "cron" is not one of service, batch'),
        (lambda b: {**b, "TaskGroups": {"g": {}}}, "$.TaskGroups: must be a list"),
        (lambda b: {**b, "Datacenters": ["dc1", 2]}, "$.Datacenters[1]: must be a string, got 2"),
        (lambda b: {**b, "Meta": {"n": 1}}, "$.Meta.n: must be a string, got 1"),
        (lambda b: {**b, "AllAtOnce": "true"}, '$.AllAtOnce: must be a boolean, got "true"'),
    ],
)
def test_malformed_json(mutate: Any, expected: str) -> None:
    problems = problems_of(mutate(minimal()))
    assert any(expected in p for p in problems), problems


def test_scaling_requires_max() -> None:
    body = copy.deepcopy(minimal())
    body["TaskGroups"][0]["Scaling"] = {"Min": 1, "Max": None}
    assert problems_of(body) == ["$.TaskGroups[0].Scaling.Max: required field is missing"]


def test_every_problem_is_reported_at_once() -> None:
    body = minimal(Priority=True, NodePool=3)
    body["TaskGroups"][0]["Spreads"] = [{"Attribute": 1, "SpreadTarget": [{"Percent": -1}]}]
    problems = problems_of(body)
    assert len(problems) == 4
    assert (
        "$.TaskGroups[0].Spreads[0].SpreadTarget[0].Percent: must be a non-negative integer, got -1"
        in problems
    )


def test_scalars_of_the_exact_type_and_convertible_ones_read_alike() -> None:
    """Well-typed scalars take the walk's short path; the rest are converted or refused
    as before (a whole float is an integer, a boolean is neither a string nor a number)."""
    assert parse_json(minimal(Priority=70)).priority == 70
    assert parse_json(minimal(Priority=70.0)).priority == 70
    assert problems_of(minimal(ID=True)) == ["$.ID: must be a string, got true"]
    body = minimal()
    body["TaskGroups"][0]["Count"] = False
    assert problems_of(body) == ["$.TaskGroups[0].Count: must be an integer, got false"]


# Values of every kind the walk reads quickly, good and bad: each must read exactly as the
# full `_value` reads it (the same value, the same problems).
_SAMPLES: dict[Kind, list[Any]] = {
    Kind.OBJS: [[], [{}], {}, "x"],
    Kind.STRS: [[], ["a", "b"], ["a", 1], [True], "a", {}],
    Kind.STR_MAP: [{}, {"a": "b"}, {"a": 1}, {1: "b"}, [], "a"],
    Kind.ANY_MAP: [{}, {"a": [1, {"b": None}]}, [], "a"],
    Kind.POS_INT: [1, 7, 0, -1, 2.0, 2.5, True, "3"],
    Kind.NONNEG_INT: [0, 5, -1, 1.0, False, "0"],
    Kind.CHOICE: [],  # filled from each field's own choices below
    Kind.DURATION: [0, 30 * S, -S, 1.5, True, "30s"],
}


def test_values_the_walk_reads_quickly_read_as_the_full_walk_reads_them() -> None:
    fields = [
        spec
        for obj in _objects(JOB, {})
        for spec in obj.json_exact.values()
        if spec.kind in _SAMPLES
    ]
    assert {spec.kind for spec in fields} == set(_SAMPLES)
    for spec in fields:
        samples = _SAMPLES[spec.kind] or [*spec.choices, "nope", 1, None]
        for value in samples:
            if value is None:
                continue  # null is "not set", before any kind
            quick, full = Problems(), Problems()
            walked = walk({spec.json: copy.deepcopy(value)}, _holding(spec), JsonWhere(), quick)
            read = _value(spec, copy.deepcopy(value), JsonWhere().child(spec.json or ""), full)
            assert walked == ({} if read is None else {spec.key: read}), (spec, value)
            if read is not None:
                assert type(walked[spec.key]) is type(read), (spec, value)
            assert (quick.errors, quick.warnings) == (full.errors, full.warnings), (spec, value)


def _objects(obj: Obj, seen: dict[int, Obj]) -> list[Obj]:
    """`obj` and every object schema under it."""
    if id(obj) not in seen:
        seen[id(obj)] = obj
        for spec in obj.json_exact.values():
            if spec.obj is not None:
                _objects(spec.obj, seen)
    return list(seen.values())


def _holding(spec: Field) -> Obj:
    """An object schema with `spec` as its one field."""
    return Obj("holder", fields=(spec,))


def test_empty_containers_and_absent_ones_make_the_same_job() -> None:
    task = {"Name": "t", "Driver": "mock", "Config": {}, "Env": {}, "Meta": {}}
    group = {"Name": "g", "Tasks": [task], "Constraints": [], "Affinities": [], "Meta": {}}
    with_empties = minimal(Datacenters=[], Constraints=[], Spreads=[], Meta={}, TaskGroups=[group])
    assert parse_json(json.dumps(with_empties)) == parse_json(json.dumps(minimal()))
