"""The load model of mock tasks: the CPU demand a simulated service sees, shared by its
running allocations, so that what they report falls when the autoscaler adds allocations.

A mock task declares `load = { shape = "step", base = 100, peak = 400, at = "30s" }` (all
keys in LOAD_KEYS). The demand d(t), in MHz, is the whole group's (for a group of several
mock tasks, each task's load is that task's part of it); every running allocation of the
group reports d(t) / n, n being how many of the group's allocations this agent runs now.

Time t is simulated seconds since the origin, the moment this agent first ran an allocation
of the (namespace, job, group), times `time_factor`. Origins and counts are per agent: one
simulated agent hosts every simulated fleet, so the loop is consistent there; groups spread
over several real agents each see their own origin and their local share.

Shapes (`shape`, constant by default; `at` defaults to 0, and each shape requires the other
keys it reads; durations are simulated seconds from the origin; demand is never below 0):
    constant  base
    step      base before `at`, peak from then on
    ramp      base before `at`, then linear to peak over `duration`, then peak
    spike     peak from `at` for `duration`, base otherwise
    sine      base before `at`, then base + peak * sin(2 pi (t - at) / duration)
    trace     the trace at `trace`, replayed from its start (load_trace.py: `timestamp,value`,
              per-minute counts, or Azure Functions' per-minute rows), each value times
              `per_unit_mhz` (default 1)
`noise` multiplies each allocation's share by a uniform factor in [1 - noise, 1 + noise],
the same for the same allocation and sample time. `memory_mb` is each allocation's resident
memory, whatever the demand.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from actors.agent.core.duration import duration_seconds
from actors.agent.core.load_trace import TraceSeries, load_trace
from contracts.traces.synthetic import ramp_value, spike_value, step_value

SHAPES = ("constant", "step", "ramp", "spike", "sine", "trace")
_COMMON = frozenset({"shape", "noise", "memory_mb", "time_factor"})
# The keys each shape reads, and those of them it cannot do without.
_USES: dict[str, frozenset[str]] = {
    "constant": frozenset({"base"}),
    "step": frozenset({"base", "peak", "at"}),
    "ramp": frozenset({"base", "peak", "at", "duration"}),
    "spike": frozenset({"base", "peak", "at", "duration"}),
    "sine": frozenset({"base", "peak", "at", "duration"}),
    "trace": frozenset({"trace", "per_unit_mhz"}),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "constant": ("base",),
    "step": ("base", "peak"),
    "ramp": ("base", "peak", "duration"),
    "spike": ("base", "peak", "duration"),
    "sine": ("base", "peak", "duration"),
    "trace": ("trace",),
}
LOAD_KEYS = _COMMON.union(*_USES.values())

GroupKey = tuple[str, str, str]
"""(namespace, job ID, task group)."""


@dataclass(frozen=True, slots=True)
class LoadModel:
    """A validated `load` block; `demand(t)` is the group's CPU demand in MHz."""

    shape: str
    base: float = 0.0
    peak: float = 0.0
    at: float = 0.0
    duration: float = 0.0
    noise: float = 0.0
    trace: TraceSeries | None = None
    memory_mb: float = 0.0
    time_factor: float = 1.0
    per_unit_mhz: float = 1.0  # a trace value's MHz (a per-minute count: one invocation's)

    def demand(self, t: float) -> float:
        """The group's demand `t` simulated seconds after its origin."""
        shape, base, peak = self.shape, self.base, self.peak
        if shape == "constant":
            return base
        if shape == "trace":
            assert self.trace is not None
            return self.trace.value_at(t) * self.per_unit_mhz
        if shape == "step":
            return step_value(t, base, peak, self.at)
        if shape == "ramp":
            return ramp_value(t, base, peak, self.at, self.duration)
        if shape == "spike":
            return spike_value(t, base, peak, self.at, self.duration)
        # sine: base until `at`, then base + peak * sin over `duration`, never below 0
        since = t - self.at
        if since < 0:
            return base
        return max(0.0, base + peak * math.sin(2 * math.pi * since / self.duration))


def parse_load(config: object) -> LoadModel:
    """The model of a `load` block; raises ValueError listing every problem (`load.peak:
    expected a number >= 0, got 'high'`)."""
    model, problems = _build(config)
    if problems:
        raise ValueError("; ".join(problems))
    assert model is not None
    return model


def load_problems(config: object) -> list[str]:
    """What is wrong with a `load` block, each naming its field (empty: valid)."""
    return _build(config)[1]


