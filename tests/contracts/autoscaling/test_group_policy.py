"""A job group's `scaling { policy { ... } }`: the three shapes it arrives in, Nomad
Autoscaler's defaults, and errors that name the field and the bad value."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.autoscaling import (
    MAX_CHECKS,
    Check,
    FixedValueConfig,
    OnError,
    Policy,
    StrategySpec,
    TargetSpec,
    TargetValueConfig,
    ThresholdConfig,
    parse_group_policy,
)
from contracts.errors import ValidationError
from contracts.jobspec import hcl, parse_hcl

WHERE = 'job "x" > group "web"'
HERE = f"{WHERE} > scaling > policy"
CPU = 'check "cpu" {\n query = "avg_cpu"\n strategy "target-value" { target = 70 }\n}'


def hcl_policy(body: str) -> dict[str, Any]:
    """The policy dict as a job file's `scaling { policy { ... } }` block leaves it
    (jobspec keeps that block as `hcl.to_plain` data), without the job's validation."""
    return hcl.to_plain(hcl.load(f"policy {{\n{body}\n}}").blocks["policy"][0].body)


def test_a_job_file_keeps_the_policy_in_that_shape() -> None:
    job = parse_hcl(
        'job "x" {\n group "web" {\n  scaling {\n   max = 10\n'
        f"   policy {{\n{CPU}\n   }}\n  }}\n"
        '  task "t" { driver = "mock" }\n }\n}\n'
    )
    scaling = job.task_groups[0].scaling
    assert scaling is not None and scaling.policy == hcl_policy(CPU)


def parse(policy: dict[str, Any]) -> Policy:
    return parse_group_policy(policy, min=1, max=10, where=WHERE, job="x", group="web")


def problems(policy: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse(policy)
    return info.value.problems


def test_nomad_autoscaler_defaults() -> None:
    policy = parse(hcl_policy(CPU))
    assert policy == Policy(
        min=1,
        max=10,
        checks=(
            Check(
                name="cpu",
                strategy=StrategySpec("target-value", TargetValueConfig(target=70.0)),
                source="drover",
                query="avg_cpu",
            ),
        ),
        target=TargetSpec(kind="job-group", job="x", group="web", namespace="default"),
    )
    assert (policy.evaluation_interval_s, policy.cooldown_s) == (10.0, 300.0)
    assert policy.cooldown_on_scale_up_s == 300.0
    assert policy.on_check_error is OnError.IGNORE
    check = policy.checks[0]
    assert (check.query_window_s, check.query_window_offset_s, check.query_instant) == (
        60,
        0,
        False,
    )
    assert TargetValueConfig(70).threshold == 0.01


def test_cooldown_on_scale_up_falls_back_to_cooldown_and_zero_means_unset() -> None:
    assert parse(hcl_policy(f'cooldown = "2m"\n{CPU}')).cooldown_on_scale_up_s == 120.0
    both = parse(hcl_policy(f'cooldown = "2m"\ncooldown_on_scale_up = "30s"\n{CPU}'))
    assert (both.cooldown_s, both.cooldown_on_scale_up_s) == (120.0, 30.0)
    zero = parse(hcl_policy(f'cooldown = "0s"\nevaluation_interval = "0"\n{CPU}'))
    assert (zero.cooldown_s, zero.evaluation_interval_s) == (300.0, 10.0)


FULL = """
evaluation_interval  = "1m30s"
cooldown             = "5m"
cooldown_on_scale_up = "1m"
on_check_error       = "fail"
check "high" {
  source              = "prometheus"
  query               = "sum(rate(http_requests_total[1m]))"
  query_window        = "10m"
  query_window_offset = "30s"
  group               = "load"
  on_error            = "ignore"
  strategy "threshold" {
    lower_bound = 70
    upper_bound = 100
    delta       = 1
  }
}
check "now" {
  query        = "queue_depth"
  query_window = "instant"
  strategy "threshold" {
    lower_bound           = 10
    percentage            = 50.5
    within_bounds_trigger = 1
  }
}
check "floor" {
  strategy "fixed-value" { value = 2 }
}
target "nomad-target" {
  dry-run = true
}
"""


def test_every_field() -> None:
    policy = parse(hcl_policy(FULL))
    assert policy.evaluation_interval_s == 90.0
    assert (policy.cooldown_s, policy.cooldown_on_scale_up_s) == (300.0, 60.0)
    assert policy.on_check_error is OnError.FAIL
    assert policy.dry_run
    high, now, floor = policy.checks
    assert high == Check(
        name="high",
        strategy=StrategySpec("threshold", ThresholdConfig(70.0, 100.0, delta=1)),
        source="prometheus",
        query="sum(rate(http_requests_total[1m]))",
        query_window_s=600.0,
        query_window_offset_s=30.0,
        group="load",
        on_error=OnError.IGNORE,
    )
    assert now.query_instant and now.strategy.config == ThresholdConfig(
        lower_bound=10.0, percentage=50.5, within_bounds_trigger=1
    )
    assert floor.strategy == StrategySpec("fixed-value", FixedValueConfig(2)) and not floor.query


def test_nomad_api_and_plain_json_shapes_parse_the_same() -> None:
    from_hcl = parse(hcl_policy(CPU))
    api = {
        "cooldown": "5m",
        "check": [
            {"cpu": [{"query": "avg_cpu", "strategy": [{"target-value": [{"target": 70.0}]}]}]}
        ],
    }
    plain = {"check": {"cpu": {"query": "avg_cpu", "strategy": {"target-value": {"target": "70"}}}}}
    assert parse(api) == from_hcl
    assert parse(plain) == from_hcl


def test_target_settings_are_kept_as_strings() -> None:
    policy = parse(
        {
            "check": {"f": {"strategy": {"fixed-value": {"value": 3}}}},
            "target": [{"nomad-target": [{"dry-run": "false", "int_config": 2.0, "Job": "x"}]}],
        }
    )
    assert not policy.dry_run
    assert policy.target.extras == {"int_config": "2"}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (f'cooldwn = "1m"\n{CPU}', f'{HERE}: unknown field "cooldwn"'),
        (
            f"evaluation_interval = 30\n{CPU}",
            f'{HERE}: evaluation_interval must be a duration such as "30s" or "1m30s", got 30',
        ),
        (
            f'cooldown = "soon"\n{CPU}',
            f'{HERE}: cooldown must be a duration such as "30s" or "1m30s", got "soon"',
        ),
        (
            f'cooldown = "-5m"\n{CPU}',
            f'{HERE}: cooldown must be a duration that is not negative, got "-5m"',
        ),
        (
            f'on_check_error = "explode"\n{CPU}',
            f'{HERE}: on_check_error must be one of "fail", "ignore", got "explode"',
        ),
        ('cooldown = "1m"', f'{HERE}: at least one check "<name>" {{ ... }} block is required'),
        (
            f"{CPU}\n{CPU}",
            f'{HERE}: check "cpu" is defined 2 times',
        ),
        (
            'check "cpu" { query = "q" }',
            f'{HERE} > check "cpu": a strategy "<name>" {{ ... }} block is required',
        ),
        (
            'check "cpu" {\n query = "q"\n strategy "target-value" { target = 1 }\n'
            ' strategy "pass-through" {}\n}',
            f'{HERE} > check "cpu": more than 1 strategy blocks; drover allows 1',
        ),
        (
            'check "cpu" {\n query = "q"\n strategy "magic" {}\n}',
            f'{HERE} > check "cpu" > strategy "magic": unknown strategy; '
            "drover has fixed-value, pass-through, target-value, threshold",
        ),
        (
            'check "cpu" {\n strategy "target-value" { target = 1 }\n}',
            f'{HERE} > check "cpu": query is required by strategy "target-value"',
        ),
        (
            'check "cpu" {\n query = ""\n strategy "target-value" { target = 1 }\n}',
            f'{HERE} > check "cpu": query must not be empty',
        ),
        (
            'check "cpu" {\n query = "q"\n on_error = "retry"\n'
            ' strategy "target-value" { target = 1 }\n}',
            f'{HERE} > check "cpu": on_error must be one of "fail", "ignore", got "retry"',
        ),
        (
            'check "cpu" {\n query = "q"\n query_window = "instant"\n'
            ' strategy "threshold" {\n  upper_bound = 5\n  delta = -1\n }\n}',
            f'{HERE} > check "cpu": strategy "threshold": within_bounds_trigger must be set to 1 '
            'when query_window is "instant"',
        ),
        (
            'check "cpu" {\n query = "q"\n strategy "threshold" {\n'
            "  upper_bound = 5\n  delta = 1\n  value = 3\n }\n}",
            f'{HERE} > check "cpu" > strategy "threshold": exactly one of delta, percentage, '
            "value is required (got delta and value)",
        ),
        (
            f'schedule {{ start = "0 9 * * *" }}\n{CPU}',
            f'{HERE}: "schedule" is not supported by drover: policies are evaluated at every '
            "interval",
        ),
        (
            f'{CPU}\ntarget "fleet" {{ fleet = "gpu" }}',
            f'{HERE} > target "fleet": a job group\'s policy scales its group; '
            'target "fleet" is for cluster policies',
        ),
        (
            'check "cpu" {\n query = "q"\n strategy "target-value" { target = var.goal }\n}',
            f'{HERE} > check "cpu" > strategy "target-value": target must be a finite number, '
            'got "${var.goal}" (drover does not evaluate HCL expressions or variables)',
        ),
    ],
)
def test_errors_name_the_field_and_the_value(body: str, expected: str) -> None:
    assert expected in problems(hcl_policy(body))


