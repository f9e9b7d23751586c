"""The `periodic` and `parameterized` blocks and a task's `dispatch_payload` in HCL and Nomad
JSON, and their checks."""

from __future__ import annotations

import pytest

from actors.api.core.shapes import job_to_nomad
from contracts import ValidationError
from contracts.jobspec import parse_hcl, parse_json, parse_json_with_warnings
from contracts.launch import (
    DispatchPayload,
    DispatchPayloadConfig,
    ParameterizedConfig,
    PeriodicConfig,
    dispatch_file_escapes,
)

TASK = 'group "g" {\n task "t" {\n driver = "mock"\n }\n }'


def hcl(job_type: str, block: str) -> str:
    return f'job "report" {{\n type = "{job_type}"\n {block}\n {TASK}\n}}'


def json_job(**fields: object) -> dict[str, object]:
    group = {"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock"}]}
    return {"Job": {"ID": "report", "Type": "batch", "TaskGroups": [group], **fields}}


def test_hcl_periodic_block() -> None:
    job = parse_hcl(
        hcl(
            "batch",
            'periodic {\n crons = ["*/15 * * * *"]\n prohibit_overlap = true\n'
            ' time_zone = "Europe/Berlin"\n }',
        )
    )
    assert job.periodic == PeriodicConfig(("*/15 * * * *",), True, "Europe/Berlin", True)
    assert job.is_periodic_active and job.is_template


def test_hcl_single_cron_and_disabled() -> None:
    job = parse_hcl(hcl("sysbatch", 'periodic {\n cron = "@daily"\n enabled = false\n }'))
    assert job.periodic == PeriodicConfig(("@daily",), enabled=False)
    assert job.is_periodic and not job.is_periodic_active


def test_hcl_parameterized_block() -> None:
    job = parse_hcl(
        hcl(
            "batch",
            'parameterized {\n payload = "required"\n meta_required = ["input"]\n'
            ' meta_optional = ["level"]\n }',
        )
    )
    assert job.parameterized == ParameterizedConfig(
        DispatchPayload.REQUIRED, ("input",), ("level",)
    )
    assert job.is_parameterized and not job.is_periodic


def test_nomad_json_blocks_round_trip_through_the_api_shape() -> None:
    body = json_job(
        Periodic={"Spec": "", "Specs": ["0 * * * *", "30 8 * * *"], "SpecType": "cron"},
        ParameterizedJob={"Payload": "forbidden", "MetaRequired": None, "MetaOptional": ["x"]},
    )
    job, warnings = parse_json_with_warnings(body)
    assert warnings == []
    assert job.periodic is not None and job.periodic.crons == ("0 * * * *", "30 8 * * *")
    assert job.parameterized == ParameterizedConfig(DispatchPayload.FORBIDDEN, (), ("x",))
    wire = job_to_nomad(job)
    assert wire["Periodic"]["Specs"] == ["0 * * * *", "30 8 * * *"]
    assert wire["Periodic"]["SpecType"] == "cron" and wire["Periodic"]["TimeZone"] == "UTC"
    assert wire["ParameterizedJob"]["Payload"] == "forbidden"
    assert parse_json({"Job": wire}) == job


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (
            {"Type": "service", "Periodic": {"Spec": "@daily"}},
            'periodic can only be used with "batch"',
        ),
        (
            {"Type": "system", "ParameterizedJob": {}},
            'parameterized can only be used with "batch"',
        ),
        ({"Periodic": {"Spec": "*/5 * *"}}, "Invalid cron spec '*/5 * *'"),
        ({"Periodic": {}}, "a cron spec is required"),
        ({"Periodic": {"Spec": "@daily", "TimeZone": "Nowhere/Land"}}, "Invalid time zone"),
        ({"Periodic": {"Spec": "@daily", "SpecType": "rrule"}}, "SpecType"),
        ({"ParameterizedJob": {"Payload": "maybe"}}, "Payload"),
        (
            {"ParameterizedJob": {"MetaRequired": ["a"], "MetaOptional": ["a"]}},
            "both required and optional",
        ),
    ],
)
def test_bad_blocks_name_the_field(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_json(json_job(**fields))
    assert problem in str(raised.value)


def test_a_tasks_dispatch_payload_block_in_hcl_and_nomad_json() -> None:
    task = 'group "g" {\n task "t" {\n driver = "raw_exec"\n'
    task += ' dispatch_payload {\n file = "input/data.txt"\n }\n }\n }'
    text = f'job "report" {{\n type = "batch"\n parameterized {{}}\n {task}\n}}'
    job, warnings = parse_json_with_warnings(job_to_nomad(parse_hcl(text)))
    assert warnings == []  # modelled now, no longer "not supported by drover yet"
    assert job.task_groups[0].tasks[0].dispatch_payload == DispatchPayloadConfig("input/data.txt")
    wire = job_to_nomad(job)["TaskGroups"][0]["Tasks"][0]
    assert wire["DispatchPayload"] == {"File": "input/data.txt"}  # Nomad's JSON
    plain = parse_json(json_job())
    assert plain.task_groups[0].tasks[0].dispatch_payload is None
    assert job_to_nomad(plain)["TaskGroups"][0]["Tasks"][0]["DispatchPayload"] is None


@pytest.mark.parametrize(
    ("file", "escapes"),
    [
        ("input.txt", False),
        ("a/b/c.txt", False),
        ("../task-file", False),  # the task's folder: still the allocation's
        ("../../alloc/shared", False),
        ("/etc/passwd", False),  # taken relative to local/, as Go's filepath.Join takes it
        ("../../../etc/passwd", True),
        ("../..", True),
    ],
)
def test_a_payload_file_may_not_leave_the_allocation_folder(file: str, escapes: bool) -> None:
    assert dispatch_file_escapes(file) is escapes
    group = {
        "Name": "g",
        "Tasks": [{"Name": "t", "Driver": "mock", "DispatchPayload": {"File": file}}],
    }
    body = {"Job": {"ID": "report", "Type": "batch", "TaskGroups": [group]}}
    if not escapes:
        assert parse_json(body).task_groups[0].tasks[0].dispatch_payload == DispatchPayloadConfig(
            file
        )
        return
    with pytest.raises(ValidationError) as raised:
        parse_json(body)
    assert f'dispatch_payload file "{file}" escapes the allocation directory' in str(raised.value)
    assert 'task "t"' in str(raised.value)


def test_a_bad_dispatch_payload_block_names_the_field() -> None:
    group = {"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock", "DispatchPayload": "x"}]}
    with pytest.raises(ValidationError) as raised:
        parse_json({"Job": {"ID": "report", "Type": "batch", "TaskGroups": [group]}})
    assert "DispatchPayload" in str(raised.value)
