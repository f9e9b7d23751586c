"""The autoscaler's closed loop on the live system: `python -m bench.autoscale`.

Starts drover (a simulated fleet, the autoscaler, the HTTP API on a free loopback port) and
registers `--jobs` mock services through the API, each with bench/autoscale.nomad's policy:
target-value 50 on `avg_cpu-allocated`, threshold 0.1, query_window 2 s, min 1, max 10,
evaluation_interval `--interval`, cooldown `--cooldown`. An allocation has 100 MHz, so each
50 MHz of the group's demand settles one. Each job's mock `load` replays a square wave
(shape "trace", a CSV in a temp dir): `--low` x 50 MHz, then every `--level-s` seconds the
other level, `--high` x 50 MHz. The jobs share `--crossings` level changes, phase-shifted
by `--level-s / --jobs` so that their evaluations and Scale calls interleave.

A crossing is timed from the autoscaler's side: the first usage sample (the agent's sample
time, read on the usage stream) whose group total shows the new level; the agent samples
every second, so timing from the trace's own change would add 0-1 s of sampling. Scalings,
placements and running reports are read on the state log. Per crossing:
- decision_*: the evaluation that scaled (its time is in the Scale request's id);
- scale_call_*: that scaling event's Time (the leader applying Job.Scale);
- running_* (up-crossings): the leader's commit of the last running report of the
  allocations the scaling's evaluation placed;
- overshoot (up-crossings): the highest count asked for during the level minus the count
  it settled at (in effect when the level ends), max and mean; `undershoot_max` the same
  below it after down-crossings; `extra_scalings`: scalings past the first of each level;
  `levels_off_target`: levels that did not settle at the count their demand makes.
A crossing not scaled (or not running) before the next one is infinite: a percentile on it
is null. Percentiles are nearest-rank.

Meanwhile the noise job runs: `--noise-count` allocations, a constant demand of
`--noise-level` x the target with +/- 5 % noise (`load.noise`), threshold 0.1. Over
`--noise-evaluations` evaluations (from the first with all of them running),
`reversals_under_noise` counts changes of direction between consecutive scalings (the
target is zero); `noise_scalings` counts scalings, `noise_max_deviation` how far the
values the policy read strayed from the target (as a fraction of it).

One JSON line. The default (100 crossings, 10 jobs, 10 s levels) takes about 2 min 10 s on
a 2-core machine: 7 s to start, the traces' 120 s, the stop.
"""

from __future__ import annotations

import argparse
import itertools
import math
import platform
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from actors.agent.core import FleetSpec
from actors.api.core.shapes import job_to_nomad
from actors.autoscaler.core.registry import group_policy_id
from actors.streams.client import connect
from actors.streams.envelope import decode_envelope
from actors.streams.names import StreamNames
from contracts import ClientStatus, DesiredStatus
from contracts.jobspec import parse_job_file
from contracts.state_log import (
    AppendScalingEvent,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertJob,
    decode_entry,
)
from contracts.usage import REPORT_TYPE, decode_report
from launch.cli.client import ApiClient, CliError
from launch.system import DroverSystem, SystemConfig

TEMPLATE = Path(__file__).with_name("autoscale.nomad")
# As TEMPLATE has them (its test checks).
ALLOC_MHZ, TARGET_PCT, GROUP, THRESHOLD, MAX_COUNT = 100, 50.0, "app", 0.1, 10
PER_ALLOC_MHZ = ALLOC_MHZ * TARGET_PCT / 100  # the demand one allocation holds at the target
NOISE, POLL_S = 0.05, 0.25


def job_json(job_id: str, count: int, load: dict[str, Any], args: argparse.Namespace) -> Any:
    """TEMPLATE's Nomad JSON (as `drover job run` sends it) with this job's ID, count, load
    and policy timings."""
    job = job_to_nomad(parse_job_file(TEMPLATE))
    group = job["TaskGroups"][0]
    policy = group["Scaling"]["Policy"]
    policy |= {"evaluation_interval": f"{args.interval}s", "cooldown": f"{args.cooldown}s"}
    group["Count"] = count
    group["Tasks"][0]["Config"]["load"] = load
    return {**job, "ID": job_id, "Name": job_id}


def square_wave(
    path: Path, first_s: float, level_s: float, low: float, high: float, n: int
) -> list[float]:
    """Writes a `timestamp,value` trace: `low` until first_s, then n changes every level_s;
    returns the level after each change."""
    after = [high if i % 2 == 0 else low for i in range(n)]
    rows = (f"{first_s + i * level_s},{v}\n" for i, v in enumerate(after))
    path.write_text(f"timestamp,value\n0,{low}\n" + "".join(rows))
    return after