def test_every_problem_is_reported_at_once() -> None:
    found = problems(
        hcl_policy(
            'cooldown = "x"\non_check_error = "no"\n'
            'check "a" {\n strategy "threshold" { delta = 1 }\n}\n'
            'check "b" {\n query = "q"\n strategy "target-value" { threshold = -1 }\n}'
        )
    )
    assert found == [
        f'{HERE}: cooldown must be a duration such as "30s" or "1m30s", got "x"',
        f'{HERE}: on_check_error must be one of "fail", "ignore", got "no"',
        f'{HERE} > check "a" > strategy "threshold": '
        "at least one of lower_bound, upper_bound is required",
        f'{HERE} > check "a": query is required by strategy "threshold"',
        f'{HERE} > check "b" > strategy "target-value": target is required',
        f'{HERE} > check "b" > strategy "target-value": '
        "threshold must be a number that is not negative, got -1",
    ]


def test_the_number_of_checks_is_bounded() -> None:
    many = {
        "check": [
            {f"c{i}": {"strategy": {"fixed-value": {"value": 1}}}} for i in range(MAX_CHECKS + 1)
        ]
    }
    assert problems(many) == [f"{HERE}: more than 64 check blocks; drover allows 64"]
    many["check"].pop()
    assert len(parse(many).checks) == MAX_CHECKS


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (
            {"check": "cpu"},
            f'{HERE}: check must be labelled blocks: check "<name>" {{ ... }}, got "cpu"',
        ),
        ({"check": [{"cpu": "x"}]}, f'{HERE} > check "cpu": must be a block, got "x"'),
        ({"check": [{"": {}}]}, f'{HERE}: a check block needs a label: check "<name>" {{ ... }}'),
    ],
)
def test_malformed_shapes(policy: dict[str, Any], expected: str) -> None:
    assert problems(policy) == [expected]
