"""Live replays of an experiment: the same trace and policy through the running system, and the
simulator's error measured against it (`drover experiment run -live`).

Each replay registers one mock job (actors/experiments/core/live_plan.py: the policy compressed
`time_factor` times, its load replaying the trace in MHz) through the HTTP API of a running
drover: the one at `address`, or one started here on a simulated fleet sized for the policy's
maximum. The count trajectory is read from the job's scaling events, polled while the replay
runs (a group keeps only its last 20), each event's time (the leader's commit) mapped back to
trace time from the moment the first allocations ran (when the agent's load model starts the
trace's clock). The simulator then runs the same policy on the same demand, and
`live_compare.compare` measures the difference. The replays run one after another: they share
the fleet, and each one's real time is the trace's span divided by the factor."""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.experiments.core.demand import from_series
from actors.experiments.core.live_compare import TrajectoryError, compare
from actors.experiments.core.live_plan import LiveSetup, live_job, trace_csv
from actors.experiments.core.policies import NomadPolicy
from actors.experiments.core.simulator import simulate
from contracts.autoscaling import Policy
from launch.cli.client import ApiClient, CliError

POLL_S = 0.25
NODE_MHZ = 8000
START_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class LiveReplay:
    """One (trace, policy) pair to replay: the demand in requests per second as a step-hold
    series, and the policy as the autoscaler parses it."""

    name: str
    times: Sequence[float]
    values: Sequence[float]
    policy: Policy
    setup: LiveSetup


@dataclass(frozen=True, slots=True)
class LiveResult:
    name: str
    live: list[tuple[float, int]]
    simulated: list[tuple[float, int]]
    error: TrajectoryError
    wall_s: float


def simulated_trajectory(replay: LiveReplay) -> list[tuple[float, int]]:
    setup = replay.setup
    demand = from_series(replay.times, replay.values, span_s=max(setup.until_s, replay.times[-1]))
    result = simulate(
        demand,
        NomadPolicy(replay.policy),
        start_count=setup.start_count,
        per_alloc_rps=setup.per_alloc_rps,
        until_s=setup.until_s,
    )
    return [(0.0, setup.start_count)] + [(a.time_s, a.to_count) for a in result.actions]


@contextmanager
def running_system(max_allocs: int, alloc_mhz: int) -> Iterator[str]:
    """A drover started here (a simulated fleet with room for `max_allocs`), its API address."""
    from actors.agent.core import FleetSpec
    from launch.system import DroverSystem, SystemConfig

    nodes = max(1, math.ceil(max_allocs * alloc_mhz / NODE_MHZ) + 1)
    with tempfile.TemporaryDirectory(prefix="drover-live-") as data:
        config = SystemConfig(
            data_dir=Path(data),
            workers=1,
            fleets=[FleetSpec(name="live", count=nodes, cpu_mhz=NODE_MHZ, memory_mb=65536)],
            http_addr="127.0.0.1:0",
            tracing=False,
        )
        with DroverSystem(config) as system:
            assert system.http_address is not None
            yield system.http_address


class _Events:
    """The group's scaling events, gathered across polls (the API shows the last 20)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, str], tuple[int, int]] = {}

    def poll(self, api: ApiClient, job_id: str) -> None:
        status = api.get(f"/v1/job/{job_id}/scale")
        for event in status["TaskGroups"]["replay"]["Events"] or ():
            if event.get("Error") or event.get("Count") is None:
                continue
            key = (int(event["Time"]), str(event.get("EvalID") or ""))
            self.seen[key] = (int(event["Time"]), int(event["Count"]))

    def trajectory(self, origin_ns: int, factor: float, start: int) -> list[tuple[float, int]]:
        points = sorted(self.seen.values())
        return [(0.0, start)] + [((t - origin_ns) / 1e9 * factor, c) for t, c in points]


def _wait_running(api: ApiClient, job_id: str, count: int) -> int:
    """Polls until `count` allocations run; the wall time (unix ns) it saw them."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        status = api.get(f"/v1/job/{job_id}/scale")
        if status["TaskGroups"]["replay"]["Running"] >= count:
            return time.time_ns()
        time.sleep(0.02)
    raise CliError(f"live replay {job_id}: the first {count} allocations did not start in time")


def replay_once(
    api: ApiClient,
    replay: LiveReplay,
    job_id: str,
    workdir: Path,
    tick: Callable[[float], None] | None = None,
) -> LiveResult:
    setup = replay.setup
    trace = workdir / f"{job_id}.csv"
    trace.write_text(trace_csv(replay.times, replay.values, setup))
    job = live_job(job_id, replay.policy, setup, str(trace.resolve()), where=replay.name)
    started = time.monotonic()
    api.post("/v1/jobs", {"Job": job})
    events = _Events()
    try:
        origin_ns = _wait_running(api, job_id, setup.start_count)
        end = time.monotonic() + setup.real_seconds
        while (now := time.monotonic()) < end:
            events.poll(api, job_id)
            if tick is not None:
                tick(min(1.0, 1.0 - (end - now) / setup.real_seconds))
            time.sleep(min(POLL_S, max(0.0, end - now)))
        events.poll(api, job_id)
    finally:
        api.delete(f"/v1/job/{job_id}", purge="true")
    live = events.trajectory(origin_ns, setup.time_factor, setup.start_count)
    simulated = simulated_trajectory(replay)
    return LiveResult(
        name=replay.name,
        live=live,
        simulated=simulated,
        error=compare(live, simulated, setup.until_s),
        wall_s=time.monotonic() - started,
    )


def run_replays(
    replays: Sequence[LiveReplay],
    *,
    address: str | None = None,
    token: str | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> list[LiveResult]:
    """Each replay in turn on the drover at `address`, or on one started here."""
    if not replays:
        return []

    def run_all(api: ApiClient) -> list[LiveResult]:
        results = []
        with tempfile.TemporaryDirectory(prefix="drover-live-traces-") as work:
            for k, replay in enumerate(replays):
                job_id = f"live-replay-{k}-{int(time.time())}"

                def tick(done: float, name: str = replay.name) -> None:
                    if progress is not None:
                        progress(name, done)

                results.append(replay_once(api, replay, job_id, Path(work), tick))
                tick(1.0)
        return results

    if address is not None:
        return run_all(ApiClient(address, token))
    biggest = max(r.policy.max for r in replays)
    mhz = max(r.setup.alloc_mhz for r in replays)
    with running_system(biggest, mhz) as http:
        return run_all(ApiClient(http, ""))


def result_row(result: LiveResult) -> dict[str, Any]:
    e = result.error
    return {
        "replay": result.name,
        "mean_abs_count_error": round(e.mean_abs_count_error, 4),
        "time_share_differing": round(e.time_share_differing, 4),
        "max_abs_count_error": e.max_abs_count_error,
        "live_actions": e.live_actions,
        "sim_actions": e.sim_actions,
        "live_allocation_hours": round(e.live_allocation_hours, 4),
        "sim_allocation_hours": round(e.sim_allocation_hours, 4),
        "allocation_hours_error": round(e.allocation_hours_error, 4),
        "wall_s": round(result.wall_s, 2),
    }