# -- what the bench reads: the state log and the usage stream -------------------------------


@dataclass
class Scaling:
    time_s: float  # the scaling event's Time (the leader applying Job.Scale)
    decided_s: float  # the autoscaler's evaluation, from the request id; nan if unknown
    previous: int
    count: int
    eval_id: str


@dataclass
class Seen:
    """Per job: its scalings, its usage totals per sample time (MHz); per evaluation, the
    allocations it placed; per allocation, when its running report was committed."""

    scalings: dict[str, list[Scaling]] = field(default_factory=lambda: defaultdict(list))
    totals: dict[str, dict[int, float]] = field(default_factory=lambda: defaultdict(dict))
    placed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    running: dict[str, float] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)


def _decided_s(request_id: str) -> float:
    """The decision's time: the autoscaler's request id is autoscaler-<policy>:<ms>:<seq>."""
    parts = request_id.split(":")
    if request_id.startswith("autoscaler-") and len(parts) == 3 and parts[1].isdigit():
        return int(parts[1]) / 1000
    return math.nan


class Follower:
    """Reads the log and the usage stream from where they were at creation (non-blocking)."""

    def __init__(self, redis_url: str, names: StreamNames) -> None:
        self.client, self.names, self.seen = connect(redis_url), names, Seen()
        self.positions: dict[Any, Any] = {s: self._end(s) for s in (names.log, names.usage)}

    def _end(self, stream: str) -> bytes:
        last: Any = self.client.xrevrange(stream, count=1)
        return last[0][0] if last else b"0-0"

    def poll(self) -> None:
        reply: Any = self.client.xread(self.positions, count=10_000)
        for stream, rows in reply or ():
            name = stream.decode() if isinstance(stream, bytes) else stream
            self.positions[name] = rows[-1][0]
            for _id, fields in rows:
                if name == self.names.log:
                    self._entry(fields[b"e"])
                else:
                    self._usage(fields)

    def _entry(self, raw: bytes) -> None:
        entry, seen = decode_entry(raw), self.seen
        change, at = entry.change, entry.committed_ns / 1e9
        events = []
        if isinstance(change, UpsertJob):
            events = [(change.job.id, e.event) for e in change.scaling_events]
        elif isinstance(change, AppendScalingEvent):
            events = [(change.job_id, change.event)]
        for job_id, e in events:
            if e.count is not None:
                scaling = Scaling(
                    e.time / 1e9, _decided_s(entry.request_id), e.previous_count, e.count,
                    e.eval_id or "",
                )  # fmt: skip
                seen.scalings[job_id].append(scaling)
        if isinstance(change, UpsertAllocs):
            for a in change.allocs:
                if a.desired_status is DesiredStatus.RUN and a.id not in seen.known:
                    seen.known.add(a.id)
                    seen.placed[a.eval_id].append(a.id)
        elif isinstance(change, UpdateAllocsClientStatus):
            for u in change.updates:
                if u.client_status is ClientStatus.RUNNING:
                    seen.running.setdefault(u.alloc_id, at)

    def _usage(self, fields: Any) -> None:
        envelope = decode_envelope(fields)
        if envelope.type == REPORT_TYPE:
            for s in decode_report(envelope.body).samples:
                totals = self.seen.totals[s.job_id]
                totals[s.time_ns] = totals.get(s.time_ns, 0.0) + s.cpu_mhz


# -- the figures (pure) ---------------------------------------------------------------------


@dataclass
class Crossing:
    up: bool
    at_s: float  # the first sample showing the new level
    decision_s: float = math.inf
    scale_call_s: float = math.inf
    running_s: float = math.inf  # up-crossings only
    overshoot: int = 0  # up-crossings: above the settled count
    undershoot: int = 0  # down-crossings: below it
    scalings: int = 0  # during the level
    settled: int = 0


def find_crossings(totals: dict[int, float], after: Sequence[float]) -> list[float]:
    """The first sample time (s) at which the group total shows each successive level."""
    found: list[float] = []
    for time_ns in sorted(totals):
        if len(found) == len(after):
            break
        if math.isclose(totals[time_ns], after[len(found)], rel_tol=1e-6):
            found.append(time_ns / 1e9)
    return found


