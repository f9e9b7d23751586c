"""Keep-alive policies on the shared GenAI trace: `python -m bench.keepalive`.

Replays Alibaba GenTD26's per-request trace (`alibaba-gentd26/lora_request_trace.csv`: start
times and execution times, all rows) in the scale-per-request mode
(actors/experiments/core/faas.py): one request per instance, the newest idle instance first.
A cold start adds a model load drawn from the trace's own base-model load latencies
(`basemodel_update_latency_anon.tar.gz`, milliseconds; p50 22.7 s), one per request drawn
once per seed, so every policy sees the same penalties; without that file, a fixed 22.7 s.

Policies: fixed keep-alives of 5, 10, 20 and 60 min, and the hybrid histogram of Serverless
in the Wild (actors/experiments/core/hybrid.py) with ranges of 1, 2 and 4 h. One JSON line
per policy: `policy`, `requests`, `cold_starts`, `cold_start_share`, `prewarms`,
`idle_instance_hours` (the wasted memory-time per instance's memory), `mean_instances`,
`wall_s`; then one line with `dominates`: for each hybrid, whether it Pareto-dominates each
fixed keep-alive (cold-start share and idle instance-hours both lower or equal, one lower),
and `front`: the policies no other one dominates.

The traces are found by bench.shared.shared_traces().
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from actors.experiments.core.faas import KeepAlive, TraceService, simulate_faas
from actors.experiments.core.hybrid import HybridKeepAlive, IdleHistogram
from bench.shared import shared_traces
from contracts.traces.requests import GENAI, read_requests
from contracts.traces.samples import read_samples

TRACE = "alibaba-gentd26/lora_request_trace.csv"
LATENCIES = "alibaba-gentd26/basemodel_update_latency_anon.tar.gz"
FIXED_PENALTY_S = 22.7  # the base-model load p50 (reference note, B2)
FIXED_MIN = (5, 10, 20, 60)
HYBRID_H = (1, 2, 4)
DAY_S = 86_400.0


def load_latencies_s(path: Path) -> list[float]:
    """The base-model load latencies of the tarred CSV (`value`, in ms), in seconds."""
    return read_samples(str(path), column="value", unit="ms")


@dataclass(frozen=True, slots=True)
class Workload:
    starts: Sequence[float]
    durations: Sequence[float]
    penalty_samples: Sequence[float]  # empty: the fixed penalty
    penalty: str  # where the cold-start penalty comes from


def load(traces: Path, days: float | None = None) -> Workload:
    requests = read_requests(str(traces / TRACE), GENAI)
    assert requests.durations is not None
    n = len(requests)
    if days is not None:
        n = sum(1 for s in requests.starts if s < days * DAY_S)
    latencies = traces / LATENCIES
    if latencies.is_file():
        samples = load_latencies_s(latencies)
        penalty = f"sampled from {LATENCIES} ({len(samples)} loads)"
    else:
        samples, penalty = [], f"fixed {FIXED_PENALTY_S} s"
    return Workload(requests.starts[:n], requests.durations[:n], samples, penalty)


def policies() -> list[tuple[str, KeepAlive | float]]:
    """(name, policy): fixed keep-alives from the shortest, then hybrids; fresh objects."""
    fixed: list[tuple[str, KeepAlive | float]] = [(f"fixed_{m}m", m * 60.0) for m in FIXED_MIN]
    hybrid: list[tuple[str, KeepAlive | float]] = [
        (f"hybrid_{h}h", HybridKeepAlive(IdleHistogram(range_s=h * 3600.0))) for h in HYBRID_H
    ]
    return fixed + hybrid


def run_one(name: str, policy: KeepAlive | float, work: Workload, seed: int) -> dict[str, Any]:
    service = TraceService(
        work.durations,
        cold_penalty_s=0.0 if work.penalty_samples else FIXED_PENALTY_S,
        penalty_samples=work.penalty_samples,
    )
    began = time.perf_counter()
    r = simulate_faas(work.starts, service, policy, seed=seed)
    return {
        "policy": name,
        "requests": r.requests,
        "cold_starts": r.cold_starts,
        "cold_start_share": r.p_cold,
        "prewarms": r.prewarms,
        "idle_instance_hours": r.idle_instance_s / 3600.0,
        "mean_instances": r.mean_instances,
        "wall_s": round(time.perf_counter() - began, 3),
    }


def dominates(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Lower or equal in cold-start share and idle instance-hours, lower in one."""
    keys = ("cold_start_share", "idle_instance_hours")
    return all(a[k] <= b[k] for k in keys) and any(a[k] < b[k] for k in keys)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    fixed = [r for r in rows if r["policy"].startswith("fixed_")]
    hybrid = [r for r in rows if r["policy"].startswith("hybrid_")]
    return {
        "dominates": {h["policy"]: {f["policy"]: dominates(h, f) for f in fixed} for h in hybrid},
        "front": [r["policy"] for r in rows if not any(dominates(o, r) for o in rows)],
    }


def compare(work: Workload, seed: int = 0) -> list[dict[str, Any]]:
    return [run_one(name, policy, work, seed) for name, policy in policies()]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--days", type=float, default=None, help="only the first days")
    parser.add_argument("--seed", type=int, default=0, help="draws the cold-start penalties")
    args = parser.parse_args(argv)
    traces = shared_traces()
    if not (traces / TRACE).is_file():
        raise SystemExit(f"the shared GenAI trace is missing: {traces / TRACE}")
    work = load(traces, args.days)
    rows = compare(work, args.seed)
    for row in rows:
        print(orjson.dumps(row).decode())
    print(orjson.dumps({**summary(rows), "cold_start_penalty": work.penalty}).decode())


if __name__ == "__main__":
    main()
