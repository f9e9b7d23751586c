"""Packing of block-split GPU instances and gang waits, in process: `python -m bench.gang`.

A discrete-event simulation that drives drover's real scheduling core (`new_scheduler`, the
share stack, and the leader's plan applier through `InProcessPlanner`, against one
`StateStore`) with no actors, Ray or Redis. The same arrival sequence is run twice, each time
on a fresh store: under drover's policy (`SharePolicy()`: best fit, blocked gangs hold the
instances they wait for) and under `FIRST_FIT` (no holds, the first instance that fits in
one fixed order, by name). Prints one JSON line;
drover's figures are unprefixed, first fit's are prefixed `firstfit_`.

The cluster: `--instances` instances (8 H100s, 64 cores, 512 GB each, split into 8 blocks)
in `--fleets` `placement: cluster` fleets of equal size. Arrivals are a Poisson process
(`random.Random(seed)`): a `--gang-share` fraction of them are gangs of 2-16 ranks (uniform,
and at most a fleet's size), each rank taking an instance whole (`gpu: 8..`); the rest are
runs of one rank asking for one GPU (`gpu: 1`), i.e. one block. Every run lasts
uniform(0.5, 1.5) x `--mean-run-s`; the rate is set so that the demanded block-seconds are
`--load` times what the cluster offers. A gang averages 72 blocks, so the default 0.5% of
arrivals puts about 27% of the demanded block-seconds in gangs (`gang_demand_share`): about
0.37 of the cluster at the default load, the rest of the overload being single runs.

Events: an arrival commits the job with its evaluation and processes it at once; a run that
is placed starts then and completes (its allocations reported complete) after its duration.
After each completion the blocked evaluations are passed over once, oldest first (all runs
have one priority), as Nomad's blocked-eval tracker releases them on a capacity change. Bounds,
so that a pass costs what it can achieve rather than the length of the backlog:

- At most `--retry-cap` scheduler invocations per pass.
- A blocked evaluation that provably cannot place is skipped, not processed: a one-block run
  when no instance outside every gang's hold has a free block, a gang when no fleet has as
  many idle instances outside the holds of the gangs ahead of it. The checks read the same
  state the scheduler reads, so a skipped evaluation would only have been blocked again with
  nothing changed; `precheck_mismatches` counts any disagreement (it should be 0).
- The exception is a blocked gang under drover's policy: processing it renews its hold (the
  instances may change as they drain), so it is also processed when it cannot place, but
  only after a gang started or ended since it was last processed (holds ahead may have gone,
  whole instances freed) or `--renew-s` of simulated time passed. This is the one
  approximation of the tracker, which would renew it after every completion (`--renew-s 0`
  does): at 100 instances, in three runs, that took 5-12x the wall time and gave similar
  gang waits and 2-4 points lower utilisation.

Figures: `block_utilisation` is the time average of busy blocks / all blocks after a warm-up
of one mean run length, over the time some evaluation was blocked (demand above supply).
Gang waits (arrival to start) are over the gangs that arrived after the warm-up; a gang still
waiting at the end counts with its wait so far (a lower bound), so a starved gang cannot hide
from `gang_wait_max_s`. `idle_held_block_fraction` is the part of all blocks that were idle on
instances held for a gang (what holds cost). `wall_s` is each policy's own wall time; the two
policies run in separate processes, side by side, unless `--processes 1`.
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.process_settings import tune_process
from actors.state import StateStore
from actors.worker.core.scheduler import new_scheduler
from actors.worker.core.scheduler.generic import GenericScheduler
from actors.worker.core.scheduler.share_stack import SharePolicy
from bench.gang_workload import (
    BLOCKS,
    NS_PER_S,
    POLICIES,
    Arrival,
    Config,
    arrivals,
    block_ids,
    make_job,
    make_nodes,
    percentile,
)
from contracts import (
    Allocation,
    ClientStatus,
    EvalStatus,
    Evaluation,
    Job,
    TriggeredBy,
)
from contracts.share import FLEET_ATTRIBUTE, node_block_ids
from contracts.state_log import AllocClientUpdate, UpdateAllocsClientStatus, UpsertJob, UpsertNodes


@dataclass(slots=True)
class Run:
    arrival: Arrival
    job: Job
    blocked_eval: str = ""  # the id of its blocked evaluation while it waits
    started_s: float | None = None
    allocs: tuple[Allocation, ...] = ()
    last_processed_s: float = 0.0


@dataclass(slots=True)
class Stats:
    busy_block_s: float = 0.0  # integral of busy blocks over the measured (demand) time
    idle_held_block_s: float = 0.0
    demand_s: float = 0.0
    evals_processed: int = 0  # scheduler invocations
    skipped: int = 0  # blocked gangs passed over by the precheck (singles are not counted)
    renewals: int = 0  # drover gangs processed only to renew their hold
    precheck_mismatches: int = 0
    cap_hits: int = 0
    max_blocked: int = 0


class Simulation:
    """One policy over one arrival sequence, on a fresh store. `check` runs
    `check_invariants` after every event (slow: meant for small clusters in tests)."""

    def __init__(
        self,
        config: Config,
        policy: SharePolicy,
        sequence: list[Arrival] | None = None,
        *,
        check: bool = False,
    ) -> None:
        self.config = config
        self.policy = policy
        self.sequence = arrivals(config) if sequence is None else sequence
        self.check = check
        self.store = StateStore()
        self.planner = InProcessPlanner(self.store)
        self.nodes = make_nodes(config)
        self.store.commit(UpsertNodes(tuple(self.nodes)))
        self.fleet_of = {n.id: n.attributes[FLEET_ATTRIBUTE] for n in self.nodes}
        self.total = {n.id: len(node_block_ids(n)) for n in self.nodes}
        self.busy = dict.fromkeys(self.total, 0)
        self.busy_total = 0
        self.free_nodes = {n for n, total in self.total.items() if total > 0}
        self.idle: dict[str, set[str]] = {}
        for node_id, fleet in self.fleet_of.items():
            self.idle.setdefault(fleet, set()).add(node_id)
        self.runs: list[Run] = []
        self.blocked_singles: dict[int, Run] = {}  # by arrival index: insertion is arrival order
        self.blocked_gangs: dict[int, Run] = {}
        self.holds: dict[int, frozenset[str]] = {}  # blocked gang -> the instances it holds
        self._all_held: set[str] | None = set()
        self.now_s = 0.0
        self.stats = Stats()
        self._ids = 0
        self.last_gang_event_s = -math.inf  # a gang started or finished: holds may move
        self._events: list[tuple[float, int, int]] = []  # (time, seq, run index) completions

    # -- identities and time ---------------------------------------------------------------

    def _new_id(self) -> str:
        self._ids += 1
        n = self._ids
        return f"{n:08x}-0000-4000-8000-{(n * 0x9E3779B97F4A7C15) % (1 << 48):012x}"

    def _now_ns(self) -> int:
        return int(self.now_s * NS_PER_S)

    # -- the scheduler ---------------------------------------------------------------------

    def _process(self, run: Run, evaluation: Evaluation) -> bool:
        """Process one evaluation with the real scheduler; True if the run started."""
        planner = self.planner
        scheduler = new_scheduler(
            evaluation.type,
            self.store.snapshot(),
            planner,
            now_ns=self._now_ns,
            new_id=self._new_id,
        )
        assert isinstance(scheduler, GenericScheduler)
        scheduler.share_policy = self.policy
        scheduler.process(evaluation)
        self.stats.evals_processed += 1
        run.last_processed_s = self.now_s
        placed = [
            a for r in planner.results for allocs in r.node_allocation.values() for a in allocs
        ]
        for created in planner.created_evals:
            if created.status is EvalStatus.BLOCKED:
                run.blocked_eval = created.id
        planner.plans.clear()
        planner.results.clear()
        planner.evals.clear()
        planner.created_evals.clear()
        planner.reblocked.clear()
        if placed:
            assert len(placed) == run.arrival.ranks, "a run is placed whole or not at all"
            self._start(run, tuple(placed))
            return True
        if run.arrival.gang:
            self._refresh_hold(run)
        return False

    def _refresh_hold(self, run: Run) -> None:
        index = run.arrival.index
        stored = self.store.eval(run.blocked_eval) if run.blocked_eval else None
        held = (
            frozenset(stored.reserved_nodes)
            if stored is not None and stored.status is EvalStatus.BLOCKED
            else frozenset()
        )
        if self.holds.get(index, frozenset()) != held:
            if held:
                self.holds[index] = held
            else:
                self.holds.pop(index, None)
            self._all_held = None

    def all_held(self) -> set[str]:
        if self._all_held is None:
            self._all_held = set().union(*self.holds.values()) if self.holds else set()
        return self._all_held

    # -- runs start and end ----------------------------------------------------------------

    def _start(self, run: Run, placed: tuple[Allocation, ...]) -> None:
        run.started_s = self.now_s
        run.allocs = placed
        if run.arrival.gang:
            self.last_gang_event_s = self.now_s
        index = run.arrival.index
        self.blocked_singles.pop(index, None)
        self.blocked_gangs.pop(index, None)
        if self.holds.pop(index, None) is not None:
            self._all_held = None
        for alloc in placed:
            self._charge(alloc.node_id, len(block_ids(alloc)))
        heapq.heappush(self._events, (self.now_s + run.arrival.duration_s, index, index))

    def _finish(self, run: Run) -> None:
        updates = tuple(
            AllocClientUpdate(a.id, ClientStatus.COMPLETE, node_id=a.node_id) for a in run.allocs
        )
        self.store.commit(UpdateAllocsClientStatus(updates))
        if run.arrival.gang:
            self.last_gang_event_s = self.now_s
        for alloc in run.allocs:
            self._charge(alloc.node_id, -len(block_ids(alloc)))

    def _charge(self, node_id: str, blocks: int) -> None:
        busy = self.busy[node_id] + blocks
        total = self.total[node_id]
        assert 0 <= busy <= total, f"{node_id}: {busy} of {total} blocks busy"
        self.busy[node_id] = busy
        self.busy_total += blocks
        if busy < total:
            self.free_nodes.add(node_id)
        else:
            self.free_nodes.discard(node_id)
        idle = self.idle[self.fleet_of[node_id]]
        if busy == 0:
            idle.add(node_id)
        else:
            idle.discard(node_id)

    # -- arrivals and the blocked-evaluation pass ------------------------------------------

    def _arrive(self, arrival: Arrival) -> None:
        job = make_job(arrival)
        run = Run(arrival, job)
        self.runs.append(run)
        evaluation = Evaluation(
            id=self._new_id(),
            namespace=job.namespace,
            priority=job.priority,
            type="batch",
            triggered_by=TriggeredBy.JOB_REGISTER,
            job_id=job.id,
            status=EvalStatus.PENDING,
        )
        self.store.commit(UpsertJob(job, evals=(evaluation,)))
        stored = self.store.eval(evaluation.id)
        assert stored is not None
        if not self._process(run, stored):
            assert run.blocked_eval, "a run that is not placed waits on a blocked evaluation"
            waiting = self.blocked_gangs if arrival.gang else self.blocked_singles
            waiting[arrival.index] = run

    def single_can_place(self) -> bool:
        """Some instance outside every gang's hold has a free block (one priority: a single
        rank yields to every blocked gang, share_stack.py `_held`)."""
        return not self.free_nodes <= self.all_held()

    def gang_can_place(self, ranks: int, ahead: set[str]) -> bool:
        """Some fleet has `ranks` idle instances outside the holds of the gangs ahead."""
        return any(len(idle - ahead) >= ranks for idle in self.idle.values())

    def _retry(self, run: Run, expect: bool) -> None:
        evaluation = self.store.eval(run.blocked_eval)
        assert evaluation is not None and evaluation.status is EvalStatus.BLOCKED
        if self._process(run, evaluation) != expect:
            self.stats.precheck_mismatches += 1

    def unblock_pass(self) -> None:
        """Blocked evaluations once each, oldest first, bounded (see the module docstring)."""
        stats = self.stats
        budget = self.config.retry_cap
        holds_gangs = self.policy.hold_for_gangs
        gangs = list(self.blocked_gangs.values())
        ahead: set[str] = set()
        for gang in [*gangs, None]:
            limit = gang.arrival.index if gang is not None else math.inf
            singles = self.blocked_singles
            while singles:
                first = next(iter(singles.values()))
                if first.arrival.index > limit or not self.single_can_place():
                    break
                if budget <= 0:
                    stats.cap_hits += 1
                    return
                budget -= 1
                self._retry(first, expect=True)
                if first.started_s is None:
                    break
            if gang is None:
                return
            index = gang.arrival.index
            can = self.gang_can_place(gang.arrival.ranks, ahead if holds_gangs else set())
            renew = (
                not can
                and holds_gangs
                and self.now_s - gang.last_processed_s >= self.config.renew_s
            )
            if can or renew:
                if budget <= 0:
                    stats.cap_hits += 1
                    return
                budget -= 1
                stats.renewals += renew
                self._retry(gang, expect=can)
            else:
                stats.skipped += 1
            if gang.started_s is None:
                ahead |= self.holds.get(index, frozenset())

    # -- the loop --------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        """Account the interval [now, t) at the state reached at `now`."""
        start = max(self.now_s, self.config.warmup_s)
        if t > start and (self.blocked_singles or self.blocked_gangs):
            dt = t - start
            stats = self.stats
            stats.demand_s += dt
            stats.busy_block_s += self.busy_total * dt
            held = self.all_held()
            if held:
                idle = sum(self.total[n] - self.busy[n] for n in held)
                stats.idle_held_block_s += idle * dt
        self.now_s = t

    def events(self) -> Iterator[float]:
        """Run the simulation, yielding after each event (its time)."""
        sequence = self.sequence
        end = self.config.sim_s
        i = 0
        while True:
            next_arrival = sequence[i].time_s if i < len(sequence) else math.inf
            next_end = self._events[0][0] if self._events else math.inf
            t = min(next_arrival, next_end)
            if t >= end:
                self._advance(end)
                return
            self._advance(t)
            if next_end <= next_arrival:
                while self._events and self._events[0][0] == t:
                    _, _, index = heapq.heappop(self._events)
                    self._finish(self.runs[index])
                self.unblock_pass()
            else:
                self._arrive(sequence[i])
                i += 1
            waiting = len(self.blocked_singles) + len(self.blocked_gangs)
            self.stats.max_blocked = max(self.stats.max_blocked, waiting)
            if self.check:
                check_invariants(self)
            yield t

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        for _ in self.events():
            pass
        return self.figures(time.perf_counter() - started)

    # -- figures ---------------------------------------------------------------------------

    def figures(self, wall_s: float) -> dict[str, Any]:
        config, stats = self.config, self.stats
        end, warmup = config.sim_s, config.warmup_s
        gang_waits: list[float] = []
        single_waits: list[float] = []
        for run in self.runs:
            if run.arrival.time_s < warmup:
                continue
            started = run.started_s if run.started_s is not None else end
            waits = gang_waits if run.arrival.gang else single_waits
            waits.append(started - run.arrival.time_s)
        gangs = [r for r in self.runs if r.arrival.gang]
        capacity_s = stats.demand_s * config.total_blocks
        return {
            "block_utilisation": round(stats.busy_block_s / capacity_s, 4) if capacity_s else 0.0,
            "demand_time_fraction": round(stats.demand_s / max(end - warmup, 1e-9), 4),
            "idle_held_block_fraction": round(stats.idle_held_block_s / capacity_s, 4)
            if capacity_s
            else 0.0,
            "gang_wait_p50_s": round(percentile(gang_waits, 0.50), 1),
            "gang_wait_p99_s": round(percentile(gang_waits, 0.99), 1),
            "gang_wait_max_s": round(max(gang_waits, default=0.0), 1),
            "single_wait_p50_s": round(percentile(single_waits, 0.50), 1),
            "single_wait_p99_s": round(percentile(single_waits, 0.99), 1),
            "runs_started": sum(1 for r in self.runs if r.started_s is not None),
            "gangs_started": sum(1 for r in gangs if r.started_s is not None),
            "gangs_never_started": sum(1 for r in gangs if r.started_s is None),
            "gangs_measured": len(gang_waits),
            "blocked_at_end": len(self.blocked_singles) + len(self.blocked_gangs),
            "max_blocked": stats.max_blocked,
            "scheduler_evals": stats.evals_processed,
            "renewals": stats.renewals,
            "skipped_retries": stats.skipped,
            "retry_cap_hits": stats.cap_hits,
            "precheck_mismatches": stats.precheck_mismatches,
            "wall_s": round(wall_s, 2),
        }


def check_invariants(sim: Simulation) -> None:
    """No block is double-booked and the bookkeeping agrees with the store: per instance,
    the busy blocks counted from started runs equal the block devices in the store's usage
    and are at most the instance's blocks, no block is held by two live allocations, every
    started gang's ranks are on distinct instances of one fleet, and the holds mirror the
    store's hold table."""
    store = sim.store
    held_by: dict[str, set[str]] = {}
    for run in sim.runs:
        if run.started_s is None or run.started_s + run.arrival.duration_s <= sim.now_s:
            continue
        nodes = [a.node_id for a in run.allocs]
        if run.arrival.gang:
            assert len(set(nodes)) == len(nodes) == run.arrival.ranks, run.job.id
            assert len({sim.fleet_of[n] for n in nodes}) == 1, run.job.id
        for alloc in run.allocs:
            mine = held_by.setdefault(alloc.node_id, set())
            for block in block_ids(alloc):
                assert block not in mine, f"block {block} double-booked"
                mine.add(block)
    for node_id, total in sim.total.items():
        in_store = sum(1 for d in store.node_usage(node_id).device_ids if "/block" in d)
        counted = len(held_by.get(node_id, ()))
        assert sim.busy[node_id] == counted == in_store <= total, (
            f"{node_id}: bookkeeping {sim.busy[node_id]}, runs {counted}, store {in_store}, "
            f"of {total}"
        )
        holders = {i for i, nodes in sim.holds.items() if node_id in nodes}
        expected = {sim.runs[i].blocked_eval for i in holders}
        assert set(store.node_holds(node_id)) == expected, node_id
    assert sim.busy_total == sum(sim.busy.values())


