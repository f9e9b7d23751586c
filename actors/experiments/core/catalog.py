"""A fresh `SimPolicy` for each run, from an experiment's policy spec and the run's parameters.

Policies hold state (cooldowns, stabilisation windows, histograms), so every run builds its
own. The Nomad kinds become policy bodies for the autoscaler's own parser, so that they run
exactly as the live autoscaler would; a zero cooldown is set on the parsed policy (a zero
duration in a body means "the default"). A Python class is imported from `module:Class`, the
experiment file's folder searched first, and built with its `args`."""

from __future__ import annotations

import copy
import importlib
import math
import sys
from dataclasses import dataclass, replace
from typing import Any

from actors.experiments.core.policies import (
    HPA_BEHAVIOR,
    DstackPolicy,
    KeepAlivePolicy,
    NomadPolicy,
    SimPolicy,
    nomad_policy_dict,
)
from actors.experiments.core.state import METRICS
from contracts.autoscaling import Policy, parse_group_policy
from contracts.errors import ValidationError
from contracts.experiments import (
    DstackSettings,
    HpaSettings,
    HybridSettings,
    KeepAliveSettings,
    NomadSettings,
    PolicyFileSettings,
    PolicySettings,
    PolicySpec,
    PythonSettings,
    TargetValueSettings,
    ThresholdSettings,
)

_METRIC_FREE = ("fixed-value",)


@dataclass(frozen=True, slots=True)
class Built:
    policy: SimPolicy
    min: int  # where a run starts unless its start_count says otherwise, as a Nomad group


def go_duration(seconds: float) -> str:
    """Seconds as a Go duration string ("90s", "0.5s")."""
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{seconds:.6f}".rstrip("0").rstrip(".") + "s"


def build(
    spec: PolicySpec, settings: PolicySettings | None = None, *, per_alloc_rps: float
) -> Built:
    """The policy of one run: `settings` (a variant of the spec's sweep, default its own)
    and the run's `per_alloc_rps` (what keep-alive policies scale by unless they set their
    own). Raises ValidationError naming the policy."""
    chosen = spec.settings if settings is None else settings
    try:
        return _build(chosen, per_alloc_rps)
    except ValidationError as exc:
        raise ValidationError([f"{spec.where or spec.name}: {p}" for p in exc.problems]) from None


def validate(specs: tuple[PolicySpec, ...] | list[PolicySpec], per_alloc_rps: float) -> None:
    """Build every variant of every policy once, so that a bad one fails before any run."""
    problems: list[str] = []
    for spec in specs:
        for settings, _ in spec.variants():
            try:
                build(spec, settings, per_alloc_rps=per_alloc_rps)
            except ValidationError as exc:
                problems.extend(p for p in exc.problems if p not in problems)
    if problems:
        raise ValidationError(problems)


def _build(s: PolicySettings, per_alloc_rps: float) -> Built:
    if isinstance(s, TargetValueSettings):
        return Built(_nomad(_target_value_body(s), s.min, s.max, s.cooldown_s), s.min)
    if isinstance(s, ThresholdSettings):
        return Built(_nomad(_threshold_body(s), s.min, s.max, s.cooldown_s), s.min)
    if isinstance(s, HpaSettings):
        return Built(_hpa(s), s.min)
    if isinstance(s, DstackSettings):
        dstack = DstackPolicy(
            target_rps=s.target,
            min=s.min,
            max=s.max,
            window_s=s.window_s,
            scale_up_delay_s=s.scale_up_delay_s,
            scale_down_delay_s=s.scale_down_delay_s,
            interval_s=s.evaluation_interval_s,
        )
        return Built(dstack, s.min)
    if isinstance(s, KeepAliveSettings):
        keep_alive = KeepAlivePolicy(
            keep_alive_s=s.keep_alive_s,
            per_alloc_rps=s.per_alloc_rps or per_alloc_rps,
            max=s.max,
            interval_s=s.evaluation_interval_s,
        )
        return Built(keep_alive, 0)
    if isinstance(s, HybridSettings):
        return Built(_hybrid(s, per_alloc_rps), 0)
    if isinstance(s, NomadSettings):
        policy = parse_group_policy(s.policy, min=s.min, max=s.max, where="policy")
        return Built(_checked(policy), s.min)
    if isinstance(s, PolicyFileSettings):
        if s.parsed is None:
            raise ValidationError(f"the policy file {s.file} was not parsed")
        low = s.parsed.min if s.min is None else s.min
        high = s.parsed.max if s.max is None else s.max
        return Built(_checked(replace(s.parsed, min=low, max=high, enabled=True)), low)
    return _python(s)


def _nomad(body: dict[str, Any], low: int, high: int, cooldown_s: float) -> NomadPolicy:
    policy = parse_group_policy(body, min=low, max=high, where="policy")
    return _checked(replace(policy, cooldown_s=cooldown_s, cooldown_on_scale_up_s=cooldown_s))


