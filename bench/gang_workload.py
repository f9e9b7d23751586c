"""The workload of `bench.gang`: the cluster (block-split 8-GPU instances in cluster fleets),
the arrival sequence of one-block runs and gangs, and the jobs they become. Deterministic
for a seed, so every policy is given the same arrivals (see bench/gang.py)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from actors.agent.core import FleetSpec, simulated_nodes
from actors.worker.core.scheduler.share_stack import FIRST_FIT, SharePolicy
from contracts import Allocation, Job, JobType, Node, Resources, Task, TaskGroup
from contracts.share import BLOCK_TYPE, IntRange, ShareRequest, held_ids

GB = 1024
GPUS = 8
BLOCKS = 8
CORES = 64
MEMORY_GB = 512
PRIORITY = 50
MAX_GANG = 16
NS_PER_S = 1_000_000_000
# One block of an 8-GPU instance split in 8: one GPU (8 cores, 64 GB come with it).
SINGLE = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB), gpu_count=IntRange(1, 1))
# A gang rank: the instance whole.
GANG_RANK = ShareRequest(
    cpu=IntRange(1), memory_mb=IntRange(GB), gpu_count=IntRange(GPUS), gang=True
)
POLICIES: dict[str, SharePolicy] = {"drover": SharePolicy(), "firstfit": FIRST_FIT}


@dataclass(frozen=True, slots=True)
class Config:
    instances: int = 1000
    fleets: int = 4
    sim_hours: float = 0.5
    seed: int = 7
    gang_share: float = 0.005
    load: float = 1.4
    mean_run_s: float = 600.0
    retry_cap: int = 200
    renew_s: float = 60.0

    @property
    def sim_s(self) -> float:
        return self.sim_hours * 3600.0

    @property
    def warmup_s(self) -> float:
        return min(self.mean_run_s, self.sim_s / 2)

    @property
    def gang_sizes(self) -> range:
        """2-16 ranks, and never more than a fleet has instances."""
        return range(2, max(2, min(MAX_GANG, self.instances // self.fleets)) + 1)

    @property
    def total_blocks(self) -> int:
        return self.instances * BLOCKS

    def gang_demand_share(self) -> float:
        """The part of the demanded block-seconds that is in gangs."""
        sizes = self.gang_sizes
        gang_blocks = self.gang_share * BLOCKS * (sizes.start + sizes.stop - 1) / 2
        return gang_blocks / (gang_blocks + (1 - self.gang_share))

    def arrival_rate(self) -> float:
        """Arrivals per second such that the demanded block-seconds are `load` x supply."""
        sizes = self.gang_sizes
        mean_ranks = (sizes.start + sizes.stop - 1) / 2
        mean_blocks = (1 - self.gang_share) * 1 + self.gang_share * BLOCKS * mean_ranks
        return self.load * self.total_blocks / (self.mean_run_s * mean_blocks)


@dataclass(frozen=True, slots=True)
class Arrival:
    index: int
    time_s: float
    ranks: int  # 1: a one-block run; more: a gang of that many whole instances
    duration_s: float

    @property
    def gang(self) -> bool:
        return self.ranks > 1


def arrivals(config: Config) -> list[Arrival]:
    """The arrival sequence (times, kinds, durations) every policy is given."""
    rng = random.Random(config.seed)
    rate = config.arrival_rate()
    out: list[Arrival] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= config.sim_s:
            return out
        ranks = rng.choice(config.gang_sizes) if rng.random() < config.gang_share else 1
        duration = config.mean_run_s * rng.uniform(0.5, 1.5)
        out.append(Arrival(len(out), t, ranks, duration))


def make_nodes(config: Config) -> list[Node]:
    nodes: list[Node] = []
    per_fleet, extra = divmod(config.instances, config.fleets)
    for f in range(config.fleets):
        count = per_fleet + (1 if f < extra else 0)
        if count == 0:
            continue
        spec = FleetSpec(
            f"fleet{f}",
            count,
            cpu_mhz=CORES * 1000,
            memory_mb=MEMORY_GB * GB,
            gpus=GPUS,
            gpu_model="H100",
            gpu_memory="80 GiB",
            blocks=BLOCKS,
            placement="cluster",
        )
        nodes.extend(simulated_nodes(spec))
    return nodes


def make_job(arrival: Arrival) -> Job:
    request = GANG_RANK if arrival.gang else SINGLE
    group = TaskGroup(
        "run",
        count=arrival.ranks,
        tasks=(Task("rank", "mock", {"run_for": "1h"}, resources=Resources(0, 0)),),
        share=request,
    )
    job_id = f"{'gang' if arrival.gang else 'run'}-{arrival.index:06d}"
    return Job(
        id=job_id,
        name=job_id,
        type=JobType.BATCH,
        all_at_once=True,
        priority=PRIORITY,
        task_groups=(group,),
    )


def block_ids(alloc: Allocation) -> tuple[str, ...]:
    return held_ids(alloc, BLOCK_TYPE)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]
