"""The typed records of an experiment file: traces, policies (one settings record per kind),
grid axes, seeds and the Pareto plot's cost and SLO measures.

A policy kind's settings are a frozen dataclass whose fields carry their YAML key, their
check and their default (Nomad Autoscaler's, the HPA's, dstack's, ...) in their metadata: the
parser reads them, a sweep's values pass the same check, and `PolicySpec.variants` applies
them with `dataclasses.replace`."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, replace
from typing import Any, Literal, get_args

from contracts.autoscaling import Policy
from contracts.experiments.fields import (
    Check,
    choice,
    duration,
    integer,
    mapping,
    number,
    optional,
)
from contracts.fast_init import install_fast_inits
from contracts.traces.requests import RequestLayout

MAX_COUNT = 100_000
# The simulator's metrics (actors/experiments/core/state.METRICS) a Nomad check may query.
SIM_METRICS = ("utilisation", "avg_cpu", "avg_cpu-allocated", "rps_per_alloc", "rps")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
NAME_HINT = "a name of letters, digits, '_', '.' and '-' (at most 64, a letter or digit first)"

PolicyKind = Literal[
    "target-value",
    "threshold",
    "hpa",
    "dstack",
    "keep-alive",
    "hybrid-histogram",
    "nomad",
    "policy-file",
    "python",
]
POLICY_KINDS: tuple[PolicyKind, ...] = get_args(PolicyKind)


def setting(check: Check, default: Any = MISSING, *, key: str | None = None) -> Any:
    """A settings field read from YAML key `key` (default: the field's name)."""
    meta = {"check": check, "key": key}
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def _count(default: int) -> Any:
    return setting(integer(minimum=0, maximum=MAX_COUNT), default)


def _interval(default: float) -> Any:
    return setting(duration(positive=True), default, key="evaluation_interval")


# -- the Nomad Autoscaler's strategies, on one simulated metric -------------------------------


@dataclass(frozen=True, slots=True)
class TargetValueSettings:
    """One check, `strategy "target-value"`; Nomad's defaults (10 s, 5 min cooldown, 1 min
    window, threshold 0.01). The metric's target is a utilisation % for `utilisation`."""

    min: int = _count(1)
    max: int = _count(100)
    metric: str = setting(choice(SIM_METRICS), "utilisation")
    target: float = setting(number(positive=True), 70.0)
    threshold: float = setting(number(minimum=0), 0.01)
    max_scale_up: int | None = setting(optional(integer(minimum=0)), None)
    max_scale_down: int | None = setting(optional(integer(minimum=0)), None)
    evaluation_interval_s: float = _interval(10.0)
    cooldown_s: float = setting(duration(), 300.0, key="cooldown")
    query_window_s: float = setting(duration(positive=True), 60.0, key="query_window")


@dataclass(frozen=True, slots=True)
class ThresholdSettings:
    """Two checks, `strategy "threshold"`, as Nomad's threshold examples pair them: add
    `delta` (or `percentage` %) while the metric is >= `upper`, remove as many while it is
    below `lower`; either bound may be null (no such check), not both."""

    min: int = _count(1)
    max: int = _count(100)
    metric: str = setting(choice(SIM_METRICS), "utilisation")
    upper: float | None = setting(optional(number()), 80.0)
    lower: float | None = setting(optional(number()), 30.0)
    delta: int = setting(integer(minimum=1, maximum=MAX_COUNT), 1)
    percentage: float | None = setting(optional(number(positive=True)), None)
    within_bounds_trigger: int = setting(integer(minimum=1, maximum=1000), 5)
    evaluation_interval_s: float = _interval(10.0)
    cooldown_s: float = setting(duration(), 300.0, key="cooldown")
    query_window_s: float = setting(duration(positive=True), 60.0, key="query_window")


@dataclass(frozen=True, slots=True)
class HpaSettings:
    """The HPA as drover expresses it (actors/experiments/core/policies.hpa_like): target
    value with tolerance 0.1, a scale-down stabilisation window, the HPA's default rate
    rules, a 15 s sync period and no cooldown. `target` 80 is `kubectl autoscale`'s."""

    min: int = _count(1)
    max: int = _count(100)
    metric: str = setting(choice(SIM_METRICS), "utilisation")
    target: float = setting(number(positive=True), 80.0)
    tolerance: float = setting(number(minimum=0), 0.1)
    stabilization_window_s: float = setting(duration(), 300.0, key="stabilization_window")
    evaluation_interval_s: float = _interval(15.0)


@dataclass(frozen=True, slots=True)
class DstackSettings:
    """dstack's service autoscaler: `scaling: {metric: rps, target: ...}` and its delays."""

    target: float = setting(number(positive=True))  # requests/s per replica; dstack needs it
    min: int = _count(0)
    max: int = _count(100)
    window_s: float = setting(duration(positive=True), 60.0, key="window")
    scale_up_delay_s: float = setting(duration(), 300.0, key="scale_up_delay")
    scale_down_delay_s: float = setting(duration(), 600.0, key="scale_down_delay")
    evaluation_interval_s: float = _interval(10.0)


@dataclass(frozen=True, slots=True)
class KeepAliveSettings:
    """Scale to zero with a fixed keep-alive (AWS Lambda's ~10 min, Azure's 20 min)."""

    keep_alive_s: float = setting(duration(), 600.0, key="keep_alive")
    # Requests/s one allocation serves when scaling up; null: the run's per_alloc_rps.
    per_alloc_rps: float | None = setting(optional(number(positive=True)), None)
    max: int = _count(100)
    evaluation_interval_s: float = _interval(10.0)


@dataclass(frozen=True, slots=True)
class HybridSettings:
    """Serverless in the Wild's hybrid histogram keep-alive; null: the policy's default."""

    range_s: float | None = setting(optional(duration(positive=True)), None, key="range")
    bin_s: float | None = setting(optional(duration(positive=True)), None, key="bin")
    head_pct: float | None = setting(optional(number(positive=True)), None)
    tail_pct: float | None = setting(optional(number(positive=True)), None)
    margin: float | None = setting(optional(number(minimum=0)), None)
    cv_threshold: float | None = setting(optional(number(minimum=0)), None)
    oob_threshold: float | None = setting(optional(number(minimum=0)), None)
    per_alloc_rps: float | None = setting(optional(number(positive=True)), None)
    max: int = _count(100)
    evaluation_interval_s: float = _interval(10.0)


@dataclass(frozen=True, slots=True)
class NomadSettings:
    """A raw Nomad Autoscaler policy body (a job group's `scaling { policy { ... } }`),
    parsed by the autoscaler's own parser; its checks query the simulator's metrics."""

    policy: Mapping[str, Any] = setting(mapping)
    min: int = _count(1)
    max: int = _count(100)


@dataclass(frozen=True, slots=True)
class PolicyFileSettings:
    """A scaling policy file (HCL as `-autoscaler-policy-dir` reads it, or a group's JSON
    `Scaling` object); `policy` picks one of several `scaling` blocks by name."""

    file: str = setting(lambda v: v)  # checked and resolved by the parser
    policy: str | None = setting(lambda v: v, None)
    min: int | None = setting(optional(integer(minimum=0, maximum=MAX_COUNT)), None)
    max: int | None = setting(optional(integer(minimum=0, maximum=MAX_COUNT)), None)
    parsed: Policy | None = None  # filled in by the parser


@dataclass(frozen=True, slots=True)
class PythonSettings:
    """A user's SimPolicy class, `module:Class`, built with `args` as keyword arguments; the
    module is looked up beside the experiment file first."""

    target: str = setting(lambda v: v, key="class")  # checked by the parser
    args: Mapping[str, Any] = field(default_factory=dict, metadata={"check": mapping, "key": None})
    search_path: str = ""  # the experiment file's folder


PolicySettings = (
    TargetValueSettings
    | ThresholdSettings
    | HpaSettings
    | DstackSettings
    | KeepAliveSettings
    | HybridSettings
    | NomadSettings
    | PolicyFileSettings
    | PythonSettings
)
SETTINGS: dict[str, type[Any]] = {
    "target-value": TargetValueSettings,
    "threshold": ThresholdSettings,
    "hpa": HpaSettings,
    "dstack": DstackSettings,
    "keep-alive": KeepAliveSettings,
    "hybrid-histogram": HybridSettings,
    "nomad": NomadSettings,
    "policy-file": PolicyFileSettings,
    "python": PythonSettings,
}


@dataclass(frozen=True, slots=True)
class Axis:
    """One grid axis: its YAML name, checked values and their labels as the file wrote them
    (for tables and CSV); `field` is the settings field (or Python argument) it sets."""

    name: str
    values: tuple[Any, ...]
    labels: tuple[str, ...]
    field: str = ""


@dataclass(frozen=True, slots=True)
class PolicySpec:
    name: str
    kind: PolicyKind
    settings: PolicySettings
    sweep: tuple[Axis, ...] = ()
    where: str = ""  # "policies[2]", for errors found later (building, importing)

    def variants(self) -> list[tuple[PolicySettings, tuple[tuple[str, str], ...]]]:
        """The settings of every point of the sweep's grid, in the file's order, with the
        (axis, label) pairs that name it."""
        out: list[tuple[PolicySettings, tuple[tuple[str, str], ...]]] = []
        for point in itertools.product(*(range(len(a.values)) for a in self.sweep)):
            settings = self.settings
            labels: list[tuple[str, str]] = []
            for axis, i in zip(self.sweep, point, strict=True):
                settings = apply_setting(settings, axis.field, axis.values[i])
                labels.append((axis.name, axis.labels[i]))
            out.append((settings, tuple(labels)))
        return out

    @property
    def variant_count(self) -> int:
        n = 1
        for axis in self.sweep:
            n *= len(axis.values)
        return n


def apply_setting(settings: PolicySettings, name: str, value: Any) -> PolicySettings:
    if isinstance(settings, PythonSettings):
        return replace(settings, args={**settings.args, name: value})
    changed: PolicySettings = replace(settings, **{name: value})
    return changed


# -- traces -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeriesFile:
    """NAB, per-minute counts or Azure Functions (contracts.traces.loader.load_series).
    `values: count` reads each value as a count over its step, divided into requests/s."""

    path: str
    values: Literal["rate", "count"] = "rate"


@dataclass(frozen=True, slots=True)
class RequestLog:
    """A per-request CSV (contracts.traces.requests): requests/s arriving per bucket, or the
    mean concurrency per bucket (then `per_alloc_rps` reads as requests one allocation runs
    at a time)."""

    path: str
    layout: RequestLayout
    demand: Literal["arrivals", "concurrency"]
    bucket_s: float = 60.0
    limit: int | None = None


SYNTHETIC_SHAPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # shape: (required parameters, optional ones)
    "step": (("base", "peak", "at_s"), ()),
    "ramp": (("start", "end", "at_s", "ramp_s"), ()),
    "spike": (("base", "peak", "at_s", "width_s"), ()),
    "diurnal": (("mean", "amplitude"), ("period_s", "phase_s")),
    "poisson": (("rate_per_s",), ()),
}


