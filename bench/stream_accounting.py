"""What the processes of a `bench.stream` run spend: each one's CPU (from /proc), the
actors' counters and Redis's command counts, read before and after a phase and turned into
figures per evaluation."""

from __future__ import annotations

import os
from typing import Any

import ray

from actors.process_settings import HEAP
from actors.streams.client import connect
from launch.system import DroverSystem


def cpu_seconds(pid: int) -> float:
    """The process's CPU time (user + system) so far, with that of its children it reaped
    (the leader's forked snapshot writers); 0 where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(ticks) for ticks in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def cpu_per_eval(cpu_s: dict[str, float], evals: int) -> dict[str, float] | None:
    """CPU milliseconds per evaluation scheduled in the phase, per process and for drover's
    own (every process but the load's): the cost of an evaluation, steadier than a rate on a
    noisy machine. Includes what the phase spends idle (heartbeats, ticks)."""
    if evals <= 0:
        return None
    per_eval = {role: round(1000 * spent / evals, 3) for role, spent in cpu_s.items()}
    return per_eval | {"drover": round(1000 * sum(_drovers(cpu_s).values()) / evals, 3)}


def cpu_over_load(cpu_s: dict[str, float]) -> dict[str, float] | None:
    """Each process's CPU, and drover's own, over the load process's: its code and its work
    per evaluation are the same in both builds of an A/B pair, so these ratios compare
    builds whose runs met different machine speeds (the host's swung 2-3x within an hour),
    where CPU milliseconds and rates do not."""
    load = cpu_s.get("load", 0.0)
    if load <= 0:
        return None
    ours = _drovers(cpu_s)
    ratios = {role: round(spent / load, 2) for role, spent in ours.items()}
    return ratios | {"drover": round(sum(ours.values()) / load, 2)}


def _drovers(cpu_s: dict[str, float]) -> dict[str, float]:
    """drover's own processes' CPU: every process of the run but the load's."""
    return {role: spent for role, spent in cpu_s.items() if role != "load"}


def process_ids(system: DroverSystem, load_pid: int) -> dict[str, list[int]]:
    def pids(*actors: Any) -> list[int]:
        return list(ray.get([a.__ray_call__.remote(lambda _self: os.getpid()) for a in actors]))

    return {
        "api": [os.getpid()],  # the HTTP API and the Ray driver
        "load": [load_pid],
        "leader": pids(system.leader),
        "workers": pids(*system.workers),
        "agent": pids(*system.agents.values()),
        "autoscaler": pids(system.autoscaler) if system.autoscaler is not None else [],
        "redis": [int(connect(system.redis_url).info("server")["process_id"])],
    }


def actor_counters(system: DroverSystem) -> dict[str, int]:
    leader = ray.get(system.leader.stats.remote())
    workers = ray.get([w.stats.remote() for w in system.workers])
    counts = {"log_entries": leader["index"], "leader_requests": leader["requests"]}
    counts |= {k: leader[k] for k in ("plans", "partial_plans", "rejected_nodes")}
    counts |= {f"worker_{k}": sum(w[k] for w in workers) for k in ("evals", "refreshes", "nacks")}
    # Evals the leader scheduled itself (local_scheduling.py).
    counts["leader_evals"] = leader["local_evals"]
    delivered = ray.get(system.leader.broker_stats.remote())["delivered"]
    return counts | {"broker_deliveries": delivered}


def heap_sweep_ms(system: DroverSystem) -> dict[str, int]:
    """Milliseconds each role's processes spent sweeping their frozen heaps so far
    (process_settings.HeapPacer: a process does nothing else meanwhile). The API's is this
    process's: it sweeps once `SystemConfig.pace_heap` paces it."""
    actors = {
        "leader": [system.leader],
        "workers": list(system.workers),
        "agent": list(system.agents.values()),
        "autoscaler": [system.autoscaler] if system.autoscaler is not None else [],
    }
    out = {"api": round(HEAP.sweep_s * 1000)}
    for role, handles in actors.items():
        out[role] = sum(
            int(stats["heap_sweep_ms"]) for stats in ray.get([a.stats.remote() for a in handles])
        )
    return out


def heap_swept_since(system: DroverSystem, before: dict[str, int]) -> dict[str, int]:
    """The roles whose processes swept their heaps since `heap_sweep_ms` gave `before`, and
    for how many milliseconds."""
    now = heap_sweep_ms(system)
    return {role: now[role] - before[role] for role in now if now[role] > before[role]}


def snapshot_written(system: DroverSystem) -> tuple[int, float, float]:
    """The leader's snapshots so far, the latest one's seconds (encoding included) and the
    loop's pause to fork its writer (ms; 0 for one written by a thread)."""
    stats = ray.get(system.leader.snapshot_stats.remote())
    return int(stats["written"]), float(stats["seconds"]), float(stats["fork_ms"])


def redis_commands(system: DroverSystem) -> dict[str, int]:
    """Calls of each Redis command so far (INFO commandstats)."""
    stats = connect(system.redis_url).info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def calls_per_eval(after: dict[str, int], before: dict[str, int], evals: int) -> dict[str, float]:
    """Redis calls per evaluation over a phase, by command (those above 0.05), and in all."""
    calls = {name: n - before.get(name, 0) for name, n in after.items()}
    per_eval = {name: round(n / max(1, evals), 2) for name, n in calls.items()}
    out = dict(sorted(((k, v) for k, v in per_eval.items() if v >= 0.05), key=lambda kv: -kv[1]))
    return out | {"all": round(sum(calls.values()) / max(1, evals), 1)}