def _checked(policy: Policy) -> NomadPolicy:
    """A Nomad policy whose checks all query metrics the simulator has."""
    for check in policy.checks:
        if check.strategy.name in _METRIC_FREE or check.query in METRICS:
            continue
        raise ValidationError(
            f'check "{check.name}" queries {check.query!r}; the simulator has {", ".join(METRICS)}'
        )
    return NomadPolicy(policy)


def _check_body(metric: str, window_s: float, strategy: str, settings: dict[str, Any]) -> Any:
    return {
        "query": metric,
        "query_window": go_duration(window_s),
        "strategy": [{strategy: settings}],
    }


def _target_value_body(s: TargetValueSettings) -> dict[str, Any]:
    settings: dict[str, Any] = {"target": s.target, "threshold": s.threshold}
    if s.max_scale_up is not None:
        settings["max_scale_up"] = s.max_scale_up
    if s.max_scale_down is not None:
        settings["max_scale_down"] = s.max_scale_down
    body = nomad_policy_dict(
        query=s.metric,
        strategy="target-value",
        settings=settings,
        interval=go_duration(s.evaluation_interval_s),
    )
    body["check"] = [{"sim": _check_body(s.metric, s.query_window_s, "target-value", settings)}]
    return body


def _threshold_body(s: ThresholdSettings) -> dict[str, Any]:
    def action(sign: int) -> dict[str, Any]:
        if s.percentage is not None:
            return {"percentage": sign * s.percentage}
        return {"delta": sign * s.delta}

    def check(bounds: dict[str, float], sign: int) -> dict[str, Any]:
        settings = {**bounds, **action(sign), "within_bounds_trigger": s.within_bounds_trigger}
        # One group: tiers of one metric, so that a tier's None vote does not veto the other
        # tier's action ("Up beats None beats Down" applies between groups only).
        return {**_check_body(s.metric, s.query_window_s, "threshold", settings), "group": "sim"}

    checks: list[dict[str, Any]] = []
    if s.upper is not None:
        checks.append({"high": check({"lower_bound": s.upper}, 1)})
    if s.lower is not None:
        checks.append({"low": check({"upper_bound": s.lower}, -1)})
    return {"evaluation_interval": go_duration(s.evaluation_interval_s), "check": checks}


def _hpa(s: HpaSettings) -> NomadPolicy:
    behavior = copy.deepcopy(HPA_BEHAVIOR)
    behavior["scale_down"][0]["stabilization_window"] = go_duration(s.stabilization_window_s)
    body = nomad_policy_dict(
        query=s.metric,
        strategy="target-value",
        settings={"target": s.target, "threshold": s.tolerance},
        interval=go_duration(s.evaluation_interval_s),
        behavior=behavior,
    )
    # The HPA has no cooldown: its stabilisation window and rate rules are its damping.
    return _nomad(body, s.min, s.max, 0.0)


def _hybrid(s: HybridSettings, per_alloc_rps: float) -> SimPolicy:
    try:
        from actors.experiments.core.hybrid import HybridHistogramPolicy
    except ImportError as exc:  # the module ships separately
        raise ValidationError(f"the hybrid histogram policy is not available: {exc}") from None
    kwargs: dict[str, Any] = {
        "per_alloc_rps": s.per_alloc_rps or per_alloc_rps,
        "max": s.max,
        "interval_s": s.evaluation_interval_s,
    }
    for name in (
        "range_s",
        "bin_s",
        "head_pct",
        "tail_pct",
        "margin",
        "cv_threshold",
        "oob_threshold",
    ):
        value = getattr(s, name)
        if value is not None:
            kwargs[name] = value
    try:
        policy: SimPolicy = HybridHistogramPolicy(**kwargs)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    return policy


def _python(s: PythonSettings) -> Built:
    module_name, _, class_name = s.target.partition(":")
    if s.search_path and s.search_path not in sys.path:
        sys.path.insert(0, s.search_path)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a user's module: any error while importing it is theirs
        raise ValidationError(f"class: cannot import {module_name!r}: {exc}") from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ValidationError(f"class: {module_name!r} has no class {class_name!r}")
    try:
        policy = cls(**dict(s.args))
    except Exception as exc:  # the user's constructor: a bad argument, or its own check
        raise ValidationError(f"args: {s.target}({_show_args(s.args)}) failed: {exc}") from None
    missing = [
        name for name in ("interval_s", "wakes_on_demand", "decide") if not hasattr(policy, name)
    ]
    interval = getattr(policy, "interval_s", None)
    if missing:
        raise ValidationError(f"class: {s.target} lacks {', '.join(missing)} (see SimPolicy)")
    if not isinstance(interval, int | float) or not math.isfinite(interval) or interval <= 0:
        raise ValidationError(f"class: {s.target}.interval_s must be a number > 0")
    low = getattr(policy, "min", 0)
    built: SimPolicy = policy
    return Built(built, low if isinstance(low, int) and low >= 0 else 0)


def _show_args(args: Any) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in dict(args).items())
    return text if len(text) <= 80 else text[:77] + "..."
