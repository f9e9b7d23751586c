"""What a live replay registers: the simulated policy, compressed in time, on a mock job whose
`load` replays the same demand.

A live replay runs the experiment's trace through the running system (the autoscaler actor,
the scheduler, a simulated fleet) `time_factor` times faster than the trace's own time: the
mock task's load model reads the trace at that factor, and every duration of the policy
(evaluation interval, cooldowns, query windows, behavior windows and rate periods) is divided
by it. The simulator's capacity model maps onto MHz: an allocation of `alloc_mhz` serves
`per_alloc_rps`, so one request per second is `alloc_mhz / per_alloc_rps` MHz of demand and
the simulator's `utilisation` (demand / capacity x 100) is the live `avg_cpu-allocated`.

Only policies run by the autoscaler's own handler (Nomad's strategies, drover's behavior
block) can be replayed live, on the utilisation metrics: `rps` and `rps_per_alloc` have no
live counterpart. A threshold check's `within_bounds_trigger` counts points of its window:
the simulator's window holds one an evaluation interval, the live one an agent sample a real
second, so the live trigger asks for the same share of its window's points. A zero duration
is "the default" to the policy parser, so a policy without a cooldown (the HPA-like one) gets
the shortest positive one, a millisecond."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contracts.autoscaling import Policy
from contracts.autoscaling.policy import (
    Check,
    DirectionBehavior,
    FixedValueConfig,
    PassThroughConfig,
    TargetValueConfig,
    ThresholdConfig,
)
from contracts.errors import ValidationError

# The simulator's metric names and the drover source's query for the same quantity.
LIVE_QUERIES: dict[str, str] = {
    "utilisation": "avg_cpu-allocated",
    "avg_cpu-allocated": "avg_cpu-allocated",
}
MIN_DURATION_S = 0.001
# The agents sample usage once a (real) second: a window must hold a few samples.
MIN_REAL_WINDOW_S = 2.0
LIVE_SAMPLES_PER_S = 1.0
MAX_TRACE_POINTS = 200_000


@dataclass(frozen=True, slots=True)
class LiveSetup:
    """How the replay maps the simulation onto the live system."""

    time_factor: float  # simulated seconds per real second
    until_s: float  # simulated seconds replayed
    per_alloc_rps: float
    start_count: int
    alloc_mhz: int = 100
    memory_mb: int = 32

    def __post_init__(self) -> None:
        if not self.time_factor > 0:
            raise ValidationError(
                f"live.time_factor: expected a number > 0, got {self.time_factor!r}"
            )
        if not self.until_s > 0:
            raise ValidationError(f"live.until_s: expected a number > 0, got {self.until_s!r}")
        if self.start_count < 1:
            # the agent's load model starts its clock at the group's first allocation
            raise ValidationError(
                f"live: start_count {self.start_count} must be at least 1 (a group at zero has "
                "no allocation to measure, so the live replay could not start its clock)"
            )

    @property
    def mhz_per_rps(self) -> float:
        return self.alloc_mhz / self.per_alloc_rps

    @property
    def real_seconds(self) -> float:
        return self.until_s / self.time_factor


def _go(seconds: float) -> str:
    """A Go duration string for a positive number of seconds (milliseconds at least)."""
    return f"{max(seconds, MIN_DURATION_S) * 1000:.3f}ms"


def _trigger(trigger: int, sim_points: float, live_points: float) -> int:
    """A threshold's `within_bounds_trigger` (a number of the window's points) for the live
    window: the same share of its points. The simulator's window holds an evaluation sample
    an interval, the live one an agent sample a real second, whatever the time factor."""
    return max(1, math.ceil(trigger * live_points / max(sim_points, 1.0) - 1e-9))


def _strategy(check: Check, sim_points: float, live_points: float) -> dict[str, Any]:
    config = check.strategy.config
    settings: dict[str, Any]
    if isinstance(config, TargetValueConfig):
        settings = {"target": config.target, "threshold": config.threshold}
        if config.max_scale_up is not None:
            settings["max_scale_up"] = config.max_scale_up
        if config.max_scale_down is not None:
            settings["max_scale_down"] = config.max_scale_down
    elif isinstance(config, ThresholdConfig):
        trigger = _trigger(config.within_bounds_trigger, sim_points, live_points)
        settings = {"within_bounds_trigger": trigger}
        for key in ("lower_bound", "upper_bound", "delta", "percentage", "value"):
            value = getattr(config, key)
            if value is not None:
                settings[key] = value
    elif isinstance(config, FixedValueConfig):
        settings = {"value": config.value}
    elif isinstance(config, PassThroughConfig):
        settings = {}
        if config.max_scale_up is not None:
            settings["max_scale_up"] = config.max_scale_up
        if config.max_scale_down is not None:
            settings["max_scale_down"] = config.max_scale_down
    else:  # pragma: no cover - the parser knows no other strategy
        raise ValidationError(f"strategy {check.strategy.name!r} cannot be replayed live")
    return {check.strategy.name: settings}


def _check(check: Check, factor: float, interval_s: float, where: str) -> dict[str, Any]:
    window = max(check.query_window_s / factor, MIN_REAL_WINDOW_S)
    if check.query_instant:
        sim_points, live_points = 1.0, 1.0
    else:
        sim_points = math.floor(check.query_window_s / interval_s + 1e-9)
        live_points = math.floor(window * LIVE_SAMPLES_PER_S + 1e-9)
    strategy = _strategy(check, sim_points, live_points)
    body: dict[str, Any] = {"source": "drover", "strategy": [strategy]}
    if check.strategy.name != "fixed-value":
        query = LIVE_QUERIES.get(check.query)
        if query is None:
            known = ", ".join(sorted(LIVE_QUERIES))
            raise ValidationError(
                f"{where} > check {check.name!r}: query {check.query!r} has no live counterpart "
                f"(live replays read one of: {known})"
            )
        body["query"] = query
        body["query_window"] = "instant" if check.query_instant else _go(window)
        if check.query_window_offset_s:
            body["query_window_offset"] = _go(check.query_window_offset_s / factor)
    if check.group:
        body["group"] = check.group
    if check.on_error is not None:
        body["on_error"] = check.on_error.value
    return {check.name: body}


def _direction(behavior: DirectionBehavior, factor: float) -> dict[str, Any]:
    body: dict[str, Any] = {"select_policy": behavior.select_policy}
    if behavior.stabilization_window_s:
        body["stabilization_window"] = _go(behavior.stabilization_window_s / factor)
    if behavior.rates:
        body["rate"] = [
            {"type": r.kind, "value": r.value, "period": _go(r.period_s / factor)}
            for r in behavior.rates
        ]
    return body


def compressed_policy(policy: Policy, factor: float, where: str = "policy") -> dict[str, Any]:
    """The policy as a job file's `scaling { policy { ... } }` body, `factor` times faster,
    reading the drover source's metrics."""
    body: dict[str, Any] = {
        "evaluation_interval": _go(policy.evaluation_interval_s / factor),
        "cooldown": _go(policy.cooldown_s / factor),
        "cooldown_on_scale_up": _go(policy.cooldown_on_scale_up_s / factor),
        "on_check_error": policy.on_check_error.value,
        "check": [
            _check(check, factor, policy.evaluation_interval_s, where) for check in policy.checks
        ],
    }
    if policy.dry_run:
        body["dry_run"] = True
    behavior = policy.behavior
    if behavior.active:
        body["behavior"] = [
            {
                "count_starting": behavior.count_starting,
                "scale_up": [_direction(behavior.scale_up, factor)],
                "scale_down": [_direction(behavior.scale_down, factor)],
            }
        ]
    return body


