"""Running an experiment's runs: one run (load the trace's demand, build a fresh policy,
simulate, measure, downsample), and all of them in this process one after another or as Ray
tasks (a local Ray, or the cluster at `address`), with a progress bar on stderr.

Ray tasks get run specs (paths and shapes, never trace data) in small chunks; each worker
process loads a trace once (traces.demand_for). Records come back in the grid's order either
way, so the sequential and the Ray results are the same."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from actors.experiments.core.capacity import CapacityModel, QueueModel, Segment
from actors.experiments.core.catalog import build
from actors.experiments.core.cluster import ClusterModel, NodePool
from actors.experiments.core.placement_core import CorePool, NodeShape
from actors.experiments.core.simulator import simulate
from actors.experiments.grid import RunSpec
from actors.experiments.results import RunRecord, Trajectory, rounded
from actors.experiments.traces import demand_for, start_delay_for
from contracts.errors import ValidationError
from contracts.experiments import ExperimentSpec
from contracts.resources import Resources

Progress = Callable[[int], None]
MAX_CHUNK = 16


def check_traces(spec: ExperimentSpec) -> None:
    """Load every trace (for the first seed) and start-delay distribution once here, so that a
    file that cannot be read fails before any run starts, naming it."""
    problems: list[str] = []
    for i, trace in enumerate(spec.traces):
        try:
            demand_for(trace, spec.seeds[0])
        except ValidationError as exc:
            problems.extend(f"traces[{i}] ({trace.name}): {p}" for p in exc.problems)
    for delay in spec.start_delays:
        try:
            start_delay_for(delay)
        except ValidationError as exc:
            problems.extend(exc.problems)
        except OSError as exc:
            problems.append(f"start_delays.{delay.name}: {exc.strerror or exc}")
    if problems:
        raise ValidationError(problems)


def run_one(run: RunSpec) -> RunRecord:
    demand = demand_for(run.trace, run.seed)
    built = build(run.policy, run.settings, per_alloc_rps=run.per_alloc_rps)
    start = built.min if run.start_count is None else run.start_count
    queue = None if run.queue_slo_wait_s is None else QueueModel(run.queue_slo_wait_s)
    result = simulate(
        demand,
        built.policy,
        interval_s=run.interval_s,
        start_count=start,
        start_delay=start_delay_for(run.start_delay_s),
        per_alloc_rps=CapacityModel(run.per_alloc_rps, queue),
        cluster=_cluster(run),
        seed=run.seed,
        until_s=run.until_s,
    )
    m = result.metrics
    segments = result.ledger.segments
    idle_hours = _idle_allocation_hours(segments, run.per_alloc_rps)
    metrics: dict[str, float] = {
        "theta_u": rounded(m.theta_u),
        "theta_o": rounded(m.theta_o),
        "tau_u": rounded(m.tau_u),
        "tau_o": rounded(m.tau_o),
        "slack": rounded(m.slack),
        "slo_violation_min": rounded(m.slo_violation_min),
        "violated_requests": rounded(m.violated_requests),
        "requests": rounded(m.requests),
        "cold_starts": m.cold_starts,
        "cold_start_share": rounded(m.cold_starts / m.requests if m.requests else 0.0),
        "allocation_hours": rounded(m.allocation_hours),
        "idle_allocation_hours": rounded(idle_hours),
        "idle_memory_gb_hours": rounded(idle_hours * run.memory_mb / 1024.0),
        "scaling_actions": m.scaling_actions,
        "reversals": m.reversals,
    }
    if result.cluster is not None:
        c = result.cluster
        metrics["node_hours"] = rounded(c.node_hours)
        metrics["peak_nodes"] = c.peak_nodes
        metrics["blocked_allocation_hours"] = rounded(c.blocked_alloc_hours)
    if queue is not None:
        ledger = result.ledger
        metrics["mean_wait_s"] = rounded(ledger.mean_wait_s)
        metrics["max_backlog"] = rounded(ledger.max_backlog)
    return RunRecord(
        index=run.index,
        trace=run.trace.name,
        policy=run.policy.name,
        kind=run.policy.kind,
        seed=run.seed,
        parameters=run.parameters,
        sweep=run.sweep,
        metrics=metrics,
        trajectory=downsample(segments, result.until_s, run.points),
    )


def _cluster(run: RunSpec) -> ClusterModel | None:
    c = run.cluster
    if c is None:
        return None
    if c.placement == "core":
        return CorePool(
            ask=Resources(cpu=c.ask_cpu, memory_mb=c.ask_memory_mb),
            shapes=tuple(
                NodeShape(s.cpu_mhz, s.memory_mb, s.load_cpu, s.load_memory_mb) for s in c.shapes
            ),
            initial_nodes=c.initial_nodes,
            min_nodes=c.min_nodes,
            max_nodes=c.max_nodes,
            node_delay_s=c.node_delay_s,
            node_idle_s=c.node_idle_s,
        )
    return NodePool(
        allocs_per_node=c.allocs_per_node,
        initial_nodes=c.initial_nodes,
        min_nodes=c.min_nodes,
        max_nodes=c.max_nodes,
        node_delay_s=c.node_delay_s,
        node_idle_s=c.node_idle_s,
    )


def _idle_allocation_hours(segments: Sequence[Segment], per_alloc_rps: float) -> float:
    """Allocations asked for beyond what the demand keeps busy (demand / per_alloc_rps),
    times their time: the memory a keep-alive policy holds idle, in allocation-hours."""
    idle = 0.0
    for seg in segments:
        idle += max(0.0, seg.count - seg.demand_rps / per_alloc_rps) * seg.duration_s
    return idle / 3600.0


def downsample(segments: Sequence[Segment], until_s: float, points: int) -> Trajectory:
    """Time-weighted means of demand, capacity and count over `points` equal buckets (fewer
    for a short run: buckets of at least a second)."""
    if until_s <= 0 or not segments:
        return Trajectory()
    n = max(1, min(points, math.ceil(until_s)))
    width = until_s / n
    demand, capacity, count = [0.0] * n, [0.0] * n, [0.0] * n
    for seg in segments:
        start, end = seg.start_s, min(seg.end_s, until_s)
        b = min(n - 1, int(start / width))
        while start < end and b < n:
            upto = min(end, (b + 1) * width)
            dt = upto - start
            demand[b] += seg.demand_rps * dt
            capacity[b] += seg.capacity_rps * dt
            count[b] += seg.count * dt
            start = upto
            b += 1
    return Trajectory(
        times=tuple(rounded(i * width) for i in range(n)),
        demand=tuple(rounded(v / width) for v in demand),
        capacity=tuple(rounded(v / width) for v in capacity),
        count=tuple(rounded(v / width) for v in count),
    )


def _run_chunk(runs: Sequence[RunSpec]) -> list[RunRecord]:
    return [run_one(run) for run in runs]


def run_sequential(runs: Sequence[RunSpec], progress: Progress | None = None) -> list[RunRecord]:
    records = []
    for run in runs:
        records.append(run_one(run))
        if progress is not None:
            progress(1)
    return records


def chunks(runs: Sequence[RunSpec], workers: int) -> list[list[RunSpec]]:
    """Consecutive runs in chunks of at most MAX_CHUNK, about eight chunks a worker, so that
    Ray's per-task cost is shared and the progress bar still moves."""
    size = max(1, min(MAX_CHUNK, len(runs) // max(1, workers * 8)))
    return [list(runs[i : i + size]) for i in range(0, len(runs), size)]


@contextmanager
def ray_session(address: str | None, num_cpus: int | None) -> Iterator[int]:
    """Ray, connected: the cluster at `address`, or a local one of `num_cpus` CPUs (all by
    default) without its dashboard; one already initialised in this process is reused and
    left running. Yields the CPUs the cluster has."""
    import ray

    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            # "local": a new local Ray. Without an address Ray attaches to a cluster already
            # running on the machine, and refuses num_cpus for it.
            kwargs.update(
                address="local",
                num_cpus=num_cpus or os.cpu_count() or 1,
                include_dashboard=False,
            )
        ray.init(**kwargs)
        started = True
    try:
        yield max(1, int(ray.cluster_resources().get("CPU", 1)))
    finally:
        if started:
            ray.shutdown()


def run_ray(
    runs: Sequence[RunSpec],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    progress: Progress | None = None,
) -> list[RunRecord]:
    import ray

    if not runs:
        return []
    with ray_session(address, num_cpus) as cpus:
        task = ray.remote(num_cpus=1)(_run_chunk)
        batches = chunks(runs, cpus)
        pending = {task.remote(batch): len(batch) for batch in batches}
        by_index: dict[int, RunRecord] = {}
        waiting = list(pending)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            for ref in done:
                for record in ray.get(ref):
                    by_index[record.index] = record
                if progress is not None:
                    progress(pending[ref])
    return [by_index[run.index] for run in runs]


@contextmanager
def progress_bar(total: int, label: str, enabled: bool = True) -> Iterator[Progress]:
    """A tqdm bar on stderr; `enabled` false hides it (tests, -json)."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=label, unit="run", file=sys.stderr, disable=not enabled)
    try:
        yield bar.update
    finally:
        bar.close()