def measure(
    seen: Seen, job_id: str, after: Sequence[float], initial: int, level_s: float
) -> list[Crossing]:
    """Each crossing of a job, with its scaling and the count its level settled at."""
    times = find_crossings(seen.totals.get(job_id, {}), after)
    scalings = sorted(seen.scalings.get(job_id, []), key=lambda s: s.time_s)
    out = []
    for k, at in enumerate(times):
        up = k == 0 or after[k] > after[k - 1]
        end = times[k + 1] if k + 1 < len(times) else at + level_s
        before = [s.count for s in scalings if s.time_s < at]
        during = [s for s in scalings if at <= s.time_s < end]
        settled = during[-1].count if during else (before or [initial])[-1]
        counts = [settled, *(s.count for s in during)]
        crossing = Crossing(up, at, scalings=len(during), settled=settled)
        first = next((s for s in during if (s.count > s.previous) == up), None)
        if first is not None:
            if not math.isnan(first.decided_s):  # kept in ms: never before the sample
                crossing.decision_s = max(0.0, first.decided_s - at)
            crossing.scale_call_s = first.time_s - at
            allocs = seen.placed.get(first.eval_id, [])
            ran = [seen.running.get(a, math.inf) for a in allocs]
            if up and allocs and max(ran) < math.inf:
                crossing.running_s = max(ran) - at
        if up:
            crossing.overshoot = max(counts) - settled
        else:
            crossing.undershoot = settled - min(counts)
        out.append(crossing)
    return out


def reversals(directions: Sequence[int]) -> int:
    """How often consecutive scalings went opposite ways (+1 up, -1 down)."""
    return sum(1 for a, b in itertools.pairwise(directions) if a != b)


