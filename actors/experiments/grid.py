"""An experiment's grid as run specs, in one deterministic order: trace, policy, the policy's
sweep point, run parameters (start delay, per-allocation RPS, start count), seed; all in the
file's order. A run spec is small (a trace's path or shape, never its data), so that it can be
shipped to a Ray task as it is."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from contracts.experiments import (
    ClusterSettings,
    DelaySamples,
    ExperimentSpec,
    PolicySettings,
    PolicySpec,
    TraceSpec,
)

# Points of each run's demand/capacity trajectory kept for the plots: at most 2,000 a run and
# about a million in all, so that results.json stays a few tens of MB at the largest grid.
MAX_POINTS_PER_RUN = 2000
MAX_POINTS_TOTAL = 1_000_000
MIN_POINTS_PER_RUN = 50


@dataclass(frozen=True, slots=True)
class RunSpec:
    index: int
    trace: TraceSpec
    policy: PolicySpec
    settings: PolicySettings  # the policy's settings at this point of its sweep
    sweep: tuple[tuple[str, str], ...]  # (axis, label) of the policy's own axes
    parameters: tuple[tuple[str, str], ...]  # (axis, label) of the run parameters
    start_delay_s: float | DelaySamples  # seconds, or a distribution to draw from
    per_alloc_rps: float
    start_count: int | None  # None: the policy's minimum
    seed: int
    interval_s: float | None
    until_s: float | None
    points: int  # the trajectory's bound
    memory_mb: float
    queue_slo_wait_s: float | None = None  # None: the excess is lost, not queued
    cluster: ClusterSettings | None = None  # None: room for every allocation


def trajectory_points(runs: int) -> int:
    return max(MIN_POINTS_PER_RUN, min(MAX_POINTS_PER_RUN, MAX_POINTS_TOTAL // max(runs, 1)))


def expand(spec: ExperimentSpec) -> list[RunSpec]:
    points = trajectory_points(spec.runs)
    queue = None if spec.queue is None else spec.queue.slo_wait_s
    axes = spec.parameters
    combos = list(itertools.product(*(range(len(a.values)) for a in axes)))
    runs: list[RunSpec] = []
    for trace in spec.traces:
        for policy in spec.policies:
            for settings, sweep in policy.variants():
                for combo in combos:
                    chosen = {a.name: a.values[i] for a, i in zip(axes, combo, strict=True)}
                    labels = tuple((a.name, a.labels[i]) for a, i in zip(axes, combo, strict=True))
                    for seed in spec.seeds:
                        runs.append(
                            RunSpec(
                                index=len(runs),
                                trace=trace,
                                policy=policy,
                                settings=settings,
                                sweep=sweep,
                                parameters=labels,
                                start_delay_s=_delay(chosen["start_delay_s"]),
                                per_alloc_rps=float(chosen["per_alloc_rps"]),
                                start_count=chosen["start_count"],
                                seed=seed,
                                interval_s=spec.interval_s,
                                until_s=spec.until_s,
                                points=points,
                                memory_mb=spec.pareto.memory_mb,
                                queue_slo_wait_s=queue,
                                cluster=spec.cluster,
                            )
                        )
    return runs


def _delay(value: float | DelaySamples) -> float | DelaySamples:
    return value if isinstance(value, DelaySamples) else float(value)


def sweep_columns(spec: ExperimentSpec) -> list[str]:
    """The policies' own axes, in order of first appearance: the table's extra columns."""
    names: list[str] = []
    for policy in spec.policies:
        for axis in policy.sweep:
            if axis.name not in names:
                names.append(axis.name)
    return names