def simulate(config: Config, policy_name: str) -> dict[str, Any]:
    tune_process()  # as every drover process does (actors/process_settings.py)
    return Simulation(config, POLICIES[policy_name]).run()


def run(config: Config, processes: int = 2) -> dict[str, Any]:
    sequence = arrivals(config)
    started = time.perf_counter()
    names = list(POLICIES)
    results: dict[str, dict[str, Any]]
    if processes > 1:
        with ProcessPoolExecutor(max_workers=min(processes, len(names))) as pool:
            futures = {name: pool.submit(simulate, config, name) for name in names}
            results = {name: f.result() for name, f in futures.items()}
    else:
        results = {name: simulate(config, name) for name in names}
    gangs = sum(1 for a in sequence if a.gang)
    out: dict[str, Any] = {
        "bench": "gang",
        "instances": config.instances,
        "fleets": config.fleets,
        "blocks_per_instance": BLOCKS,
        "sim_hours": config.sim_hours,
        "warmup_s": config.warmup_s,
        "seed": config.seed,
        "load": config.load,
        "gang_share": config.gang_share,
        "gang_demand_share": round(config.gang_demand_share(), 3),
        "mean_run_s": config.mean_run_s,
        "retry_cap": config.retry_cap,
        "renew_s": config.renew_s,
        "runs": len(sequence),
        "gangs": gangs,
    }
    out.update(results["drover"])
    out.update({f"firstfit_{k}": v for k, v in results["firstfit"].items()})
    out["total_wall_s"] = round(time.perf_counter() - started, 2)
    out["python"] = sys.version.split()[0]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    defaults = Config()
    parser.add_argument("--instances", type=int, default=defaults.instances)
    parser.add_argument("--fleets", type=int, default=defaults.fleets)
    parser.add_argument("--sim-hours", type=float, default=defaults.sim_hours)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--gang-share", type=float, default=defaults.gang_share, help="fraction of arrivals"
    )
    parser.add_argument(
        "--load", type=float, default=defaults.load, help="demanded / offered block-seconds"
    )
    parser.add_argument("--mean-run-s", type=float, default=defaults.mean_run_s)
    parser.add_argument("--retry-cap", type=int, default=defaults.retry_cap)
    parser.add_argument("--renew-s", type=float, default=defaults.renew_s)
    parser.add_argument("--processes", type=int, default=2, help="1: policies one after other")
    args = parser.parse_args(argv)
    config = Config(
        instances=args.instances,
        fleets=args.fleets,
        sim_hours=args.sim_hours,
        seed=args.seed,
        gang_share=args.gang_share,
        load=args.load,
        mean_run_s=args.mean_run_s,
        retry_cap=args.retry_cap,
        renew_s=args.renew_s,
    )
    print(orjson.dumps(run(config, args.processes)).decode())


if __name__ == "__main__":
    main()
