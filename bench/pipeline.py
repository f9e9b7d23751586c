"""End-to-end scheduling throughput through the actors: `python -m bench.pipeline`.

The workload of `bench.core` (jobs of `--count` allocations, half of them constrained to the
linux half of `--nodes` simulated nodes) is first scheduled in-process (the core alone, the
ratio's denominator), then through the running system: a leader, a broker, `--workers`
scheduler workers and one simulated agent over Redis streams on a local Ray. The clock runs
from the first job submission until the leader's placed counter reaches every allocation.
The in-process figure is the fastest of `--inprocess-repeat` runs.

After the clock stops, each run is checked against the leader's own records: the live
allocations equal the placed counter, which equals jobs x count, each job has its count, and
no node is overcommitted (`bench.core.overcommitted`). A failed check is listed in the JSON
line's `problems` (`"ok": false`), printed to stderr, and the exit status is 1.

Agents heartbeat on the system's defaults (every 2 s, 10 s TTL), so the leader pays for
failure detection during the measurement as it does in service. `--light-heartbeats` (every
10 s, 120 s TTL) measures scheduling alone; the JSON line says which ran.

`--repeat N` runs the system N times and reports the median of every figure. `--tracing on|off`
runs the actors with OpenTelemetry on (JSON lines export into the run's data directory) or
off; `--tracing both` runs N times each, off then on, in alternating order: the top-level
figures are the tracing-off medians, `tracing_on` holds the tracing-on medians, and the cost
of tracing comes from the two median rates. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import ray

from actors.agent.core import FleetSpec
from bench.core import make_job
from bench.core import overcommitted as overcommitted_nodes
from bench.core import run as run_inprocess
from bench.stream_accounting import heap_sweep_ms, heap_swept_since
from contracts import Allocation, Node, NodeStatus
from launch.system import DroverSystem, SystemConfig

DEFAULT_HEARTBEATS = (SystemConfig.heartbeat_s, SystemConfig.heartbeat_ttl_s)
LIGHT_HEARTBEATS = (10.0, 120.0)  # (every, TTL): failure detection nearly off

# The figures of one run that the summary of several reports as medians.
FIGURES = (
    "placements",
    "live_allocs",
    "seconds",
    "placements_per_s",
    "plans",
    "partial_rejections",
    "rejected_nodes",
    "worker_refreshes",
    "rebased_plans",
    "rebased_nodes",
)
# Safety counts: the summary reports the worst run, which a median would hide.
WORST = ("overcommitted_nodes", "nodes_down")

_CPU, _MEMORY, _PER_NODE_CPU, _PER_NODE_MEMORY = 100, 256, 4000, 16384  # bench.core's shapes


def _fleet(nodes: int) -> list[FleetSpec]:
    """bench.core's cluster: half linux, half windows, 4,000 MHz and 16 GiB each."""
    half = nodes // 2
    common = {"cpu_mhz": _PER_NODE_CPU, "memory_mb": _PER_NODE_MEMORY, "disk_mb": 100_000}
    return [
        FleetSpec(name="linux", count=nodes - half, attributes={"kernel.name": "linux"}, **common),  # type: ignore[arg-type]
        FleetSpec(name="windows", count=half, attributes={"kernel.name": "windows"}, **common),  # type: ignore[arg-type]
    ]


