"""The experiment simulator's speed: `python -m bench.experiments`.

Speed: one policy, the Nomad Autoscaler's target-value on utilisation (target 70, cooldown
1 min), replays the shared GenAI trace (Alibaba GenTD26's per-request log
`alibaba-gentd26/lora_request_trace.csv`, 23 days, or its first `--days`) as requests/s
arriving per minute, the way examples/experiments/genai-keep-alive.yaml declares it, with an
evaluation every 10 s (`interval_s: 10`), 0.03 requests/s an allocation and 23 s starts. The
experiment is built as a document and parsed (contracts.experiments.parse_experiment),
expanded (actors.experiments.grid) and run by actors.experiments.runner.run_one: the path
`drover experiment run` takes. The trace is loaded first (runner.check_traces fills the
per-process cache; `trace_load_s`), so `sim_wall_s` is the run alone: `sim_span_s` simulated
seconds, `evaluations` policy evaluations (one per interval: target-value never wakes on
demand), `sim_seconds_per_wall_second` their ratio. Target: 10,000x real time on one core.

Grid: `--grid-runs` runs (default 100), target-value swept over as many targets from 40 to
95, on the trace's first `--grid-days` (default half a day, about 0.2 s a run), run one after
another in this process (`grid_sequential_s`, the trace cache warm) and as Ray tasks on a
local Ray of `--cpus` CPUs: `grid_ray_s` from nothing (runner.run_ray starts Ray and stops
it), then in a Ray started here (`ray_start_s`) after a warm-up of a few runs, so that each
worker has loaded the trace (`grid_ray_warm_s`). `grid_speedup` is sequential / warm Ray,
`grid_speedup_cold` sequential / `grid_ray_s`; `grid_records_equal` whether both Ray runs
gave the sequential records. A grid on a 2-core machine must use both cores.

Without the shared trace the bench stops (exit 2) unless `--synthetic`: a noisy daily cycle of
the GenAI trace's mean rate (0.0135 requests/s) over the same span, points every minute. One
JSON line. The traces are found by bench.shared.shared_traces().
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from actors.experiments.core.catalog import build
from actors.experiments.grid import RunSpec, expand
from actors.experiments.runner import check_traces, ray_session, run_one, run_ray, run_sequential
from actors.experiments.traces import demand_for
from bench.keepalive import TRACE
from bench.shared import shared_traces
from contracts.experiments import ExperimentSpec, parse_experiment

DAY_S = 86_400.0
TRACE_DAYS = 23.0  # the GenAI trace's span, for the synthetic stand-in
GENAI_MEAN_RPS = 0.0135  # its requests / span
INTERVAL_S = 10.0
PER_ALLOC_RPS = 0.03  # one image at a time, as genai-keep-alive.yaml
START_DELAY_S = 23.0
MAX_GRID_RUNS = 100  # the targets are one sweep axis (at most 100 values)


def trace_doc(traces: Path | None, days: float | None) -> dict[str, Any]:
    """The experiment file's trace: the GenAI log's first `days` (all: None), or with
    `traces` None the synthetic stand-in."""
    if traces is None:
        return {
            "name": "genai-like",
            "synthetic": "diurnal",
            "mean": GENAI_MEAN_RPS,
            "amplitude": GENAI_MEAN_RPS * 0.8,
            "period_s": "24h",
            "duration_s": (TRACE_DAYS if days is None else days) * DAY_S,
            "step_s": "1m",
            "noise": 0.5,
            "seed": 1,
        }
    doc: dict[str, Any] = {
        "name": "genai",
        "requests": str(traces / TRACE),
        "preset": "genai",
        "demand": "arrivals",
        "bucket_s": 60,
    }
    if days is not None:
        doc["window"] = {"duration_s": days * DAY_S}
    return doc


def experiment(trace: dict[str, Any], targets: Sequence[float]) -> ExperimentSpec:
    """Target-value on utilisation (cooldown 1 min) at each target, every 10 s."""
    policy: dict[str, Any] = {"name": "target-value", "kind": "target-value", "cooldown": "1m"}
    if len(targets) == 1:
        policy["target"] = targets[0]
    else:
        policy["sweep"] = {"target": list(targets)}
    document = {
        "name": "bench-experiments",
        "traces": [trace],
        "policies": [policy],
        "parameters": {"start_delay_s": START_DELAY_S, "per_alloc_rps": PER_ALLOC_RPS},
        "interval_s": INTERVAL_S,
    }
    return parse_experiment(document, base_dir=os.getcwd())


def grid_targets(runs: int) -> list[float]:
    if not 1 <= runs <= MAX_GRID_RUNS:
        raise ValueError(f"a grid of 1 to {MAX_GRID_RUNS} runs, got {runs}")
    if runs == 1:
        return [70.0]
    return [round(40.0 + 55.0 * i / (runs - 1), 3) for i in range(runs)]


def span_s(run: RunSpec) -> float:
    return run.until_s if run.until_s is not None else demand_for(run.trace, run.seed).span_s


def evaluations(run: RunSpec, span: float) -> int:
    """One evaluation an interval, from 0 (the simulator's loop), for a policy that does not
    also decide when demand arrives."""
    step = run.interval_s if run.interval_s is not None else INTERVAL_S
    built = build(run.policy, run.settings, per_alloc_rps=run.per_alloc_rps)
    if built.policy.wakes_on_demand:
        raise ValueError(f"{run.policy.name} also evaluates on demand: not counted here")
    k = int(span // step)
    return k + 1 if k * step < span else k


def speed(trace: dict[str, Any]) -> dict[str, Any]:
    """One target-value run over the trace: its simulated seconds per wall second."""
    spec = experiment(trace, [70.0])
    (run,) = expand(spec)
    began = time.perf_counter()
    check_traces(spec)  # the trace read once, as `drover experiment run` does first
    load_s = time.perf_counter() - began
    span = span_s(run)
    began = time.perf_counter()
    record = run_one(run)
    wall = time.perf_counter() - began
    return {
        "trace": run.trace.name,
        "policy": "target-value 70, cooldown 1m",
        "interval_s": run.interval_s,
        "sim_span_s": span,
        "sim_wall_s": round(wall, 3),
        "sim_seconds_per_wall_second": round(span / wall),
        "evaluations": evaluations(run, span),
        "scaling_actions": record.metrics["scaling_actions"],
        "trace_load_s": round(load_s, 3),
    }


def grid(trace: dict[str, Any], runs: int, cpus: int, cold: bool = True) -> dict[str, Any]:
    """The grid one after another and on a local Ray of `cpus` CPUs (none may be running:
    the Ray figures include its start)."""
    import ray

    if ray.is_initialized():
        raise RuntimeError("a Ray is already running in this process: its start would not count")
    spec = experiment(trace, grid_targets(runs))
    specs = expand(spec)
    check_traces(spec)
    began = time.perf_counter()
    sequential = run_sequential(specs)
    sequential_s = time.perf_counter() - began
    line: dict[str, Any] = {
        "grid_runs": len(specs),
        "grid_span_s": span_s(specs[0]),
        "grid_sequential_s": round(sequential_s, 3),
        "grid_run_mean_s": round(sequential_s / len(specs), 4),
    }
    equal = True
    if cold:
        began = time.perf_counter()
        on_ray = run_ray(specs, num_cpus=cpus)
        cold_s = time.perf_counter() - began
        equal = on_ray == sequential
        line["grid_ray_s"] = round(cold_s, 3)
    began = time.perf_counter()
    with ray_session(None, cpus) as ray_cpus:
        start_s = time.perf_counter() - began
        run_ray(specs[: 2 * ray_cpus])  # each worker loads the trace
        began = time.perf_counter()
        warm = run_ray(specs)
        warm_s = time.perf_counter() - began
    equal = equal and warm == sequential
    line |= {
        "grid_ray_warm_s": round(warm_s, 3),
        "ray_start_s": round(start_s, 3),
        "grid_speedup": round(sequential_s / warm_s, 3),
    }
    if cold:
        line["grid_speedup_cold"] = round(sequential_s / line["grid_ray_s"], 3)
    return line | {"grid_records_equal": equal, "ray_cpus": ray_cpus, "cpu_count": os.cpu_count()}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--days", type=float, default=None, help="the speed run's first days")
    parser.add_argument("--grid-runs", type=int, default=100, help=f"1 to {MAX_GRID_RUNS}")
    parser.add_argument("--grid-days", type=float, default=0.5, help="the grid's first days")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="the local Ray's")
    parser.add_argument("--no-grid", action="store_true", help="only the speed run")
    parser.add_argument("--no-cold", action="store_true", help="no Ray run from nothing")
    parser.add_argument(
        "--synthetic", action="store_true", help="a synthetic stand-in if the trace is missing"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.grid_runs <= MAX_GRID_RUNS:
        parser.error(f"--grid-runs: 1 to {MAX_GRID_RUNS}, got {args.grid_runs}")
    for name in ("days", "grid_days"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            parser.error(f"--{name.replace('_', '-')}: expected days > 0, got {value}")
    if args.cpus < 1:
        parser.error(f"--cpus: expected at least 1, got {args.cpus}")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    shared = shared_traces()
    traces: Path | None = shared if (shared / TRACE).is_file() else None
    if traces is None and not args.synthetic:
        print(
            f"the shared GenAI trace is missing: {shared / TRACE}"
            " (set DROVER_SHARED_TRACES, or --synthetic for a stand-in)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    line: dict[str, Any] = {"bench": "experiments", **speed(trace_doc(traces, args.days))}
    if not args.no_grid:
        line |= grid(trace_doc(traces, args.grid_days), args.grid_runs, args.cpus, not args.no_cold)
    return line | {"python": platform.python_version()}


def main(argv: Sequence[str] | None = None) -> None:
    print(orjson.dumps(run(parse_args(argv))).decode(), flush=True)


if __name__ == "__main__":
    main()