@dataclass(frozen=True, slots=True)
class Synthetic:
    """contracts.traces.synthetic's shapes; `seed` null draws the noise (and Poisson
    arrivals) from the run's seed, so that seeds vary the trace."""

    shape: str
    params: tuple[tuple[str, float], ...]
    duration_s: float
    step_s: float | None = None
    noise: float = 0.0
    seed: int | None = None


TraceSource = SeriesFile | RequestLog | Synthetic


@dataclass(frozen=True, slots=True)
class TraceSpec:
    """A demand: its source, then a window in the trace's own time (`start_s`,
    `duration_s`), then `time_scale` (stretching time, values unchanged) and
    `value_scale` (multiplying values)."""

    name: str
    source: TraceSource
    time_scale: float = 1.0
    value_scale: float = 1.0
    start_s: float = 0.0
    duration_s: float | None = None

    def uses_run_seed(self) -> bool:
        return isinstance(self.source, Synthetic) and self.source.seed is None


# -- the experiment ---------------------------------------------------------------------------

CostMetric = Literal["allocation-hours", "idle-memory", "node-hours"]
SloMetric = Literal["violation-minutes", "cold-start-share", "violated-requests"]
COST_METRICS: tuple[CostMetric, ...] = get_args(CostMetric)
SLO_METRICS: tuple[SloMetric, ...] = get_args(SloMetric)


