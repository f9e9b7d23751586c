"""Property test for runs on instance blocks and gangs (share.py, share_stack.py), committed
through the real leader logic (InProcessPlanner -> PlanApplier -> plan_eval's re-check).

Random fleets (cores, GPUs, blocks, placement; unsplittable instances included) and random
runs (single ranks with drawn ranges, gangs of 2-4 whole instances) are scheduled by several
workers at once: each round takes ONE snapshot and runs 2-3 evaluations against it in turn,
so every plan after the first is built on stale state and the leader must refuse what another
plan took first. Between rounds some runs complete and blocked evaluations are processed
again (holds, retries). After every plan the leader commits and every client update:

1. per instance: no block or GPU is held twice, blocks held <= total, cpu and memory fit;
2. a gang is never partly committed: 0 or N live ranks, each holding a whole instance (all
   blocks and GPUs), N distinct instances of one cluster fleet;
3. a single rank has at most one live allocation, holding the smallest share that fits;
4. the store's incremental node usage equals the live allocations' (devices, cpu, memory).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actors.agent.core import FleetSpec, simulated_nodes
from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.state import StateReader, StateStore
from actors.worker.core.scheduler import new_scheduler
from actors.worker.core.scheduler.share import Instance, instance_of, share_fits, smallest_share
from contracts import (
    Allocation,
    ClientStatus,
    EvalStatus,
    Evaluation,
    Job,
    JobType,
    Node,
    Plan,
    PlanResult,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.dstack.blocks import Blocks, resolve_blocks
from contracts.dstack.sizes import gb_to_mb
from contracts.job import DEFAULT_NAMESPACE
from contracts.share import BLOCK_TYPE, IntRange, ShareRequest
from contracts.state_log import (
    AllocClientUpdate,
    UpdateAllocsClientStatus,
    UpsertJob,
    UpsertNodes,
)

GB = 1024
NOW = 1_700_000_000_000_000_000
MAX_ROUNDS = 10
BLOCK_CHOICES: list[int | str] = [1, 2, 4, "auto"]

# -- drawing fleets and runs ------------------------------------------------------------------


@st.composite
def fleet_specs(draw: st.DrawFn, index: int) -> FleetSpec:
    cpus = draw(st.sampled_from([2, 4, 8, 16]))
    gpus = draw(st.sampled_from([0, 2, 4, 8]))
    return FleetSpec(
        f"f{index}",
        draw(st.integers(1, 5)),
        cpu_mhz=cpus * 1000,
        memory_mb=draw(st.sampled_from([4, 8, 16, 32])) * GB,
        gpus=gpus,
        gpu_model="A100" if gpus else "",
        gpu_memory="80 GiB" if gpus else "",
        blocks=draw(st.sampled_from(BLOCK_CHOICES)),
        placement=draw(st.sampled_from(["any", "cluster", "cluster"])),
    )


@dataclass(frozen=True)
class Run:
    name: str
    request: ShareRequest
    nodes: int
    priority: int


@st.composite
def runs(draw: st.DrawFn, index: int, specs: list[FleetSpec]) -> Run:
    """Ranges sized on one drawn fleet (a cluster one for most gangs), so most runs fit
    somewhere; some fit nowhere, or only in the fleet they name."""
    gang = draw(st.integers(0, 2)) == 0
    clusters = [s for s in specs if s.placement == "cluster"]
    target = draw(st.sampled_from(clusters if gang and clusters else specs))
    cpus, gpus = target.cpu_mhz // 1000, target.gpus
    cpu_min = draw(st.integers(1, cpus))
    cpu_max = draw(st.sampled_from([None, None, cpu_min, cpu_min * 2]))
    gpu_min = draw(st.integers(0, gpus))
    gpu_max = draw(st.sampled_from([None, gpu_min]))
    fleets = draw(st.sampled_from([(), (), (), (target.name,)]))
    request = ShareRequest(
        cpu=IntRange(cpu_min, cpu_max),
        memory_mb=IntRange(draw(st.sampled_from([0, 512, 1 * GB, 2 * GB]))),
        gpu_count=IntRange(gpu_min, gpu_max),
        gang=gang,
        fleets=fleets,
    )
    nodes = draw(st.integers(2, 4)) if gang else 1
    return Run(f"r{index}", request, nodes, draw(st.sampled_from([50, 50, 70])))


def job_of(run: Run) -> Job:
    group = TaskGroup(
        run.name,
        count=run.nodes,
        tasks=(Task("rank", "mock", {"run_for": "1h"}, resources=Resources(0, 0)),),
        share=run.request,
    )
    return Job(
        id=run.name,
        name=run.name,
        type=JobType.BATCH,
        task_groups=(group,),
        all_at_once=True,
        priority=run.priority,
    )


def register(store: StateStore, run: Run) -> str:
    job = job_of(run)
    ev = Evaluation(
        id=f"eval-{run.name}",
        namespace=job.namespace,
        priority=job.priority,
        type=str(job.type),
        triggered_by=TriggeredBy.JOB_REGISTER,
        job_id=job.id,
    )
    store.commit(UpsertJob(job, evals=(ev,)))
    return ev.id


# -- invariants -------------------------------------------------------------------------------


def device_ids(alloc: Allocation, *, blocks: bool) -> list[str]:
    devices = alloc.allocated_resources.devices
    return [i for d in devices if (d.type == BLOCK_TYPE) == blocks for i in d.device_ids]


def check_invariants(store: StateStore, runs_by_name: dict[str, Run]) -> None:
    # Per node and per job: store.allocs() walks every shard of the table, far slower here.
    instances: dict[str, Instance | None] = {}
    for node in store.nodes():
        instance = instances[node.id] = instance_of(node)
        live = [a for a in store.allocs_by_node(node.id) if not a.terminal()]
        check_instance(store, node, instance, live)
    for name, run in runs_by_name.items():
        allocs = [a for a in store.allocs_by_job(DEFAULT_NAMESPACE, name) if not a.terminal()]
        if run.request.gang:
            check_gang(run, allocs, instances)
        else:
            check_single(run, allocs, instances)


def check_instance(
    store: StateStore, node: Node, instance: Instance | None, allocs: list[Allocation]
) -> None:
    if instance is None:  # could not be split: registered ineligible, offers nothing
        assert allocs == [], (node.name, allocs)
    blocks = [b for a in allocs for b in device_ids(a, blocks=True)]
    gpus = [g for a in allocs for g in device_ids(a, blocks=False)]
    assert len(blocks) == len(set(blocks)), f"a block given twice on {node.name}: {blocks}"
    assert len(gpus) == len(set(gpus)), f"a GPU given twice on {node.name}: {gpus}"
    if instance is not None:
        assert set(blocks) <= set(instance.block_ids), (node.name, blocks)
        assert set(gpus) <= set(instance.gpu_ids), (node.name, gpus)
    capacity, reserved = node.node_resources, node.reserved_resources
    cpu = sum(a.allocated_resources.cpu for a in allocs)
    memory = sum(a.allocated_resources.memory_mb for a in allocs)
    assert cpu <= capacity.cpu - reserved.cpu, (node.name, cpu)
    assert memory <= capacity.memory_mb - reserved.memory_mb, (node.name, memory)
    usage = store.node_usage(node.id)
    assert usage.device_ids == frozenset(blocks + gpus), node.name
    assert (usage.cpu, usage.memory_mb, usage.alloc_count) == (cpu, memory, len(allocs))


def check_gang(run: Run, allocs: list[Allocation], instances: dict[str, Instance | None]) -> None:
    assert len(allocs) in (0, run.nodes), f"gang {run.name} partly committed: {len(allocs)}"
    if not allocs:
        return
    assert len({a.node_id for a in allocs}) == run.nodes, f"gang {run.name} shares an instance"
    held = [instances[a.node_id] for a in allocs]
    assert all(i is not None and i.cluster for i in held), f"gang {run.name} off a cluster"
    assert len({i.fleet for i in held if i is not None}) == 1, f"gang {run.name} spans fleets"
    for alloc in allocs:
        instance = instances[alloc.node_id]
        assert instance is not None
        if run.request.fleets:
            assert instance.fleet in run.request.fleets
        assert sorted(device_ids(alloc, blocks=True)) == sorted(instance.block_ids)
        assert sorted(device_ids(alloc, blocks=False)) == sorted(instance.gpu_ids)
        assert share_fits(run.request, instance, instance.total_blocks)


def check_single(run: Run, allocs: list[Allocation], instances: dict[str, Instance | None]) -> None:
    assert len(allocs) <= 1, f"run {run.name} placed {len(allocs)} times"
    for alloc in allocs:
        instance = instances[alloc.node_id]
        assert instance is not None
        if run.request.fleets:
            assert instance.fleet in run.request.fleets
        k = len(device_ids(alloc, blocks=True))
        assert k == smallest_share(run.request, instance, 0), (run.name, k)
        assert share_fits(run.request, instance, k)
        total = instance.total_blocks
        assert len(device_ids(alloc, blocks=False)) == len(instance.gpu_ids) // total * k
        assert alloc.allocated_resources.cpu == (
            instance.offer.cpu_count // total * k * instance.mhz_per_core
        )
        assert (
            alloc.allocated_resources.memory_mb == gb_to_mb(instance.offer.memory_gb) // total * k
        )


class CheckingPlanner(InProcessPlanner):
    """The real plan applier, with the invariants checked after every plan it commits
    (a scheduler's retry must not get to hide what an earlier plan broke)."""

    def __init__(self, store: StateStore, runs_by_name: dict[str, Run]) -> None:
        super().__init__(store)
        self.runs_by_name = runs_by_name

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        out = super().submit_plan(plan)
        check_invariants(self.store, self.runs_by_name)
        return out


# -- the property -----------------------------------------------------------------------------


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_concurrent_workers_never_oversell_blocks_or_split_gangs(data: st.DataObject) -> None:
    fleet_count = data.draw(st.integers(1, 3), label="fleets")
    specs = [data.draw(fleet_specs(i), label=f"fleet {i}") for i in range(fleet_count)]
    store = StateStore()
    for spec in specs:
        nodes = simulated_nodes(spec)
        blocks: Blocks = "auto" if spec.blocks == "auto" else int(spec.blocks)
        splittable = resolve_blocks(spec.cpu_mhz // 1000, spec.gpus, blocks) is not None
        assert all((instance_of(n) is not None) == splittable for n in nodes)
        store.commit(UpsertNodes(tuple(nodes)))
    run_count = data.draw(st.integers(2, 12), label="runs")
    drawn = [data.draw(runs(i, specs), label=f"run {i}") for i in range(run_count)]
    runs_by_name = {run.name: run for run in drawn}
    pending = [register(store, run) for run in drawn]
    ids = itertools.count()
    seen: set[str] = set()

    def new_id() -> str:
        return f"id-{next(ids):06d}"

    for _ in range(MAX_ROUNDS):
        blocked = sorted(e.id for e in store.evals() if e.status is EvalStatus.BLOCKED)
        candidates = pending + [b for b in blocked if b not in pending]
        if not candidates:
            break
        order = data.draw(st.permutations(candidates), label="order")
        workers = data.draw(st.integers(2, 3), label="workers")
        chosen: list[Evaluation] = []
        for eval_id in order:
            ev = store.eval(eval_id)
            assert ev is not None
            # The broker never hands out two evaluations of one job at once.
            if len(chosen) < workers and all(c.job_id != ev.job_id for c in chosen):
                chosen.append(ev)
        snapshot = store.snapshot()  # every worker of the round starts from this one
        for ev in chosen:
            if ev.id in pending:
                pending.remove(ev.id)
            planner = CheckingPlanner(store, runs_by_name)
            scheduler = new_scheduler(ev.type, snapshot, planner, now_ns=lambda: NOW, new_id=new_id)
            scheduler.process(ev)
            check_invariants(store, runs_by_name)
            seen.update(observed(ev, planner, runs_by_name))
        done = [
            name
            for name in sorted(runs_by_name)
            if any(not a.terminal() for a in store.allocs_by_job(DEFAULT_NAMESPACE, name))
        ]
        if done:
            finished = data.draw(st.lists(st.sampled_from(done), unique=True), label="complete")
            updates = tuple(
                AllocClientUpdate(a.id, ClientStatus.COMPLETE, node_id=a.node_id)
                for name in finished
                for a in store.allocs_by_job(DEFAULT_NAMESPACE, name)
                if not a.terminal()
            )
            if updates:
                store.commit(UpdateAllocsClientStatus(updates))
                check_invariants(store, runs_by_name)
    for what in sorted(seen):
        event(what)


def observed(ev: Evaluation, planner: InProcessPlanner, runs_by_name: dict[str, Run]) -> set[str]:
    """What an evaluation exercised, for --hypothesis-show-statistics."""
    gang = runs_by_name[ev.job_id].request.gang
    out = set()
    if ev.status is EvalStatus.BLOCKED:
        out.add("blocked eval processed again")
    for result in planner.results:
        if result.rejected_nodes:
            out.add("gang plan rejected" if gang else "single-rank plan rejected")
        if result.node_allocation:
            out.add("gang committed" if gang else "single rank committed")
    if any(e.reserved_nodes for e in (*planner.created_evals, *planner.reblocked)):
        out.add("gang holds instances")
    return out