def _build(config: object) -> tuple[LoadModel | None, list[str]]:
    if not isinstance(config, Mapping):
        return None, [f"load: expected a map, got {config!r}"]
    problems = [f'load: unknown key "{k}"' for k in sorted(map(str, config)) if k not in LOAD_KEYS]
    shape = config.get("shape", "constant")
    if shape not in SHAPES:
        problems.append(f"load.shape: expected one of {', '.join(SHAPES)}, got {shape!r}")
        return None, problems
    uses = _USES[shape]
    problems += [
        f'load.{k}: not used by shape "{shape}"'
        for k in sorted(map(str, config))
        if k in LOAD_KEYS and k not in _COMMON and k not in uses
    ]
    problems += [
        f'load.{k}: required by shape "{shape}"' for k in _REQUIRED[shape] if k not in config
    ]
    number = partial(_number, config, problems)
    base, peak, memory_mb = number("base"), number("peak"), number("memory_mb")
    noise, time_factor = number("noise"), number("time_factor", 1.0)
    if noise >= 1:
        problems.append(f"load.noise: expected a fraction below 1, got {config['noise']!r}")
    if time_factor == 0:
        problems.append("load.time_factor: expected a number > 0, got 0")
    at, duration = _duration(config, "at", problems), _duration(config, "duration", problems)
    if shape in ("ramp", "spike", "sine") and "duration" in config and duration == 0:
        problems.append(f'load.duration: must be more than 0 for shape "{shape}"')
    trace = None
    if "trace" in config:
        path = config["trace"]
        if not isinstance(path, str) or not path:
            problems.append(f"load.trace: expected a file path, got {path!r}")
        else:
            try:
                trace = load_trace(path)
            except ValueError as exc:
                problems.append(f"load.trace: {exc}")
    per_unit_mhz = number("per_unit_mhz", 1.0)
    if problems:
        return None, problems
    model = LoadModel(
        shape, base, peak, at, duration, noise, trace, memory_mb, time_factor, per_unit_mhz
    )
    return model, []


def _number(
    config: Mapping[str, object], problems: list[str], key: str, default: float = 0.0
) -> float:
    """config[key] as a finite number >= 0 (`default` if absent); a problem otherwise."""
    if key not in config:
        return default
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        problems.append(f"load.{key}: expected a number >= 0, got {value!r}")
        return default
    if not math.isfinite(value):
        problems.append(f"load.{key}: expected a finite number, got {value!r}")
        return default
    return float(value)


def _duration(config: Mapping[str, object], key: str, problems: list[str]) -> float:
    if key not in config:
        return 0.0
    try:
        return duration_seconds(config[key])
    except ValueError as exc:
        problems.append(f"load.{key}: {exc}")
        return 0.0


def noise_factor(noise: float, alloc_id: str, sample_time: float) -> float:
    """A factor in [1 - noise, 1 + noise], the same for the same allocation and time (a
    string seed is hashed with SHA-512, so it does not depend on the process)."""
    if noise == 0:
        return 1.0
    return random.Random(f"{alloc_id}@{sample_time!r}").uniform(1 - noise, 1 + noise)


class GroupLoads:
    """One agent's view of its load-bearing mock tasks: each group's origin, and which
    allocations run each of its tasks now (their count divides the demand)."""

    __slots__ = ("_origins", "_running")

    def __init__(self) -> None:
        self._origins: dict[GroupKey, float] = {}
        self._running: dict[tuple[GroupKey, str], set[str]] = {}

    def begin(self, group: GroupKey, task: str, alloc_id: str, now: float) -> None:
        self._origins.setdefault(group, now)
        self._running.setdefault((group, task), set()).add(alloc_id)

    def end(self, group: GroupKey, task: str, alloc_id: str) -> None:
        running = self._running.get((group, task))
        if running is not None:
            running.discard(alloc_id)
            if not running:
                del self._running[(group, task)]

    def running(self, group: GroupKey, task: str) -> int:
        return len(self._running.get((group, task), ()))

    def simulated_time(self, model: LoadModel, group: GroupKey, now: float) -> float:
        """Simulated seconds since the group's origin (0 before it has one)."""
        origin = self._origins.get(group, now)
        return max(0.0, now - origin) * model.time_factor

    def share(
        self, model: LoadModel, group: GroupKey, task: str, alloc_id: str, now: float
    ) -> float:
        """The CPU (MHz) one running allocation of the group uses at `now`: its part of the
        demand, with its noise; 0 for an allocation that is not running."""
        running = self._running.get((group, task))
        if not running or alloc_id not in running:
            return 0.0
        demand = model.demand(self.simulated_time(model, group, now))
        return demand / len(running) * noise_factor(model.noise, alloc_id, now)