def pool_holds(nodes: int, jobs: int, count: int) -> int:
    """How many of the workload's allocations the pool can hold at most: the constrained
    (even) jobs only on the linux half, the others anywhere."""
    per_node = min(_PER_NODE_CPU // _CPU, _PER_NODE_MEMORY // _MEMORY)
    linux, windows = (nodes - nodes // 2) * per_node, (nodes // 2) * per_node
    constrained = min((jobs + 1) // 2 * count, linux)
    return constrained + min(jobs // 2 * count, linux - constrained + windows)


def check_run(
    jobs: int,
    count: int,
    placed: int,
    allocs: Iterable[Allocation],
    nodes: Iterable[Node],
) -> tuple[dict[str, Any], list[str]]:
    """The leader's placed counter checked against its allocation records: figures for the
    JSON line, and a description of every mismatch (none when the run is sound)."""
    nodes = list(nodes)
    allocs = list(allocs)
    live = [a for a in allocs if not a.terminal()]
    expected = jobs * count
    problems = []
    if placed != expected:
        problems.append(f"the placed counter says {placed}, the workload is {expected}")
    if len(live) != placed:
        problems.append(f"{len(live)} live allocation(s) fetched, the placed counter says {placed}")
    per_job = Counter(a.job_id for a in live)
    job_ids = [make_job(i, 0).id for i in range(jobs)]
    short = {j: per_job[j] for j in job_ids if per_job[j] != count}
    if short:
        shown = ", ".join(f"{j}: {n}" for j, n in sorted(short.items())[:5])
        problems.append(f"{len(short)} job(s) without {count} live allocation(s) ({shown})")
    overcommitted = overcommitted_nodes(nodes, allocs)
    if overcommitted:
        problems.append(f"{len(overcommitted)} overcommitted node(s): {overcommitted[:5]}")
    down = sum(1 for n in nodes if n.status is not NodeStatus.READY)
    if down:  # their allocations were lost and replaced: the run measured something else
        problems.append(f"{down} node(s) not ready at the end")
    figures = {
        "expected_placements": expected,
        "live_allocs": len(live),
        "terminal_allocs": len(allocs) - len(live),
        "overcommitted_nodes": len(overcommitted),
        "nodes_down": down,
    }
    return figures, problems


def run(
    nodes: int,
    jobs: int,
    count: int,
    workers: int,
    timeout_s: float,
    tracing: str = "off",
    repeat: int = 1,
    inprocess_repeat: int = 3,
    light_heartbeats: bool = False,
) -> dict[str, Any]:
    repeat = max(1, repeat)
    holds = pool_holds(nodes, jobs, count)
    if holds < jobs * count:
        raise ValueError(
            f"{nodes} nodes hold at most {holds} of the {jobs * count} allocations: the bench "
            "measures a workload that fits"
        )
    # The ratio's denominator is the fastest of a few in-process runs: one slow run on a
    # noisy machine would flatter the ratio, never hurt it.
    inprocess_runs = [run_inprocess(nodes, jobs, count) for _ in range(max(1, inprocess_repeat))]
    inprocess = max(inprocess_runs, key=lambda r: r["placements_per_s"])
    inprocess_problems = [
        f"in-process run {i}: {r['placements']} placed, {r['overcommitted_nodes']} overcommitted"
        for i, r in enumerate(inprocess_runs)
        if r["placements"] != jobs * count or r["overcommitted_nodes"]
    ]
    heartbeat_s, ttl_s = LIGHT_HEARTBEATS if light_heartbeats else DEFAULT_HEARTBEATS
    common = {
        "bench": "pipeline",
        "nodes": nodes,
        "jobs": jobs,
        "count": count,
        "workers": workers,
        "repeat": repeat,
        "heartbeat_s": heartbeat_s,
        "heartbeat_ttl_s": ttl_s,
        "light_heartbeats": light_heartbeats,
        "inprocess_placements_per_s": inprocess["placements_per_s"],
        "inprocess_runs": [r["placements_per_s"] for r in inprocess_runs],
    }

    def system_run(flag: bool) -> dict[str, Any]:
        return _run_system(nodes, jobs, count, workers, timeout_s, flag, heartbeat_s, ttl_s)

    # With both, alternate the order (off/on, on/off, ...) so warm-up and drift hit both sides.
    sides = (False, True) if tracing == "both" else (tracing == "on",)
    runs: dict[bool, list[dict[str, Any]]] = {flag: [] for flag in sides}
    for i in range(repeat):
        for flag in sides if i % 2 == 0 else tuple(reversed(sides)):
            runs[flag].append(system_run(flag))
    summary = _summary(runs[sides[0]], inprocess["placements_per_s"])
    label = {False: "tracing off ", True: "tracing on "} if tracing == "both" else {}
    problems = inprocess_problems + [
        f"{label.get(flag, '')}run {i + 1}: {problem}"
        for flag, side in runs.items()
        for i, r in enumerate(side)
        for problem in r["problems"]
    ]
    result = {**common, "tracing": tracing, **summary}
    if tracing == "both":
        on = _summary(runs[True], inprocess["placements_per_s"])
        off_rate, on_rate = summary["placements_per_s"], on["placements_per_s"]
        result |= {
            "tracing_on": on,
            "placements_per_s_tracing_off": off_rate,
            "placements_per_s_tracing_on": on_rate,
            "runs_tracing_off": summary["runs"],
            "runs_tracing_on": on["runs"],
            "tracing_cost": round(1 - on_rate / off_rate, 3) if off_rate else None,
            "ratio_tracing_on": on["ratio"],
            "complete": summary["complete"] and on["complete"],
        }
    return result | {"ok": not problems, "problems": problems}


def _summary(runs: list[dict[str, Any]], inprocess_rate: float) -> dict[str, Any]:
    """The median of every figure over `runs` (the worst for safety counts), and the ratio
    of the median rate."""
    medians = {}
    for name in FIGURES:
        value = statistics.median(r[name] for r in runs)
        medians[name] = round(value, 3) if isinstance(value, float) else value
    return {
        **medians,
        **{name: max(r[name] for r in runs) for name in WORST},
        "ratio": round(medians["placements_per_s"] / inprocess_rate, 3),
        "runs": [r["placements_per_s"] for r in runs],
        "heap_sweep_ms": [r["heap_sweep_ms"] for r in runs],  # on the clock, by role
        "expected_placements": runs[0]["expected_placements"],
        "complete": all(r["complete"] for r in runs),
    }


def _run_system(
    nodes: int,
    jobs: int,
    count: int,
    workers: int,
    timeout_s: float,
    tracing: bool,
    heartbeat_s: float,
    heartbeat_ttl_s: float,
) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="drover-bench-"))
    config = SystemConfig(
        data_dir=data_dir,
        tracing=tracing,
        workers=workers,
        num_cpus=max(2, workers),
        fleets=_fleet(nodes),
        heartbeat_ttl_s=heartbeat_ttl_s,
        heartbeat_s=heartbeat_s,
    )
    try:
        with DroverSystem(config) as system:
            client = system.client()
            leader = system.leader
            expected = jobs * count
            swept_before = heap_sweep_ms(system)
            started = time.perf_counter()
            client.run_jobs([make_job(i, count) for i in range(jobs)])
            placed = 0
            deadline = started + timeout_s
            while time.perf_counter() < deadline:
                placed = ray.get(leader.stats.remote())["placed"]
                if placed >= expected:
                    break
                time.sleep(0.2)  # polling costs the leader and this process CPU
            seconds = time.perf_counter() - started
            swept = heap_swept_since(system, swept_before)
            # Off the clock: the leader answers a plan once it is durable and applies it to
            # its store just after, so its records may trail the counter for a moment.
            allocs, placed = _settled_allocs(leader)
            stats = ray.get(leader.stats.remote())
            worker_stats = ray.get([w.stats.remote() for w in system.workers])
            figures, problems = check_run(
                jobs, count, placed, allocs, ray.get(leader.nodes.remote())
            )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    if placed < expected:
        problems.insert(0, f"timed out after {timeout_s:g} s with {placed} of {expected} placed")
    pipeline_rate = placed / seconds if seconds else 0.0
    return {
        "tracing": "on" if tracing else "off",
        "placements": placed,
        "seconds": round(seconds, 3),
        "placements_per_s": round(pipeline_rate, 1),
        "plans": stats["plans"],
        "partial_rejections": stats["partial_plans"],
        "rejected_nodes": stats["rejected_nodes"],
        "worker_refreshes": sum(w["refreshes"] for w in worker_stats),
        # Plans moved off nodes that filled up while they were computed, before submission.
        "rebased_plans": sum(w["rebased_plans"] for w in worker_stats),
        "rebased_nodes": sum(w["rebased_nodes"] for w in worker_stats),
        **figures,
        "complete": placed >= expected,
        # Heap sweeps on the clock, by role (process_settings.HeapPacer: each a stall).
        "heap_sweep_ms": swept,
        "problems": problems,
    }


def _settled_allocs(leader: Any, wait_s: float = 30.0) -> tuple[list[Allocation], int]:
    """The leader's allocations once its store has caught up with its placed counter (or
    after `wait_s`: the check then reports the difference), and that counter."""
    deadline = time.monotonic() + wait_s
    while True:
        placed = ray.get(leader.stats.remote())["placed"]
        allocs: list[Allocation] = ray.get(leader.allocs.remote())
        live = sum(1 for a in allocs if not a.terminal())
        if live >= placed or time.monotonic() > deadline:
            return allocs, placed
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--tracing", choices=("on", "off", "both"), default="off")
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="system runs (per side with --tracing both); medians are reported (default: 3 "
        "with --tracing both, else 1)",
    )
    parser.add_argument(
        "--inprocess-repeat", type=int, default=3, help="in-process runs; the fastest counts"
    )
    parser.add_argument(
        "--light-heartbeats",
        action="store_true",
        help=f"agents heartbeat every {LIGHT_HEARTBEATS[0]:g} s with a {LIGHT_HEARTBEATS[1]:g} s "
        f"TTL instead of the defaults ({DEFAULT_HEARTBEATS[0]:g} s, {DEFAULT_HEARTBEATS[1]:g} s)",
    )
    args = parser.parse_args(argv)
    repeat = args.repeat if args.repeat is not None else (3 if args.tracing == "both" else 1)
    holds = pool_holds(args.nodes, args.jobs, args.count)
    if holds < args.jobs * args.count:
        parser.error(f"{args.nodes} nodes hold at most {holds} of the workload's allocations")
    result = run(
        args.nodes,
        args.jobs,
        args.count,
        args.workers,
        args.timeout,
        args.tracing,
        repeat,
        args.inprocess_repeat,
        args.light_heartbeats,
    )
    print(orjson.dumps(result).decode())
    if not result["ok"]:
        for problem in result["problems"]:
            print(f"bench.pipeline: CHECK FAILED: {problem}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