def percentile_s(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile in s; None if there are none or it falls on a missing one."""
    if not values:
        return None
    value = sorted(values)[max(0, math.ceil(q / 100 * len(values)) - 1)]
    return None if math.isinf(value) else round(value, 3)


# -- the run --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--crossings", type=int, default=100, help="level changes, all jobs")
    parser.add_argument("--jobs", type=int, default=10, help="services sharing the crossings")
    parser.add_argument("--level-s", type=float, default=10.0, help="each level held, s")
    parser.add_argument("--low", type=int, default=2, help="the low level's settled count")
    parser.add_argument("--high", type=int, default=4, help="the high level's settled count")
    parser.add_argument("--interval", type=float, default=1.0, help="evaluation_interval, s")
    parser.add_argument("--cooldown", type=float, default=3.0, help="cooldown, s")
    parser.add_argument("--noise-count", type=int, default=3)
    parser.add_argument("--noise-level", type=float, default=1.04, help="x target")
    parser.add_argument("--noise-evaluations", type=int, default=60, help="0: no noise job")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--tracing", choices=("on", "off"), default="off")
    args = parser.parse_args(argv)
    if not 1 <= args.low < args.high <= MAX_COUNT or args.jobs < 1 or args.crossings < 1:
        parser.error(f"need 1 <= --low < --high <= {MAX_COUNT}, --jobs and --crossings >= 1")
    if not args.noise_level * (1 + NOISE) < 1 + THRESHOLD:
        parser.error(f"--noise-level {args.noise_level} lets the noise leave the tolerance")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    share, extra = divmod(args.crossings, args.jobs)
    per_job = [share + (j < extra) for j in range(args.jobs)]
    low, high = args.low * PER_ALLOC_MHZ, args.high * PER_ALLOC_MHZ
    noise_mhz = args.noise_count * PER_ALLOC_MHZ * args.noise_level
    span_s = max(args.level_s * (2 + n) for n in per_job)  # the longest trace, its last level
    with tempfile.TemporaryDirectory(prefix="drover-bench-autoscale-") as tmp:
        config = SystemConfig(
            data_dir=Path(tmp) / "data",
            workers=1,
            num_cpus=2,
            fleets=[FleetSpec("bench", args.nodes, cpu_mhz=4000, memory_mb=16384)],
            http_addr="127.0.0.1:0",
            tracing=args.tracing == "on",
        )
        started = time.monotonic()
        with DroverSystem(config) as system:
            start_s = time.monotonic() - started
            api = ApiClient(system.http_address, token="")
            follower = Follower(system.redis_url, StreamNames(config.prefix))
            jobs: dict[str, list[float]] = {}
            for j, n in enumerate(per_job):
                if n:
                    job_id, trace = f"wave-{j:02d}", Path(tmp) / f"wave-{j:02d}.csv"
                    first_s = args.level_s * (1 + j / args.jobs)  # phase shift
                    jobs[job_id] = square_wave(trace, first_s, args.level_s, low, high, n)
                    load = {"shape": "trace", "trace": str(trace)}
                    api.post("/v1/jobs", {"Job": job_json(job_id, args.low, load, args)})
            deadline = time.monotonic() + span_s + 60  # a minute past the longest trace
            noise = _noise_phase(api, follower, args, noise_mhz) if args.noise_evaluations else {}
            _wait_waves(follower, jobs, args.level_s, deadline)
            crossings = [
                c
                for job_id, after in jobs.items()
                for c in measure(follower.seen, job_id, after, args.low, args.level_s)
            ]
    return _line(args, crossings, sum(per_job), noise, start_s, time.monotonic() - started)


def _wait_waves(
    follower: Follower, jobs: dict[str, list[float]], level_s: float, deadline: float
) -> None:
    """Until every job's last level has run its course (at most until `deadline`)."""
    while time.monotonic() < deadline:
        follower.poll()
        totals = follower.seen.totals
        ends = [find_crossings(totals.get(j, {}), after) for j, after in jobs.items()]
        done = all(len(e) == len(after) for e, after in zip(ends, jobs.values(), strict=True))
        if done and time.time() > max(e[-1] for e in ends) + level_s:
            break
        time.sleep(POLL_S)
    follower.poll()


def _noise_phase(
    api: ApiClient, follower: Follower, args: argparse.Namespace, demand: float
) -> dict[str, Any]:
    """Runs the noise job for its evaluations (the wave jobs run meanwhile); its figures."""
    load = {"shape": "constant", "base": round(demand, 3), "noise": NOISE}
    api.post("/v1/jobs", {"Job": job_json("noise", args.noise_count, load, args)})
    policy = group_policy_id("default", "noise", GROUP)
    decisions: dict[str, dict[str, Any]] = {}
    since = math.inf  # the first evaluation that read a value with every allocation running
    deadline = time.monotonic() + 60 + args.noise_evaluations * args.interval * 2
    while time.monotonic() < deadline:
        follower.poll()
        try:
            got = api.get(f"/v1/scaling/policy/{policy}/decisions", limit=50)["Decisions"]
        except CliError:  # not known to the autoscaler yet
            got = []
        read = [d for d in got if d["Checks"] and d["Checks"][0]["Value"] is not None]
        full = [d["Time"] for d in read if d["CurrentCount"] == args.noise_count]
        since = min([since, *full])
        decisions |= {d["ID"]: d for d in read if d["Time"] >= since}
        if len(decisions) >= args.noise_evaluations:
            break
        time.sleep(min(5.0, args.interval * 5))
    kept = sorted(decisions.values(), key=lambda d: d["Time"])[: args.noise_evaluations]
    first, last = (kept[0]["Time"], kept[-1]["Time"] + args.interval) if kept else (0, 0)
    scalings = [s for s in follower.seen.scalings["noise"] if first <= s.time_s <= last]
    directions = [1 if s.count > s.previous else -1 for s in scalings]
    values = [d["Checks"][0]["Value"] / TARGET_PCT for d in kept]
    return {
        "noise_evaluations": len(kept),
        "noise_scalings": len(directions),
        "reversals_under_noise": reversals(directions),
        "noise_max_deviation": round(max((abs(v - 1) for v in values), default=0.0), 4),
    }


def _line(
    args: argparse.Namespace,
    crossings: list[Crossing],
    planned: int,
    noise: dict[str, Any],
    start_s: float,
    wall_s: float,
) -> dict[str, Any]:
    ups = [c for c in crossings if c.up]
    shoots = [c.overshoot for c in ups]
    expected = {True: args.high, False: args.low}
    line: dict[str, Any] = {
        "bench": "autoscale",
        "config": vars(args) | {"threshold": THRESHOLD, "noise": NOISE},
        "crossings_planned": planned,
        "crossings": len(crossings),
        "up_crossings": len(ups),
        "evaluation_interval_s": args.interval,
        "unscaled": sum(1 for c in crossings if math.isinf(c.scale_call_s)),
    }
    for name, among in (("decision", crossings), ("scale_call", crossings), ("running", ups)):
        values = [getattr(c, f"{name}_s") for c in among]
        line |= {f"{name}_p{q}_s": percentile_s(values, q) for q in (50, 99)}
        line[f"{name}_max_s"] = percentile_s(values, 100)
    return line | {
        "overshoot": max(shoots, default=0),
        "overshoot_max": max(shoots, default=0),
        "overshoot_mean": round(sum(shoots) / len(shoots), 3) if shoots else 0.0,
        "undershoot_max": max((c.undershoot for c in crossings), default=0),
        "extra_scalings": sum(max(0, c.scalings - 1) for c in crossings),
        "levels_off_target": sum(1 for c in crossings if c.settled != expected[c.up]),
        **noise,
        "start_s": round(start_s, 1),
        "wall_s": round(wall_s, 1),
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> None:
    print(orjson.dumps(run(parse_args(argv))).decode(), flush=True)


if __name__ == "__main__":
    main()
