"""A group's scaling policy is parsed when the job is: one that cannot be parsed is refused
at `job run`, naming the field, instead of being a silent no-op for the autoscaler."""

from __future__ import annotations

import pytest

from contracts.errors import ValidationError
from contracts.jobspec import parse_hcl, parse_json

TASK = 'task "t" {\n driver = "mock"\n}'


def job_with_policy(policy: str, scaling: str = "max = 10") -> str:
    return (
        f'job "web" {{\n group "api" {{\n  count = 2\n  scaling {{\n   {scaling}\n'
        f"   policy {{\n{policy}\n   }}\n  }}\n  {TASK}\n }}\n}}\n"
    )


def problems_of(text: str) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse_hcl(text)
    return info.value.problems


CPU = 'check "cpu" {\n query = "avg_cpu"\n strategy "target-value" { target = 70 }\n}'


def test_a_sound_policy_is_accepted() -> None:
    job = parse_hcl(job_with_policy(f'cooldown = "1m"\n{CPU}'))
    scaling = job.task_groups[0].scaling
    assert scaling is not None and scaling.policy["cooldown"] == "1m"


def test_a_scaling_block_without_a_policy_needs_no_checks() -> None:
    text = f'job "web" {{\n group "api" {{\n  scaling {{\n   max = 3\n  }}\n  {TASK}\n }}\n}}\n'
    assert parse_hcl(text).task_groups[0].scaling is not None


def test_a_policy_that_cannot_be_parsed_is_refused() -> None:
    bad = (
        'check "cpu" {\n query = "q"\n'
        ' strategy "threshold" {\n  upper_bound = 5\n  delta = 1\n  value = 3\n }\n}'
    )
    assert problems_of(job_with_policy(bad)) == [
        'job "web" > group "api" > scaling > policy > check "cpu" > strategy "threshold": '
        "exactly one of delta, percentage, value is required (got delta and value)"
    ]


def test_policy_problems_are_reported_with_the_jobs_other_problems() -> None:
    found = problems_of(job_with_policy(f'cooldown = "later"\n{CPU}', scaling="min = 1\n max = 1"))
    assert found == [
        'job "web" > group "api": count 2 is above scaling max 1',
        'job "web" > group "api" > scaling > policy: cooldown must be a duration such as '
        '"30s" or "1m30s", got "later"',
    ]


def test_a_json_job_is_checked_the_same_way() -> None:
    job = {
        "ID": "web",
        "TaskGroups": [
            {
                "Name": "api",
                "Count": 1,
                "Scaling": {
                    "Max": 4,
                    "Policy": {"check": [{"cpu": [{"query": "avg_cpu", "strategy": []}]}]},
                },
                "Tasks": [{"Name": "t", "Driver": "mock"}],
            }
        ],
    }
    with pytest.raises(ValidationError) as info:
        parse_json({"Job": job})
    assert info.value.problems == [
        'job "web" > group "api" > scaling > policy > check "cpu": '
        'strategy must be labelled blocks: strategy "<name>" { ... }, got []'
    ]
