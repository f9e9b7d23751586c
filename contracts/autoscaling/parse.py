"""A scaling policy document (`policy { ... }`) -> `Policy`, with every problem reported.

The rules are the Nomad Autoscaler's (policy/nomad/validate.go, sdk/policy.go): at least
one check, each with exactly one strategy; a query unless the strategy needs no metric
(fixed-value); durations are Go duration strings; `on_check_error` and `on_error` are
"fail" or "ignore"; a threshold check with an instant query must set
`within_bounds_trigger = 1`; at most one target. drover is stricter where Nomad would
silently do nothing: unknown fields and unknown strategies are refused, and a policy has
at most 64 checks so an evaluation's work stays bounded.

Zero durations mean "unset" and take the default, as Nomad's `ApplyPolicyDefaults` does.
A check without `source` reads from drover's own metrics (`source = "drover"`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from contracts.autoscaling.behavior_config import parse_behavior
from contracts.autoscaling.fields import Body, Fields, Where, labelled_blocks
from contracts.autoscaling.policy import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_EVALUATION_INTERVAL_S,
    DEFAULT_NODE_DRAIN_DEADLINE_S,
    DEFAULT_NODE_SELECTOR,
    DEFAULT_QUERY_WINDOW_S,
    DEFAULT_SOURCE,
    NODE_SELECTORS,
    Behavior,
    Check,
    OnError,
    Policy,
    TargetSpec,
    ThresholdConfig,
)
from contracts.autoscaling.strategy_config import METRIC_FREE_STRATEGIES, parse_strategy
from contracts.codec import describe
from contracts.errors import ValidationError

MAX_CHECKS = 64
TargetMode = Literal["group", "cluster", "horizontal"]
_ON_ERROR = (OnError.FAIL.value, OnError.IGNORE.value)
_FLEET = "fleet"
_JOB_TARGETS = ("nomad-target", "nomad")


def parse_group_policy(
    policy: Mapping[str, Any],
    *,
    min: int,
    max: int,
    where: str,
    enabled: bool = True,
    job: str = "",
    group: str = "",
    namespace: str = "default",
) -> Policy:
    """A job group's `scaling { policy { ... } }` body (as `ScalingPolicy.policy` holds it).

    `where` names the group (`job "web" > group "api"`); errors read
    `job "web" > group "api" > scaling > policy > check "cpu": ...`. The bounds are the
    group's, already checked by the job's validation. Raises ValidationError listing every
    problem."""
    problems: list[str] = []
    target = TargetSpec(kind="job-group", job=job, group=group, namespace=namespace)
    parsed = parse_policy_body(
        policy,
        Where((where, "scaling", "policy")),
        problems,
        bounds=(min, max),
        enabled=enabled,
        mode="group",
        default_target=target,
    )
    if problems or parsed is None:
        raise ValidationError(problems or [f"{where} > scaling > policy: policy is empty"])
    return parsed


def parse_policy_body(
    body: Body,
    where: Where,
    problems: list[str],
    *,
    bounds: tuple[int, int],
    enabled: bool,
    mode: TargetMode,
    default_target: TargetSpec | None = None,
) -> Policy | None:
    """Any policy body; `mode` says which targets fit (a group's own, a fleet, a job group
    named in the target block). Appends problems; returns None if it could not build one."""
    fields = Fields(body, where, problems)
    interval = fields.duration("evaluation_interval", DEFAULT_EVALUATION_INTERVAL_S)
    cooldown = fields.duration("cooldown", DEFAULT_COOLDOWN_S)
    cooldown_up = fields.duration("cooldown_on_scale_up", cooldown)
    on_check_error = OnError(fields.choice("on_check_error", _ON_ERROR, OnError.IGNORE.value))
    fields.unsupported("schedule", "policies are evaluated at every interval")
    checks = _checks(fields, where, problems)
    target, dry_run = _target(fields, where, problems, mode, default_target)
    behavior = (
        parse_behavior(fields.raw("behavior"), where, problems)
        if fields.has("behavior")
        else Behavior()
    )
    fields.finish()
    if target is None:
        return None
    low, high = bounds
    return Policy(
        min=low,
        max=high,
        checks=checks,
        target=target,
        enabled=enabled,
        evaluation_interval_s=interval,
        cooldown_s=cooldown,
        cooldown_on_scale_up_s=cooldown_up,
        on_check_error=on_check_error,
        dry_run=dry_run,
        behavior=behavior,
    )


def _checks(fields: Fields, where: Where, problems: list[str]) -> tuple[Check, ...]:
    if not fields.has("check"):
        fields.error('at least one check "<name>" { ... } block is required')
        return ()
    blocks = labelled_blocks(fields.raw("check"), "check", where, problems, MAX_CHECKS)
    names = [name for name, _ in blocks]
    for name in sorted({n for n in names if names.count(n) > 1}):
        fields.error(f'check "{name}" is defined {names.count(name)} times')
    checks = [_check(name, body, where.block("check", name), problems) for name, body in blocks]
    return tuple(c for c in checks if c is not None)


def _check(name: str, body: Body, where: Where, problems: list[str]) -> Check | None:
    fields = Fields(body, where, problems)
    source = fields.string("source", DEFAULT_SOURCE) or DEFAULT_SOURCE
    has_query = fields.has("query")
    query = fields.string("query")
    if has_query and isinstance(fields.raw("query"), str) and not query:
        fields.error("query must not be empty")
    window_text = fields.raw("query_window") if fields.has("query_window") else None
    instant = fields.boolean("query_instant", False) or window_text == "instant"
    window = DEFAULT_QUERY_WINDOW_S
    if window_text != "instant":
        window = fields.duration("query_window", DEFAULT_QUERY_WINDOW_S)
    offset = fields.duration("query_window_offset", 0.0)
    group = fields.string("group")
    on_error_text = fields.choice("on_error", _ON_ERROR, "") if fields.has("on_error") else ""
    fields.unsupported("schedule", "checks run at every evaluation")
    strategy = None
    if not fields.has("strategy"):
        fields.error('a strategy "<name>" { ... } block is required')
    else:
        strategies = labelled_blocks(fields.raw("strategy"), "strategy", where, problems, 1)
        if len(strategies) == 1:
            strategy = parse_strategy(*strategies[0], where, problems)
    fields.finish()
    if strategy is None:
        return None
    if strategy.name not in METRIC_FREE_STRATEGIES and not has_query:
        fields.error(f'query is required by strategy "{strategy.name}"')
    config = strategy.config
    if instant and isinstance(config, ThresholdConfig) and config.within_bounds_trigger != 1:
        fields.error(
            'strategy "threshold": within_bounds_trigger must be set to 1 '
            'when query_window is "instant"'
        )
    return Check(
        name=name,
        strategy=strategy,
        source=source,
        query=query,
        query_window_s=window,
        query_window_offset_s=offset,
        query_instant=instant,
        group=group,
        on_error=OnError(on_error_text) if on_error_text else None,
    )


def _target(
    fields: Fields,
    where: Where,
    problems: list[str],
    mode: TargetMode,
    default: TargetSpec | None,
) -> tuple[TargetSpec | None, bool]:
    if not fields.has("target"):
        if default is None:
            fields.error(f'a target "{_expected_target(mode)}" {{ ... }} block is required')
        return default, False
    blocks = labelled_blocks(fields.raw("target"), "target", where, problems, 1)
    if not blocks:
        return None, False
    label, body = blocks[0]
    here = Fields(body, where.block("target", label), problems)
    dry_run = here.boolean("dry-run", False)
    target: TargetSpec | None
    if mode == "group":
        target = _group_target(label, here, default)
    elif mode == "cluster":
        target = _fleet_target(label, here)
    else:
        target = _job_target(label, here)
    if target is not None:
        target = _with_extras(target, here)
    here.finish()
    return target, dry_run


def _expected_target(mode: TargetMode) -> str:
    return {"group": "<name>", "cluster": _FLEET, "horizontal": _JOB_TARGETS[0]}[mode]


def _group_target(label: str, fields: Fields, default: TargetSpec | None) -> TargetSpec | None:
    if label == _FLEET:
        fields.error(
            'a job group\'s policy scales its group; target "fleet" is for cluster policies'
        )
        return None
    return default


def _fleet_target(label: str, fields: Fields) -> TargetSpec | None:
    if label != _FLEET:
        fields.error('this target is not supported: drover scales clusters with target "fleet"')
        return None
    return TargetSpec(
        kind="fleet",
        fleet=fields.required_string("fleet"),
        node_selector_strategy=fields.choice(
            "node_selector_strategy", NODE_SELECTORS, DEFAULT_NODE_SELECTOR
        ),
        node_drain_deadline_s=fields.duration("node_drain_deadline", DEFAULT_NODE_DRAIN_DEADLINE_S),
    )


def _job_target(label: str, fields: Fields) -> TargetSpec | None:
    if label not in _JOB_TARGETS:
        names = " or ".join(f'"{t}"' for t in _JOB_TARGETS)
        fields.error(f"this target is not supported: a horizontal policy's target is {names}")
        return None
    return TargetSpec(
        kind="job-group",
        job=fields.required_string("Job"),
        group=fields.required_string("Group"),
        namespace=fields.string("Namespace", "default") or "default",
    )


def _with_extras(target: TargetSpec, fields: Fields) -> TargetSpec:
    """The target's other settings, kept as strings (Nomad formats them with %v)."""
    extras: dict[str, str] = {}
    for key in fields.body:
        if key in ("dry-run", "fleet", "node_selector_strategy", "node_drain_deadline"):
            continue
        if target.kind == "job-group" and key in ("Job", "Group", "Namespace"):
            fields.raw(key)  # the group's own names (Nomad fills them in from the job)
            continue
        value = fields.raw(key)
        if isinstance(value, bool):
            extras[key] = "true" if value else "false"
        elif isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
            extras[key] = str(int(value))  # Go's %v prints 2.0 as "2"
        elif isinstance(value, str | int | float):
            extras[key] = str(value)
        else:
            fields.error(f"{key} must be a string, number or bool, got {describe(value)}")
    return replace(target, extras=extras) if extras else target
