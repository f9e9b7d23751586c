"""A trace spec -> the step-hold demand (requests per second) a run replays.

Each process loads a trace once: runs carry the spec (a path, a shape), never the data, and
the demand is kept per (spec, seed when the trace draws from the run's seed, file version).
Series files go through the loader's own cache as well."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from actors.experiments.core.capacity import StartDelay
from actors.experiments.core.demand import StepHoldDemand, from_series
from contracts.errors import ValidationError
from contracts.experiments import DelaySamples, RequestLog, SeriesFile, Synthetic, TraceSpec
from contracts.traces import synthetic
from contracts.traces.loader import load_series
from contracts.traces.requests import arrivals, concurrency, read_requests
from contracts.traces.samples import read_samples
from contracts.traces.series import Series

CACHE_SIZE = 8


@dataclass(frozen=True, slots=True)
class Points:
    """Strictly increasing times from 0 and values (each holds until the next) over span_s."""

    times: tuple[float, ...]
    values: tuple[float, ...]
    span_s: float


_CACHE: OrderedDict[Hashable, StepHoldDemand] = OrderedDict()


def demand_for(trace: TraceSpec, seed: int) -> StepHoldDemand:
    """The trace's demand for a run of `seed`, loaded once per process."""
    key = _key(trace, seed)
    demand = _CACHE.get(key)
    if demand is None:
        points = trace_points(trace, seed)
        demand = from_series(points.times, points.values, points.span_s)
        _CACHE[key] = demand
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return demand


_DELAYS: OrderedDict[Hashable, StartDelay] = OrderedDict()


def start_delay_for(value: float | DelaySamples) -> StartDelay:
    """A run's start delay: fixed seconds, or a named distribution's samples (read once per
    process and file version)."""
    if not isinstance(value, DelaySamples):
        return StartDelay.fixed(value)
    stat = os.stat(value.path)
    key = (value, stat.st_mtime_ns, stat.st_size)
    delay = _DELAYS.get(key)
    if delay is None:
        try:
            samples = read_samples(value.path, column=value.column, unit=value.unit)
        except ValidationError as exc:
            raise ValidationError(
                [f"start_delays.{value.name}: {p}" for p in exc.problems]
            ) from None
        delay = StartDelay.sampled(samples)
        _DELAYS[key] = delay
        while len(_DELAYS) > CACHE_SIZE:
            _DELAYS.popitem(last=False)
    return delay


def _key(trace: TraceSpec, seed: int) -> Hashable:
    version: tuple[int, int] | None = None
    if isinstance(trace.source, SeriesFile | RequestLog):
        stat = os.stat(trace.source.path)
        version = (stat.st_mtime_ns, stat.st_size)
    return (repr(trace), seed if trace.uses_run_seed() else None, version)


def trace_points(trace: TraceSpec, seed: int) -> Points:
    """The trace as points: its source read, windowed, scaled, in requests per second."""
    source = trace.source
    if isinstance(source, SeriesFile):
        series = load_series(source.path)
        times, values = _dedupe(series)
        span = _natural_span(times)
        if source.values == "count":
            values = _per_second(times, values, span)
    elif isinstance(source, RequestLog):
        times, values, span = _requests(source)
    else:
        times, values = _dedupe(_synthetic(source, seed))
        span = source.duration_s
    times, values, span = _window(times, values, span, trace.start_s, trace.duration_s)
    if not times:
        raise ValidationError(f"trace {trace.name!r}: its window holds no demand")
    scale = trace.time_scale
    return Points(
        times=tuple(t * scale for t in times),
        values=tuple(v * trace.value_scale for v in values),
        span_s=span * scale,
    )


def _dedupe(series: Series) -> tuple[list[float], list[float]]:
    """Strictly increasing times: of points at the same time, the last one holds."""
    times: list[float] = []
    values: list[float] = []
    for t, v in zip(series.offsets, series.values, strict=True):
        if times and t <= times[-1]:
            values[-1] = v
            continue
        times.append(t)
        values.append(v)
    return times, values


def _natural_span(times: list[float]) -> float:
    """The last point holds for one more step (a series' points are its steps' starts)."""
    step = times[-1] - times[-2] if len(times) > 1 else 1.0
    return times[-1] + step


def _per_second(times: list[float], values: list[float], span: float) -> list[float]:
    ends = [*times[1:], span]
    return [v / (end - t) for t, v, end in zip(times, values, ends, strict=True)]


def _requests(source: RequestLog) -> tuple[list[float], list[float], float]:
    log = read_requests(source.path, source.layout, limit=source.limit)
    bucket = source.bucket_s
    if source.demand == "concurrency":
        series = concurrency(log, bucket)
        times, values = _dedupe(series)
    else:
        series = arrivals(log, bucket)
        times, values = _dedupe(series)
        values = [v / bucket for v in values]
    return times, values, times[-1] + bucket


def _synthetic(source: Synthetic, seed: int) -> Series:
    params = dict(source.params)
    kwargs: dict[str, float] = {"duration_s": source.duration_s, "noise": source.noise}
    if source.step_s is not None:
        kwargs["step_s"] = source.step_s
    draw = seed if source.seed is None else source.seed
    if source.shape == "step":
        return synthetic.step(params["base"], params["peak"], params["at_s"], seed=draw, **kwargs)
    if source.shape == "ramp":
        return synthetic.ramp(
            params["start"], params["end"], params["at_s"], params["ramp_s"], seed=draw, **kwargs
        )
    if source.shape == "spike":
        return synthetic.spike(
            params["base"], params["peak"], params["at_s"], params["width_s"], seed=draw, **kwargs
        )
    if source.shape == "diurnal":
        extra = {k: params[k] for k in ("period_s", "phase_s") if k in params}
        return synthetic.diurnal(params["mean"], params["amplitude"], seed=draw, **kwargs, **extra)
    return synthetic.poisson(params["rate_per_s"], seed=draw, **kwargs)


def _window(
    times: list[float], values: list[float], span: float, start_s: float, duration_s: float | None
) -> tuple[list[float], list[float], float]:
    """The part [start_s, start_s + duration_s) of the trace, its times from 0."""
    end = span if duration_s is None else min(span, start_s + duration_s)
    if start_s == 0 and end == span:
        return times, values, span
    out_t: list[float] = []
    out_v: list[float] = []
    held = None
    for t, v in zip(times, values, strict=True):
        if t <= start_s:
            held = v
            continue
        if t >= end:
            break
        if not out_t and held is not None:
            out_t.append(0.0)
            out_v.append(held)
        out_t.append(t - start_s)
        out_v.append(v)
    if not out_t and held is not None and start_s < end:
        out_t, out_v = [0.0], [held]
    return out_t, out_v, max(0.0, end - start_s)