@dataclass(frozen=True, slots=True)
class Pareto:
    """The Pareto plot's axes: cost (allocation-hours, or idle memory in GB-hours of
    `memory_mb` allocations) against SLO violations."""

    cost: CostMetric = "allocation-hours"
    memory_mb: float = 1024.0
    slo: SloMetric = "violation-minutes"


@dataclass(frozen=True, slots=True)
class DelaySamples:
    """A named start-delay distribution (`start_delays:`): samples read from one column of a
    CSV (or the CSV in a .tar.gz), in `unit`; a run draws each start from them with its seed.
    `parameters.start_delay_s` names it where it would give seconds."""

    name: str
    path: str
    column: str = "value"
    unit: str = "s"


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """`queue:`: requests beyond capacity wait (a fluid FIFO queue) instead of being lost;
    one that waits more than `slo_wait_s` violates the SLO."""

    slo_wait_s: float


@dataclass(frozen=True, slots=True)
class NodeShapeSpec:
    """A node of a `placement: core` cluster: its size and the part other work takes."""

    cpu_mhz: int = 4000
    memory_mb: int = 8192
    load_cpu: int = 0
    load_memory_mb: int = 0


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """`cluster:`: the allocations run on a pool of nodes that a cluster autoscaler grows
    (after `node_delay_s` of provisioning, up to `max_nodes`: beyond it allocations are
    blocked) and shrinks (a node empty for `node_idle_s`, down to `min_nodes`).

    `placement: slots` counts `allocs_per_node` slots a node; `placement: core` places each
    allocation (`ask_cpu` MHz, `ask_memory_mb`) with drover's real scheduler on nodes of the
    `shapes` (in turn), each with its background load, so fragmentation is real."""

    placement: Literal["slots", "core"] = "slots"
    allocs_per_node: int = 1
    ask_cpu: int = 1000
    ask_memory_mb: int = 1024
    shapes: tuple[NodeShapeSpec, ...] = (NodeShapeSpec(),)
    initial_nodes: int = 0
    min_nodes: int = 0
    max_nodes: int | None = None
    node_delay_s: float = 0.0
    node_idle_s: float = 300.0


