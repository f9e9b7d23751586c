"""Nomad HCL job files: the examples, Nomad's defaults, shorthands, warnings and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.constraints import Affinity, Constraint
from contracts.errors import ValidationError
from contracts.job import (
    DEFAULT_BATCH_RESCHEDULE,
    DEFAULT_SERVICE_RESCHEDULE,
    JobType,
    MigrateStrategy,
    ReschedulePolicy,
    UpdateStrategy,
)
from contracts.jobspec import parse_hcl, parse_hcl_with_warnings, parse_job_file
from contracts.jobspec.values import parse_go_duration
from contracts.resources import DeviceRequest, Resources

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def problems_of(text: str) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse_hcl(text)
    return info.value.problems


def job_with(group_body: str, job_body: str = "") -> str:
    return f'job "j" {{\n{job_body}\ngroup "g" {{\n{group_body}\n}}\n}}\n'


TASK = 'task "t" {\n driver = "mock"\n}'


# --- examples ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "web.nomad",
        "batch.nomad",
        "system.nomad",
        "gpu.nomad",
        "autoscale.nomad",
        "periodic.nomad",
        "parameterized.nomad",
        "payload.nomad",
    ],
)
def test_examples_parse_without_warnings(name: str) -> None:
    job = parse_job_file(EXAMPLES / name)
    assert job.task_groups
    assert parse_hcl_with_warnings((EXAMPLES / name).read_text())[1] == []


def test_web_example_is_canonicalised_like_nomad() -> None:
    job = parse_job_file(EXAMPLES / "web.nomad")
    assert (job.id, job.name, job.type, job.priority) == ("web", "web", JobType.SERVICE, 60)
    assert (job.namespace, job.node_pool, job.datacenters) == ("default", "default", ("dc1", "dc2"))
    assert job.constraints == (Constraint("${attr.kernel.name}", "linux", "="),)
    assert job.meta == {"team": "frontend"}
    frontend, api = job.task_groups
    # count defaults to scaling.min when a scaling block sets min.
    assert frontend.count == 3 and frontend.scaling is None
    assert api.count == 2
    assert api.scaling is not None and (api.scaling.min, api.scaling.max) == (2, 10)
    assert api.scaling.enabled and api.scaling.type == "horizontal"
    assert api.scaling.policy["cooldown"] == "1m"
    assert api.scaling.policy["check"][0]["avg_cpu"]["strategy"] == [
        {"target-value": {"target": 70}}
    ]
    # The job's update block is copied into groups without one, merged under ones with one.
    job_update = UpdateStrategy(
        max_parallel=2, stagger_s=15.0, min_healthy_time_s=2.0, healthy_deadline_s=120.0
    )
    assert job.update == job_update
    assert frontend.update == job_update
    assert api.update == UpdateStrategy(
        max_parallel=1, stagger_s=15.0, min_healthy_time_s=2.0, healthy_deadline_s=120.0, canary=1
    )
    assert frontend.reschedule_policy == DEFAULT_SERVICE_RESCHEDULE
    assert api.reschedule_policy == ReschedulePolicy(3, 3600.0, 10.0, False)
    assert api.ephemeral_disk_mb == 500
    assert api.constraints == (Constraint("", "true", "distinct_hosts"),)
    assert frontend.affinities == (Affinity("${node.class}", "web", "=", 70),)
    (spread,) = frontend.spreads
    assert spread.weight == 100
    assert [(t.value, t.percent) for t in spread.spread_target] == [("dc1", 60), ("dc2", 40)]
    nginx = frontend.tasks[0]
    assert (nginx.driver, nginx.config, nginx.env) == ("mock", {"run_for": "1h"}, {"PORT": "8080"})
    assert nginx.resources == Resources(cpu=250, memory_mb=128)
    assert nginx.kill_timeout_s == 5.0
    assert api.tasks[0].kill_timeout_s == 20.0


def test_migrate_blocks_merge_from_the_job_with_nomads_defaults() -> None:
    text = job_with(
        f'migrate {{\n min_healthy_time = "1s"\n health_check = "task_states"\n}}\n{TASK}',
        'migrate {\n max_parallel = 2\n healthy_deadline = "1m"\n}',
    )
    (group,) = parse_hcl(text).task_groups
    assert group.migrate == MigrateStrategy(
        max_parallel=2, health_check="task_states", min_healthy_time_s=1.0, healthy_deadline_s=60.0
    )
    (default,) = parse_hcl(job_with(TASK)).task_groups
    assert default.migrate == MigrateStrategy(1, "checks", 10.0, 300.0)
    assert problems_of(job_with(f"migrate {{}}\n{TASK}", 'type = "system"')) == [
        'job "j" > group "g": job type "system" does not allow a migrate block'
    ]


def test_batch_example_gets_batch_defaults() -> None:
    job = parse_job_file(EXAMPLES / "batch.nomad")
    assert job.type is JobType.BATCH
    (group,) = job.task_groups
    assert group.reschedule_policy == DEFAULT_BATCH_RESCHEDULE
    assert group.update is None and group.migrate is None
    render, upload = group.tasks
    assert render.config == {"run_for": "30s", "exit_code": 0}
    assert upload.resources == Resources(cpu=100, memory_mb=300)  # Nomad's task defaults


def test_system_example_has_no_reschedule_policy() -> None:
    job = parse_job_file(EXAMPLES / "system.nomad")
    assert job.type is JobType.SYSTEM and job.datacenters == ("*",)
    (group,) = job.task_groups
    assert group.count == 1 and group.reschedule_policy is None


def test_gpu_example_device_request() -> None:
    job = parse_job_file(EXAMPLES / "gpu.nomad")
    (device,) = job.task_groups[0].tasks[0].resources.devices
    assert device == DeviceRequest(
        name="nvidia/gpu",
        count=2,
        constraints=(Constraint("${device.attr.memory}", "40 GiB", ">="),),
        affinities=(Affinity("${device.model}", "H100", "=", 50),),
    )
    assert job.task_groups[0].tasks[0].resources.memory_mb == 16384


# --- defaults and shorthands ------------------------------------------------------------------


def test_minimal_job_defaults() -> None:
    job = parse_hcl(f'job "tiny" {{\n group "g" {{\n {TASK}\n }}\n}}')
    assert (job.name, job.type, job.priority, job.namespace) == ("tiny", "service", 50, "default")
    assert job.datacenters == ("*",) and job.node_pool == "default" and job.update is None
    (group,) = job.task_groups
    # Nomad's Canonicalize gives a group without an ephemeral disk 300 MB.
    assert group.count == 1 and group.ephemeral_disk_mb == 300
    (device_less,) = group.tasks
    assert device_less.resources == Resources(cpu=100, memory_mb=300, disk_mb=0)


def test_ephemeral_disk_defaults_to_300_mb_unless_sized() -> None:
    sized = parse_hcl(job_with(f"ephemeral_disk {{\n size = 50\n }}\n{TASK}"))
    unsized = parse_hcl(job_with(f"ephemeral_disk {{\n sticky = true\n }}\n{TASK}"))
    assert sized.task_groups[0].ephemeral_disk_mb == 50
    assert unsized.task_groups[0].ephemeral_disk_mb == 300
    # The group asks for its disk on top of its tasks' (none here).
    assert unsized.task_groups[0].combined_resources().disk_mb == 300


def test_scaling_min_defaults_to_count() -> None:
    job = parse_hcl(job_with(f"count = 4\nscaling {{\n max = 9\n }}\n{TASK}"))
    scaling = job.task_groups[0].scaling
    assert scaling is not None and (scaling.min, scaling.max, scaling.enabled) == (4, 9, True)


def test_device_count_defaults_to_one() -> None:
    task = 'task "t" {\n driver = "mock"\n resources {\n device "gpu" {}\n }\n}'
    (device,) = parse_hcl(job_with(task)).task_groups[0].tasks[0].resources.devices
    assert (device.name, device.count) == ("gpu", 1)


def test_partial_reschedule_block_completes_from_type_default() -> None:
    job = parse_hcl(job_with(f"reschedule {{\n attempts = 5\n }}\n{TASK}", 'type = "batch"'))
    assert job.task_groups[0].reschedule_policy == ReschedulePolicy(5, 86400.0, 5.0, False)


def test_job_reschedule_is_merged_into_groups() -> None:
    job = parse_hcl(job_with(TASK, 'reschedule {\n delay = "1m"\n unlimited = true\n }'))
    assert job.task_groups[0].reschedule_policy == ReschedulePolicy(0, 0.0, 60.0, True)


def test_constraint_shorthands() -> None:
    body = """
    constraint { distinct_hosts = true }
    constraint {
      attribute = "${attr.os.version}"
      version   = ">= 1.2"
    }
    constraint {
      attribute = "${node.unique.name}"
      regexp    = "^web-[0-9]+$"
    }
    constraint {
      distinct_property = "${meta.rack}"
      value             = "2"
    }
    constraint { attribute = "${attr.cpu.numcores}"
      operator = ">"
      value = 4 }
    """
    job = parse_hcl(job_with(body + TASK))
    assert job.task_groups[0].constraints == (
        Constraint("", "", "distinct_hosts"),
        Constraint("${attr.os.version}", ">= 1.2", "version"),
        Constraint("${node.unique.name}", "^web-[0-9]+$", "regexp"),
        Constraint("${meta.rack}", "2", "distinct_property"),
        Constraint("${attr.cpu.numcores}", "4", ">"),  # HCL turns numbers into strings
    )


def test_meta_env_and_config_accept_attribute_maps() -> None:
    task = 'task "t" {\n driver = "mock"\n env = { A = "1" }\n config = { run_for = "1s" }\n}'
    job = parse_hcl(job_with(f'meta = {{ owner = "me", n = 3 }}\n{task}'))
    group = job.task_groups[0]
    assert group.meta == {"owner": "me", "n": "3"}
    assert group.tasks[0].env == {"A": "1"} and group.tasks[0].config == {"run_for": "1s"}


def test_config_keeps_nested_blocks_and_lists() -> None:
    task = """task "t" {
      driver = "mock"
      config {
        args = ["-v", "--port=${NOMAD_PORT_http}"]
        mount {
          type   = "bind"
          target = "/data"
        }
        escaped = "$${literal}"
      }
    }"""
    config = parse_hcl(job_with(task)).task_groups[0].tasks[0].config
    assert config == {
        "args": ["-v", "--port=${NOMAD_PORT_http}"],
        "mount": [{"type": "bind", "target": "/data"}],
        "escaped": "${literal}",
    }


def test_job_level_task_is_wrapped_in_a_group() -> None:
    job = parse_hcl('job "j" {\n task "solo" {\n driver = "mock"\n }\n}')
    (group,) = job.task_groups
    assert group.name == "solo" and [t.name for t in group.tasks] == ["solo"]


def test_durations_follow_go_syntax() -> None:
    assert parse_go_duration("30s") == 30.0
    assert parse_go_duration("1h30m") == 5400.0
    assert parse_go_duration("250ms") == pytest.approx(0.25)
    assert parse_go_duration("1.5h") == 5400.0
    assert parse_go_duration("0") == 0.0
    for bad in ("", "5", "s", "1d", "1h 30m"):
        with pytest.raises(ValueError):
            parse_go_duration(bad)


def test_numeric_durations_are_nanoseconds_as_in_nomad() -> None:
    task = 'task "t" {\n driver = "mock"\n kill_timeout = 2000000000\n}'
    assert parse_hcl(job_with(task)).task_groups[0].tasks[0].kill_timeout_s == 2.0


# --- accepted with a warning --------------------------------------------------------------------


def test_unmodelled_nomad_blocks_are_warnings() -> None:
    task = """task "t" {
      driver = "mock"
      leader = false
      template {
        data        = <<EOT
hello
EOT
        destination = "local/x"
      }
      resources {
        memory_max = 512
        network { mbits = 10 }
      }
      restart { attempts = 1 }
    }"""
    text = job_with(f'network {{\n port "http" {{}}\n }}\nservice {{ name = "x" }}\n{task}')
    job, warnings = parse_hcl_with_warnings('job "j" {\n region = "global"\n' + text[10:])
    assert job.task_groups[0].tasks[0].driver == "mock"
    assert warnings == [
        'job "j" > group "g": "network" is not supported by drover yet and was ignored',
        'job "j" > group "g": "service" is not supported by drover yet and was ignored',
        'job "j" > group "g" > task "t": "template" is not supported by drover yet and was ignored',
        'job "j" > group "g" > task "t": "resources.memory_max" is not supported by drover yet '
        "and was ignored",
        'job "j" > group "g" > task "t": "resources.network" is not supported by drover yet '
        "and was ignored",
        'job "j" > group "g" > task "t": "restart" is not supported by drover yet and was ignored',
    ]


# --- malformed input ----------------------------------------------------------------------------


def test_syntax_error_names_the_line() -> None:
    (problem,) = problems_of('job "a" {\n  group "g" {\n    count = \n  }\n}\n')
    assert problem.startswith("HCL syntax error at line 3")


def test_unterminated_file_is_a_syntax_error() -> None:
    (problem,) = problems_of('job "a" {\n  group "g" {\n')
    assert "HCL syntax error at line" in problem and "end of input" in problem


def test_unknown_fields_name_their_block_path() -> None:
    text = job_with('task "srv" {\n driver = "mock"\n cpuu = 3\n resources { cpuu = 1 }\n}')
    assert problems_of(text.replace('group "g"', 'group "api"')) == [
        'job "j" > group "api" > task "srv": unknown field "cpuu"',
        'job "j" > group "api" > task "srv": unknown field "resources.cpuu"',
    ]


def test_type_errors_name_path_and_value() -> None:
    task = 'task "api" {\n driver = "mock"\n resources { memory = "lots" }\n}'
    text = job_with(f'count = "3"\n{task}', 'priority = "high"\nall_at_once = "yes"')
    assert problems_of(text) == [
        'job "j": priority must be an integer, got "high"',
        'job "j": all_at_once must be a boolean, got "yes"',
        'job "j" > group "g": count must be an integer, got "3"',
        'job "j" > group "g" > task "api": resources.memory must be a positive integer, got "lots"',
    ]


def test_bad_duration() -> None:
    task = 'task "t" {\n driver = "mock"\n kill_timeout = "soon"\n}'
    assert problems_of(job_with(task)) == [
        'job "j" > group "g" > task "t": kill_timeout must be a duration like "30s" or "5m", '
        'got "soon"'
    ]


def test_unknown_job_type_is_named() -> None:
    assert problems_of(job_with(TASK, 'type = "cron"')) == [
        'job "j": type "cron" is not one of service, batch, system, sysbatch'
    ]


def test_variables_and_expressions_are_rejected() -> None:
    text = 'variable "n" { default = 3 }\n' + job_with(f"count = var.n\n{TASK}")
    problems = problems_of(text)
    assert problems[0].startswith('job file: "variable" blocks are not supported')
    assert 'count must be an integer, got "${var.n}"' in problems[1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 'expected exactly one job "<id>" block, found 0'),
        ('job "a" {}\njob "b" {}', 'expected exactly one job "<id>" block, found 2'),
        ("job {}", "the job block needs one label"),
        ('job "a" {}\nwhatever = 1', 'unknown field "whatever"'),
        (job_with(f"{TASK}\ngroup = 3"), 'group "g": unknown field "group"'),
        (job_with('task { driver = "mock" }'), "needs exactly one label"),
        (job_with('task "t" {\n resources = { cpu = 1 }\n}'), "resources must be a block"),
        (job_with(f"count {{}}\n{TASK}"), "count must be an attribute"),
        (job_with(f"ephemeral_disk {{}}\nephemeral_disk {{}}\n{TASK}"), "may only appear once"),
        (job_with(f'update "x" {{}}\n{TASK}'), "update block takes no label"),
        (job_with(f"scaling {{ min = 1 }}\n{TASK}"), 'group "g": scaling.max is required'),
        (job_with(f'datacenters = ["a"]\n{TASK}'), 'unknown field "datacenters"'),
        (job_with(TASK, 'datacenters = "dc1"'), "datacenters must be a list of strings"),
        (job_with(TASK, 'meta { nested { a = "b" } }'), "meta.nested must be a string"),
        ('job "a" {\n meta = { a = "b" }\n meta { c = "d" }\n}', "HCL syntax error"),
    ],
)
def test_malformed_input_is_a_validation_error(text: str, expected: str) -> None:
    problems = problems_of(text)
    assert any(expected in p for p in problems), problems
