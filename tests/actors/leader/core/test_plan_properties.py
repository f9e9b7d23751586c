"""Property tests for Omega-style optimistic concurrency: plans built against one stale
snapshot and applied in turn never overcommit a node, whatever the cluster looks like.

1. Random clusters (capacities, reserved resources, GPUs, nodes not ready / ineligible /
   draining / missing) and random plans (placements, stops, in-place updates, device
   claims), all built against the SAME snapshot, applied one after another by PlanApplier.
2. The real schedulers for several jobs, all built against the same initial snapshot, their
   plans applied in turn, partially rejected ones retried by the scheduler's own loop.

After every apply, usage is recomputed from scratch from `store.allocs()` and compared with
node capacity and with the store's incremental `node_usage`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.leader.core.plan_apply import PlanApplier
from actors.state import StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import (
    AllocatedDevice,
    AllocatedResources,
    Allocation,
    DesiredStatus,
    DeviceInstance,
    DrainStrategy,
    DriverInfo,
    EvalStatus,
    Evaluation,
    Job,
    Node,
    NodeDeviceResource,
    NodeEligibility,
    NodeResources,
    NodeStatus,
    Plan,
    ReservedResources,
    Resources,
    Task,
    TaskGroup,
)
from contracts.state_log import UpsertAllocs, UpsertJob, UpsertNodes

PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- invariants -------------------------------------------------------------------------------


def recomputed_usage(store: StateStore) -> dict[str, dict[str, Any]]:
    usage: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"cpu": 0, "memory_mb": 0, "disk_mb": 0, "devices": [], "count": 0}
    )
    for alloc in store.allocs():
        if alloc.terminal():
            continue
        u = usage[alloc.node_id]
        res = alloc.allocated_resources
        u["cpu"] += res.cpu
        u["memory_mb"] += res.memory_mb
        u["disk_mb"] += res.disk_mb
        u["devices"] += [i for d in res.devices for i in d.device_ids]
        u["count"] += 1
    return usage


def assert_no_overcommit(store: StateStore) -> None:
    usage = recomputed_usage(store)
    for node_id, u in usage.items():
        node = store.node(node_id)
        assert node is not None, f"live alloc on missing node {node_id}"
        cap, res = node.node_resources, node.reserved_resources
        assert u["cpu"] <= cap.cpu - res.cpu, (node_id, u)
        assert u["memory_mb"] <= cap.memory_mb - res.memory_mb, (node_id, u)
        assert u["disk_mb"] <= cap.disk_mb - res.disk_mb, (node_id, u)
        assert len(u["devices"]) == len(set(u["devices"])), (node_id, u["devices"])
        healthy = {i.id for d in cap.devices for i in d.instances if i.healthy}
        assert set(u["devices"]) <= healthy, (node_id, u["devices"])


def assert_usage_matches(store: StateStore) -> None:
    """The store's incremental per-node usage equals a recomputation from scratch."""
    usage = recomputed_usage(store)
    node_ids = {n.id for n in store.nodes()} | set(usage)
    for node_id in node_ids:
        u = usage.get(node_id)
        got = store.node_usage(node_id)
        if u is None:
            assert (got.cpu, got.memory_mb, got.disk_mb, got.alloc_count) == (0, 0, 0, 0), node_id
            assert got.device_ids == frozenset()
            continue
        assert (got.cpu, got.memory_mb, got.disk_mb, got.alloc_count) == (
            u["cpu"],
            u["memory_mb"],
            u["disk_mb"],
            u["count"],
        ), node_id
        assert got.device_ids == frozenset(u["devices"]), node_id


# -- random clusters and plans ----------------------------------------------------------------