def trace_csv(times: Sequence[float], values: Sequence[float], setup: LiveSetup) -> str:
    """The demand as the mock load model's `timestamp,value` trace, in MHz, up to `until_s`
    (then zero, so the group's demand ends with the replay)."""
    rows = ["timestamp,value"]
    for t, v in zip(times, values, strict=True):
        if t >= setup.until_s:
            break
        rows.append(f"{t:g},{v * setup.mhz_per_rps:.6g}")
    if len(rows) > MAX_TRACE_POINTS:
        raise ValidationError(
            f"live: the replay has {len(rows) - 1} demand points, more than {MAX_TRACE_POINTS}; "
            "lower live.until_s"
        )
    rows.append(f"{setup.until_s:g},0")
    return "\n".join(rows) + "\n"


def live_job(
    job_id: str, policy: Policy, setup: LiveSetup, trace_path: str, where: str = "policy"
) -> dict[str, Any]:
    """The Nomad JSON job (as `drover job run` sends it) of one live replay: a service group of
    mock allocations carrying the trace's demand, scaled by the compressed policy."""
    return {
        "ID": job_id,
        "Name": job_id,
        "Type": "service",
        "Datacenters": ["*"],
        "TaskGroups": [
            {
                "Name": "replay",
                "Count": setup.start_count,
                "Scaling": {
                    "Min": policy.min,
                    "Max": policy.max,
                    "Enabled": True,
                    "Policy": compressed_policy(policy, setup.time_factor, where),
                },
                "Tasks": [
                    {
                        "Name": "app",
                        "Driver": "mock",
                        "Config": {
                            "load": {
                                "shape": "trace",
                                "trace": trace_path,
                                "time_factor": setup.time_factor,
                            }
                        },
                        "Resources": {"CPU": setup.alloc_mhz, "MemoryMB": setup.memory_mb},
                    }
                ],
            }
        ],
    }
