"""Scheduling-core throughput, in process (no actors): `python -m bench.core`.

Registers `--jobs` service jobs of `--count` allocations on `--nodes` simulated nodes (half
the jobs constrained to the half of the nodes running linux), then runs every evaluation
through the scheduler and the leader's plan applier against one state store, as the real
system does but without the transport. Prints one JSON line.

`overcommitted_nodes` is recomputed from scratch from every allocation in the store, not
taken from the store's incremental usage counters, so it checks them too.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import orjson

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.process_settings import GC_THRESHOLDS, after_state_applied, paced_heap, tune_process
from actors.state import StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import (
    Allocation,
    Constraint,
    DriverInfo,
    Evaluation,
    Job,
    Node,
    NodeResources,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.state_log import UpsertJob, UpsertNodes


def make_nodes(count: int, seed: int) -> list[Node]:
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        nodes.append(
            Node(
                id=f"node-{i:05d}",
                name=f"node-{i:05d}",
                datacenter=f"dc{1 + i % 3}",
                node_class="linux-std" if i % 2 == 0 else "windows-std",
                attributes={
                    "kernel.name": "linux" if i % 2 == 0 else "windows",
                    "rack": f"r{rng.randrange(50)}",
                    "unique.hostname": f"host-{i}",
                },
                drivers={"mock": DriverInfo()},
                node_resources=NodeResources(cpu=4000, memory_mb=16384, disk_mb=100_000),
            ).with_computed_class()
        )
    return nodes


def make_job(i: int, count: int) -> Job:
    constraints = (Constraint("${attr.kernel.name}", "linux", "="),) if i % 2 == 0 else ()
    return Job(
        id=f"job-{i:04d}",
        name=f"job-{i:04d}",
        datacenters=("dc*",),
        constraints=constraints,
        task_groups=(
            TaskGroup(
                name="app",
                count=count,
                tasks=(
                    Task(name="srv", driver="mock", resources=Resources(cpu=100, memory_mb=256)),
                ),
            ),
        ),
    )


def overcommitted(nodes: Iterable[Node], allocs: Iterable[Allocation]) -> list[str]:
    """Nodes whose live allocations exceed what they offer, recomputed from scratch from the
    allocation records, never from the store's counters: cpu, memory or disk past capacity
    minus reserved, a device instance held by two live allocations, or one the node does not
    have. An allocation on an unknown node counts its node as overcommitted too.

    "Live" is what the leader's plan re-check and the store's usage count: not terminal on
    either side (`Allocation.terminal()`). A stopped allocation (server-terminal) releases its
    resources as soon as the stop commits, even while its task is still running, and so does
    one whose task finished (client-terminal), even before the scheduler stops it."""
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    held: dict[str, list[str]] = defaultdict(list)  # node -> device instance ids, repeats kept
    for alloc in allocs:
        if alloc.terminal():
            continue
        res = alloc.allocated_resources
        u = used[alloc.node_id]
        u[0] += res.cpu
        u[1] += res.memory_mb
        u[2] += res.disk_mb
        for device in res.devices:
            held[alloc.node_id].extend(device.device_ids)
    by_id = {node.id: node for node in nodes}
    bad = []
    for node_id, (cpu, mem, disk) in used.items():
        node = by_id.get(node_id)
        if node is None:
            bad.append(node_id)
            continue
        cap, reserved = node.node_resources, node.reserved_resources
        ids = held.get(node_id, [])
        present = {i.id for group in cap.devices for i in group.instances}
        if (
            cpu > cap.cpu - reserved.cpu
            or mem > cap.memory_mb - reserved.memory_mb
            or disk > cap.disk_mb - reserved.disk_mb
            or len(set(ids)) < len(ids)
            or not present.issuperset(ids)
        ):
            bad.append(node_id)
    return sorted(bad)


def register_workload(
    store: StateStore, nodes: int, jobs: int, count: int, seed: int = 7
) -> list[str]:
    """Commit the nodes and the jobs, each with its registration eval; returns the eval ids."""
    store.commit(UpsertNodes(tuple(make_nodes(nodes, seed))))
    evals = []
    for i in range(jobs):
        job = make_job(i, count)
        evaluation = Evaluation(
            id=f"eval-{i:04d}-0000-0000-0000-{i:012x}",
            job_id=job.id,
            type="service",
            priority=job.priority,
            triggered_by=TriggeredBy.JOB_REGISTER,
        )
        store.commit(UpsertJob(job, evals=(evaluation,)))
        evals.append(evaluation.id)
    return evals


def schedule_all(store: StateStore, eval_ids: list[str]) -> InProcessPlanner:
    """Run every eval through the scheduler, plans applied straight to `store`."""
    planner = InProcessPlanner(store)
    for eval_id in eval_ids:
        evaluation = store.eval(eval_id)
        assert evaluation is not None
        new_scheduler("service", store.snapshot(), planner).process(evaluation)
        after_state_applied()  # as the leader does after each batch of plans
    return planner


def run(nodes: int, jobs: int, count: int, seed: int = 7) -> dict[str, Any]:
    tune_process()  # as every drover process does (actors/process_settings.py)
    store = StateStore()
    evals = register_workload(store, nodes, jobs, count, seed)
    with paced_heap() as heap:  # as every actor does once its state is loaded
        started = time.perf_counter()
        planner = schedule_all(store, evals)
        seconds = time.perf_counter() - started
        freezes, sweeps = heap.freezes, heap.sweeps

    placements = sum(1 for a in store.allocs() if not a.terminal())
    rejected = sum(len(r.rejected_nodes) for r in planner.results)
    return {
        "bench": "core",
        "nodes": nodes,
        "jobs": jobs,
        "count": count,
        "placements": placements,
        "seconds": round(seconds, 3),
        "placements_per_s": round(placements / seconds, 1) if seconds else 0.0,
        "plans": len(planner.plans),
        "rejected_nodes": rejected,
        "failed_evals": sum(1 for e in planner.evals if e.status == "failed"),
        "overcommitted_nodes": len(overcommitted(store.nodes(), store.allocs())),
        "gc_thresholds": list(GC_THRESHOLDS),
        "heap_freezes": freezes,
        "heap_sweeps": sweeps,
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary to stderr")
    args = parser.parse_args(argv)
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        result = profiler.runcall(run, args.nodes, args.jobs, args.count, args.seed)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    else:
        result = run(args.nodes, args.jobs, args.count, args.seed)
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
