"""Nomad Autoscaler policy files: `scaling "name" { ... }` blocks in HCL.

    scaling "gpu-fleet" {
      enabled = true
      min     = 1
      max     = 10
      policy {
        cooldown            = "2m"
        evaluation_interval = "30s"
        check "queue" {
          query = "queued_allocs"
          strategy "target-value" { target = 1 }
        }
        target "fleet" {
          fleet                  = "gpu"
          node_selector_strategy = "least_busy"
          node_drain_deadline    = "5m"
          dry-run                = false
        }
      }
    }

As in the Nomad Autoscaler (policy/file, sdk.FileDecodeScalingPolicy): `type` defaults to
"cluster", `enabled` defaults to false (a disabled policy is parsed but not evaluated),
`min` to 0, `max` is required. A "cluster" policy scales a drover fleet (`target
"fleet"`); a "horizontal" one scales a job group (`target "nomad-target" { Job = "web"
Group = "api" }`). A file holds at most 256 policies.
"""

from __future__ import annotations

from typing import Literal

from contracts.autoscaling.fields import Fields, Where
from contracts.autoscaling.parse import parse_policy_body
from contracts.autoscaling.policy import ClusterPolicy
from contracts.errors import ValidationError
from contracts.jobspec import hcl

MAX_POLICIES_PER_FILE = 256
_TYPES = ("cluster", "horizontal")
_VERTICAL = ("vertical_cpu", "vertical_mem")


def parse_cluster_policy_file(text: str, path: str) -> list[ClusterPolicy]:
    """Every policy of one file; raises ValidationError listing every problem found."""
    try:
        root = hcl.load(text)
    except ValidationError as exc:
        raise ValidationError([f"{path}: {p}" for p in exc.problems]) from None
    top = Where((path,))
    problems: list[str] = []
    for name in root.attrs:
        problems.append(top.at(f'unknown field "{name}"'))
    for name in root.blocks:
        if name != "scaling":
            problems.append(top.at(f'unknown block "{name}"; a policy file holds scaling blocks'))
    blocks = root.blocks.get("scaling", [])
    if len(blocks) > MAX_POLICIES_PER_FILE:
        problems.append(
            top.at(f"{len(blocks)} scaling blocks, more than the {MAX_POLICIES_PER_FILE} allowed")
        )
        raise ValidationError(problems)
    if not blocks and not problems:
        problems.append(top.at('no scaling "<name>" { ... } block found'))
    policies: list[ClusterPolicy] = []
    seen: dict[str, int] = {}
    for block in blocks:
        if len(block.labels) != 1 or not block.labels[0]:
            problems.append(top.at('a scaling block needs one label: scaling "<name>" { ... }'))
            continue
        name = block.labels[0]
        seen[name] = seen.get(name, 0) + 1
        if seen[name] == 2:
            problems.append(top.at(f'scaling "{name}" is defined more than once'))
        policy = _scaling(name, block.body, path, top.block("scaling", name), problems)
        if policy is not None:
            policies.append(policy)
    if problems:
        raise ValidationError(problems)
    return policies


def _scaling(
    name: str, body: hcl.Body, path: str, where: Where, problems: list[str]
) -> ClusterPolicy | None:
    fields = Fields(body.attrs, where, problems)
    enabled = fields.boolean("enabled", False)
    low = fields.integer("min", minimum=0)
    high = fields.integer("max", minimum=0)
    if not fields.has("max"):
        fields.error("max is required")
    kind = fields.string("type", "cluster") or "cluster"
    if kind in _VERTICAL:
        fields.error(f'type "{kind}" (dynamic application sizing) is not supported by drover')
    elif kind not in _TYPES:
        fields.error(f'type must be one of "cluster", "horizontal", got "{kind}"')
    fields.finish()
    low = 0 if low is None else low
    if high is not None and low > high:
        fields.error(f"min {low} is above max {high}")
    for block_name in body.blocks:
        if block_name != "policy":
            problems.append(where.at(f'unknown block "{block_name}"'))
    policy_blocks = body.blocks.get("policy", [])
    if len(policy_blocks) != 1:
        problems.append(
            where.at(f"expected one policy {{ ... }} block, found {len(policy_blocks)}")
        )
        return None
    if policy_blocks[0].labels:
        problems.append(
            where.at(f"the policy block takes no label, got {policy_blocks[0].labels[0]!r}")
        )
        return None
    mode: Literal["cluster", "horizontal"] = "horizontal" if kind == "horizontal" else "cluster"
    policy = parse_policy_body(
        hcl.to_plain(policy_blocks[0].body),
        where.block("policy"),
        problems,
        bounds=(low, 0 if high is None else high),
        enabled=enabled,
        mode=mode,
    )
    if policy is None:
        return None
    return ClusterPolicy(name=name, path=path, type=mode, policy=policy)