GPU = ("nvidia", "gpu", "A100")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Allocation]]:
    """Nodes (some unusable) and existing allocations that fit them."""
    nodes = []
    allocs = []
    ids = itertools.count()
    for i in range(draw(st.integers(1, 6))):
        cpu = draw(st.integers(5, 40)) * 100
        mem = draw(st.integers(2, 32)) * 128
        reserved = ReservedResources(
            cpu=draw(st.sampled_from([0, 0, 100, 500])) % cpu,
            memory_mb=draw(st.sampled_from([0, 0, 128])) % mem,
        )
        n_gpus = draw(st.integers(0, 3))
        unhealthy = draw(st.integers(0, n_gpus))
        devices = ()
        if n_gpus:
            devices = (
                NodeDeviceResource(
                    *GPU,
                    instances=tuple(
                        DeviceInstance(f"n{i}-g{g}", healthy=g >= unhealthy) for g in range(n_gpus)
                    ),
                ),
            )
        kind = draw(st.sampled_from(["ready"] * 5 + ["init", "down", "ineligible", "drain"]))
        node = Node(
            id=f"n{i}",
            name=f"n{i}",
            node_resources=NodeResources(cpu=cpu, memory_mb=mem, disk_mb=10_000, devices=devices),
            reserved_resources=reserved,
            drivers={"mock": DriverInfo()},
            status={"init": NodeStatus.INITIALIZING, "down": NodeStatus.DOWN}.get(
                kind, NodeStatus.READY
            ),
            scheduling_eligibility=(
                NodeEligibility.INELIGIBLE if kind == "ineligible" else NodeEligibility.ELIGIBLE
            ),
            drain_strategy=DrainStrategy() if kind == "drain" else None,
        ).with_computed_class()
        nodes.append(node)
        # Existing allocations that fit (the store only ever holds what was accepted).
        free_cpu, free_mem = cpu - reserved.cpu, mem - reserved.memory_mb
        free_gpus = [f"n{i}-g{g}" for g in range(unhealthy, n_gpus)]
        for _ in range(draw(st.integers(0, 3))):
            a_cpu = draw(st.integers(1, 10)) * 100
            a_mem = draw(st.integers(1, 8)) * 64
            if a_cpu > free_cpu or a_mem > free_mem:
                continue
            free_cpu -= a_cpu
            free_mem -= a_mem
            devices = ()
            if free_gpus and draw(st.booleans()):
                devices = (AllocatedDevice(*GPU, (free_gpus.pop(),)),)
            allocs.append(
                Allocation(
                    id=f"old-{next(ids)}",
                    node_id=node.id,
                    job_id="old",
                    task_group="web",
                    allocated_resources=AllocatedResources(a_cpu, a_mem, 0, devices),
                )
            )
    return nodes, allocs


@st.composite
def plans(
    draw: st.DrawFn, nodes: list[Node], existing: list[Allocation], index: int, snapshot_index: int
) -> Plan:
    node_ids = [n.id for n in nodes] + ["ghost"]
    placements: dict[str, list[Allocation]] = defaultdict(list)
    stops: dict[str, list[Allocation]] = defaultdict(list)
    for j in range(draw(st.integers(1, 6))):
        node_id = draw(st.sampled_from(node_ids))
        devices = ()
        if draw(st.integers(0, 3)) == 0:
            # Any instance id of the node (healthy or not, possibly taken) or a bogus one.
            node = next((n for n in nodes if n.id == node_id), None)
            candidates = [
                i.id
                for n in ([node] if node else [])
                for d in n.node_resources.devices
                for i in d.instances
            ] + [f"{node_id}-bogus"]
            devices = (AllocatedDevice(*GPU, (draw(st.sampled_from(candidates)),)),)
        placements[node_id].append(
            Allocation(
                id=f"p{index}-{j}",
                node_id=node_id,
                job_id=f"job{index}",
                task_group="web",
                allocated_resources=AllocatedResources(
                    draw(st.integers(1, 20)) * 100, draw(st.integers(1, 16)) * 64, 0, devices
                ),
            )
        )
    if existing:
        for alloc in draw(
            st.lists(st.sampled_from(existing), max_size=3, unique_by=lambda a: a.id)
        ):
            if draw(st.booleans()):
                stops[alloc.node_id].append(
                    dataclasses.replace(alloc, desired_status=DesiredStatus.STOP)
                )
            else:
                # An in-place update of an existing alloc (same resources, new job version).
                placements[alloc.node_id].append(dataclasses.replace(alloc, job_version=index + 1))
    return Plan(
        eval_id=f"e{index}",
        priority=50,
        job_id=f"job{index}",
        all_at_once=draw(st.booleans()) and draw(st.booleans()),
        snapshot_index=snapshot_index,
        node_allocation={k: tuple(v) for k, v in placements.items()},
        node_update={k: tuple(v) for k, v in stops.items()},
    )


