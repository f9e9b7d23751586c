"""Nomad Autoscaler policy files (`scaling "name" { ... }`) for fleets and job groups."""

from __future__ import annotations

import pytest

from contracts.autoscaling import (
    Check,
    ClusterPolicy,
    Policy,
    StrategySpec,
    TargetSpec,
    TargetValueConfig,
    parse_cluster_policy_file,
)
from contracts.errors import ValidationError

GPU = """
scaling "gpu" {
  enabled = true
  min     = 1
  max     = 10

  policy {
    cooldown            = "2m"
    evaluation_interval = "30s"

    check "queue" {
      source = "drover"
      query  = "queued_allocs"
      strategy "target-value" {
        target = 1
      }
    }

    target "fleet" {
      fleet                  = "gpu"
      node_selector_strategy = "empty"
      node_drain_deadline    = "5m"
      dry-run                = false
      node_class             = "a100"
    }
  }
}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse_cluster_policy_file(text, "policies/gpu.hcl")
    return info.value.problems


def test_a_fleet_policy() -> None:
    [parsed] = parse_cluster_policy_file(GPU, "policies/gpu.hcl")
    assert parsed == ClusterPolicy(
        name="gpu",
        path="policies/gpu.hcl",
        type="cluster",
        policy=Policy(
            min=1,
            max=10,
            checks=(
                Check(
                    "queue",
                    StrategySpec("target-value", TargetValueConfig(target=1.0)),
                    query="queued_allocs",
                ),
            ),
            target=TargetSpec(
                kind="fleet",
                fleet="gpu",
                node_selector_strategy="empty",
                node_drain_deadline_s=300.0,
                extras={"node_class": "a100"},
            ),
            enabled=True,
            evaluation_interval_s=30.0,
            cooldown_s=120.0,
            cooldown_on_scale_up_s=120.0,
        ),
    )


def test_file_defaults_are_nomads() -> None:
    text = GPU.replace("enabled = true", "").replace("min     = 1", "")
    text = text.replace('node_selector_strategy = "empty"', "").replace(
        'node_drain_deadline    = "5m"', ""
    )
    [parsed] = parse_cluster_policy_file(text, "p.hcl")
    assert not parsed.policy.enabled  # a file policy must opt in
    assert parsed.policy.min == 0
    assert parsed.policy.target.node_selector_strategy == "least_busy"
    assert parsed.policy.target.node_drain_deadline_s == 900.0


def test_several_policies_and_a_horizontal_one() -> None:
    web = """
scaling "web" {
  enabled = true
  type    = "horizontal"
  max     = 20
  policy {
    check "cpu" {
      query = "avg_cpu"
      strategy "target-value" { target = "70" }
    }
    target "nomad-target" {
      Job   = "web"
      Group = "api"
    }
  }
}
"""
    gpu, api = parse_cluster_policy_file(GPU + web, "p.hcl")
    assert (gpu.name, api.name, api.type) == ("gpu", "web", "horizontal")
    assert api.policy.target == TargetSpec(kind="job-group", job="web", group="api")
    assert api.policy.checks[0].strategy.config == TargetValueConfig(target=70.0)


HERE = 'policies/gpu.hcl > scaling "gpu"'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GPU.replace("max     = 10", ""), f"{HERE}: max is required"),
        (GPU.replace("min     = 1", "min = 11"), f"{HERE}: min 11 is above max 10"),
        (GPU.replace("max     = 10", "max = -1"), f"{HERE}: max must be at least 0, got -1"),
        (
            GPU.replace("enabled = true", 'enabled = "yes"'),
            f'{HERE}: enabled must be true or false, got "yes"',
        ),
        (
            GPU.replace("enabled = true", 'type = "vertical_cpu"'),
            f'{HERE}: type "vertical_cpu" (dynamic application sizing) is not supported by drover',
        ),
        (
            GPU.replace('target "fleet"', 'target "aws-asg"'),
            f'{HERE} > policy > target "aws-asg": this target is not supported: '
            'drover scales clusters with target "fleet"',
        ),
        (
            GPU.replace('fleet                  = "gpu"', ""),
            f'{HERE} > policy > target "fleet": fleet is required',
        ),
        (
            GPU.replace('"empty"', '"random"'),
            f'{HERE} > policy > target "fleet": node_selector_strategy must be one of '
            '"least_busy", "empty", "empty_ignore_system", "newest_create_index", '
            '"oldest_create_index", got "random"',
        ),
        (
            GPU.replace('"5m"', '"5 minutes"'),
            f'{HERE} > policy > target "fleet": node_drain_deadline must be a duration such as '
            '"30s" or "1m30s", got "5 minutes"',
        ),
        (
            GPU.replace("dry-run                = false", "dry-run = [1]"),
            f'{HERE} > policy > target "fleet": dry-run must be true or false, got [1]',
        ),
        (
            GPU[: GPU.index('    target "fleet"')] + "  }\n}\n",
            f'{HERE} > policy: a target "fleet" {{ ... }} block is required',
        ),
        (GPU + GPU, 'policies/gpu.hcl: scaling "gpu" is defined more than once'),
        ("scaling {\n max = 1\n}", "policies/gpu.hcl: a scaling block needs one label"),
        ('scaling "x" {\n max = 1\n}', 'policies/gpu.hcl > scaling "x": expected one policy'),
        ('job "x" {}', 'policies/gpu.hcl: unknown block "job"; a policy file holds scaling'),
        ("", 'policies/gpu.hcl: no scaling "<name>" { ... } block found'),
        ('scaling "x" {', "policies/gpu.hcl: HCL syntax error"),
    ],
)
def test_errors(text: str, expected: str) -> None:
    found = problems(text)
    assert any(p.startswith(expected) for p in found), found


def test_the_number_of_policies_per_file_is_bounded() -> None:
    text = "\n".join(f'scaling "p{i}" {{\n max = 1\n}}' for i in range(257))
    assert problems(text) == ["policies/gpu.hcl: 257 scaling blocks, more than the 256 allowed"]