@dataclass(frozen=True, slots=True)
class LiveSettings:
    """`drover experiment run -live`: every duration of the trace and the policy divided by
    `time_factor`, the first `until_s` simulated seconds of each trace (default: all of it,
    or the experiment's `until_s`), an allocation of `alloc_mhz` serving `per_alloc_rps`;
    refused when the replays would take more than `max_real_s` of real time in all."""

    time_factor: float = 30.0
    until_s: float | None = None
    alloc_mhz: int = 100
    max_real_s: float = 3600.0


# The run parameters, in the order of every table: grid axes of every policy.
RUN_PARAMETERS = ("start_delay_s", "per_alloc_rps", "start_count")


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    name: str
    traces: tuple[TraceSpec, ...]
    policies: tuple[PolicySpec, ...]
    parameters: tuple[Axis, ...]  # RUN_PARAMETERS' axes; start_count None: the policy's min
    seeds: tuple[int, ...] = (0,)
    interval_s: float | None = None  # None: each policy's own evaluation interval
    until_s: float | None = None  # None: each trace's span
    pareto: Pareto = Pareto()
    live: LiveSettings = LiveSettings()
    queue: QueueSettings | None = None
    cluster: ClusterSettings | None = None
    start_delays: tuple[DelaySamples, ...] = ()
    description: str = ""
    path: str = ""
    document: Mapping[str, Any] = field(default_factory=dict)  # the file as loaded

    @property
    def runs(self) -> int:
        per_policy = 1
        for axis in self.parameters:
            per_policy *= len(axis.values)
        variants = sum(p.variant_count for p in self.policies)
        return len(self.traces) * variants * per_policy * len(self.seeds)

    def parameter(self, name: str) -> Axis:
        return next(a for a in self.parameters if a.name == name)


install_fast_inits(__name__)