@PROPERTY_SETTINGS
@given(st.data())
def test_stale_plans_never_overcommit(data: st.DataObject) -> None:
    nodes, existing = data.draw(clusters())
    store = StateStore()
    store.commit(UpsertNodes(tuple(nodes)))
    if existing:
        store.commit(UpsertAllocs(tuple(existing)))
    assert_no_overcommit(store)
    assert_usage_matches(store)

    stale = store.snapshot()
    batch = [
        data.draw(plans(nodes, existing, i, stale.latest_index()))
        for i in range(data.draw(st.integers(2, 5)))
    ]
    applier = PlanApplier(store)
    by_id = {n.id: n for n in nodes}
    for plan in batch:
        before = {a.id for a in store.allocs()}
        result = applier.apply(plan)

        # Every touched node is either accepted or rejected with a reason, never both.
        rejected = {r.node_id: r.reason for r in result.rejected_nodes}
        assert all(reason for reason in rejected.values())
        touched = set(plan.node_allocation) | set(plan.node_update)
        accepted = set(result.node_allocation) | set(result.node_update)
        assert not accepted & set(rejected)
        if plan.all_at_once and rejected:
            assert result.node_allocation == {} and result.node_update == {}
        else:
            assert accepted | set(rejected) == touched
        assert (result.refresh_index != 0) == bool(rejected)
        event(f"plan {'partly rejected' if rejected else 'fully committed'}")

        for node_id, allocs in plan.node_allocation.items():
            committed = node_id in result.node_allocation
            for alloc in allocs:
                stored = store.alloc(alloc.id)
                if committed:
                    assert stored is not None and stored.node_id == node_id
                elif alloc.id not in before:
                    assert stored is None  # a rejected placement leaves no trace
            fresh = [a for a in allocs if a.id not in before]
            node = by_id.get(node_id)
            if committed and fresh:
                # New placements only ever land on ready, eligible, non-draining nodes.
                assert node is not None and node.ready()
        assert_no_overcommit(store)
        assert_usage_matches(store)


# -- the real schedulers, concurrently-ish ----------------------------------------------------


@st.composite
def scheduler_scenarios(draw: st.DrawFn) -> tuple[list[Node], list[Job]]:
    nodes = [
        Node(
            id=f"n{i}",
            name=f"n{i}",
            datacenter=draw(st.sampled_from(["dc1", "dc2"])),
            node_resources=NodeResources(
                cpu=draw(st.integers(10, 40)) * 100,
                memory_mb=draw(st.integers(4, 32)) * 256,
                disk_mb=10_000,
            ),
            drivers={"mock": DriverInfo()},
        ).with_computed_class()
        for i in range(draw(st.integers(2, 8)))
    ]
    jobs = []
    for j in range(draw(st.integers(2, 5))):
        task = Task(
            name="t",
            driver="mock",
            resources=Resources(
                cpu=draw(st.integers(2, 15)) * 100, memory_mb=draw(st.integers(1, 12)) * 256
            ),
        )
        jobs.append(
            Job(
                id=f"job{j}",
                name=f"job{j}",
                type=draw(st.sampled_from(["service", "service", "batch"])),
                priority=draw(st.integers(10, 90)),
                task_groups=(TaskGroup(name="web", count=draw(st.integers(1, 8)), tasks=(task,)),),
            )
        )
    return nodes, jobs


def _ids(prefix: str) -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"{prefix}-{next(counter)}"


@PROPERTY_SETTINGS
@given(scheduler_scenarios())
def test_concurrent_schedulers_never_overcommit(scenario: tuple[list[Node], list[Job]]) -> None:
    nodes, jobs = scenario
    store = StateStore()
    store.commit(UpsertNodes(tuple(nodes)))
    evals = {}
    for job in jobs:
        ev = Evaluation(
            id=f"eval-{job.id}", type=str(job.type), job_id=job.id, priority=job.priority
        )
        store.commit(UpsertJob(job, evals=(ev,)))
        evals[job.id] = store.eval(ev.id)

    # Every scheduler starts from the same initial snapshot: all but the first are stale.
    initial = store.snapshot()
    planner = InProcessPlanner(store)
    schedulers = {
        job.id: new_scheduler(
            str(job.type),
            initial,
            planner,
            now_ns=lambda: 1,
            new_id=_ids(job.id),
        )
        for job in jobs
    }
    for job in jobs:
        schedulers[job.id].process(evals[job.id])
        assert_no_overcommit(store)
        assert_usage_matches(store)

    blocked_jobs = {e.job_id for e in planner.created_evals if e.status is EvalStatus.BLOCKED}
    final = {e.job_id: e for e in planner.evals}
    for job in jobs:
        live = [a for a in store.allocs_by_job(job.namespace, job.id) if not a.terminal()]
        count = job.task_groups[0].count
        assert len(live) <= count
        assert len(live) == count or job.id in blocked_jobs, (job.id, len(live), count)
        out = final[job.id]
        assert out.status is EvalStatus.COMPLETE, out
        # What is not placed is queued.
        assert len(live) + out.queued_allocations.get("web", 0) == count
        assert len({a.name for a in live}) == len(live)  # names are unique
    # A stale scheduler whose plan was partly rejected retried with a refreshed state.
    for result in planner.results:
        assert (result.refresh_index != 0) == bool(result.rejected_nodes)
    retried = any(r.rejected_nodes for r in planner.results)
    event("a stale plan was rejected and retried" if retried else "no conflict")
