"""`drover demo`: the scheduling core on a simulated fleet, in one process.

Several scheduler workers take evaluations in rounds; in a round every worker schedules
against the same snapshot (as optimistic workers with their own view of state do), then the
leader applies their plans one after another against the latest state. Plans that claimed
capacity another plan already took are partially rejected and the worker retries from a
refreshed state: the collisions are real, not simulated. Then the job lifecycle: a scale-up,
a re-run with and without -preserve-counts, and the stop -> revert sequence of Nomad #24957.

The runtime (Ray actors over Redis streams) builds on exactly these pieces.
"""

from __future__ import annotations

import itertools
import time
import uuid
from pathlib import Path

from actors.leader.core import JobWrite, register_job, revert_job, scale_job, stop_job
from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.state import StateReader, StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import (
    ClientStatus,
    DeviceInstance,
    DriverInfo,
    EvalStatus,
    Evaluation,
    Job,
    Node,
    NodeDeviceResource,
    NodeResources,
    Plan,
    PlanResult,
)
from contracts.jobspec import parse_job_file
from contracts.state_log import AllocClientUpdate, UpdateAllocsClientStatus, UpsertNodes

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


class _CountingPlanner(InProcessPlanner):
    """Records, per evaluation, how many plans it took and which nodes were rejected."""

    def __init__(self, store: StateStore) -> None:
        super().__init__(store)
        self.attempts: dict[str, int] = {}
        self.rejections: dict[str, list[str]] = {}

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        result, refreshed = super().submit_plan(plan)
        self.attempts[plan.eval_id] = self.attempts.get(plan.eval_id, 0) + 1
        reasons = self.rejections.setdefault(plan.eval_id, [])
        reasons += [f"{r.node_id}: {r.reason}" for r in result.rejected_nodes]
        return result, refreshed


def simulated_fleet(count: int) -> list[Node]:
    nodes = []
    for i in range(count):
        gpu = i % 10 in (4, 9)  # GPU nodes in both datacenters
        devices = (
            (
                NodeDeviceResource(
                    vendor="nvidia",
                    type="gpu",
                    name="A100",
                    instances=tuple(DeviceInstance(f"gpu-{i}-{k}") for k in range(4)),
                    attributes={"memory": "80 GiB"},
                ),
            )
            if gpu
            else ()
        )
        nodes.append(
            Node(
                id=f"node-{i:03d}",
                name=f"node-{i:03d}",
                datacenter=f"dc{1 + i % 2}",
                node_class="gpu" if gpu else "std",
                attributes={"kernel.name": "linux", "cpu.arch": "amd64", "rack": f"r{i % 4}"},
                drivers={"mock": DriverInfo(), "raw_exec": DriverInfo()},
                node_resources=(
                    NodeResources(cpu=8000, memory_mb=32768, disk_mb=100_000, devices=devices)
                    if gpu
                    else NodeResources(cpu=2000, memory_mb=4096, disk_mb=20_000)
                ),
            ).with_computed_class()
        )
    return nodes


class Demo:
    def __init__(self, nodes: int, workers: int, seed: int) -> None:
        self.store = StateStore()
        self.planner = _CountingPlanner(self.store)
        self.workers = workers
        self.ids = (str(uuid.UUID(int=(seed << 64) + n)) for n in itertools.count(1))
        self.clock = itertools.count(time.time_ns(), 1_000_000_000)
        self.store.commit(UpsertNodes(tuple(simulated_fleet(nodes))))

    def new_id(self) -> str:
        return next(self.ids)

    def now(self) -> int:
        return next(self.clock)

    def commit(self, write: JobWrite) -> Evaluation | None:
        if write.change is not None:
            self.store.commit(write.change)
        for warning in write.warnings:
            print(f"  warning: {warning}")
        return write.eval

    def run(self, job: Job, preserve_counts: bool = False) -> JobWrite:
        return register_job(
            self.store, job, now_ns=self.now(), new_id=self.new_id, preserve_counts=preserve_counts
        )

    def scale(self, job_id: str, group: str, count: int, message: str) -> JobWrite:
        return scale_job(
            self.store,
            "default",
            job_id,
            group,
            count,
            message=message,
            now_ns=self.now(),
            new_id=self.new_id,
        )

    def schedule_pending(self) -> None:
        """Run pending evaluations in rounds of `workers`, each round on one shared snapshot."""
        round_no = 0
        while True:
            pending = sorted(
                (e for e in self.store.evals() if e.status is EvalStatus.PENDING),
                key=lambda e: (-e.priority, e.create_index),
            )
            if not pending:
                return
            round_no += 1
            snapshot = self.store.snapshot()
            batch = pending[: self.workers]
            print(
                f"  round {round_no}: {len(batch)} worker(s) schedule "
                f"on snapshot @{snapshot.latest_index()}"
            )
            for evaluation in batch:
                self.planner.attempts.pop(evaluation.id, None)
                self.planner.rejections.pop(evaluation.id, None)
                scheduler = new_scheduler(
                    evaluation.type, snapshot, self.planner, now_ns=self.now, new_id=self.new_id
                )
                scheduler.process(evaluation)
                self._report(evaluation)

    def _report(self, evaluation: Evaluation) -> None:
        final = self.store.eval(evaluation.id)
        assert final is not None
        placed = sum(1 for a in self.store.allocs() if a.eval_id == evaluation.id)
        attempts = self.planner.attempts.get(evaluation.id, 0)
        rejected = self.planner.rejections.get(evaluation.id, [])
        line = (
            f"    {evaluation.job_id:<15} {evaluation.triggered_by:<14} plans={attempts} "
            f"allocs={placed:<3} status={final.status}"
        )
        if rejected:
            line += f"  conflicts={len(rejected)} (e.g. {rejected[0]}) -> refreshed and retried"
        if final.blocked_eval:
            line += f"  blocked: {'; '.join(self._reasons(final))}"
        print(line)

    def _reasons(self, evaluation: Evaluation) -> list[str]:
        return [
            f"{group}: {', '.join(metric.reasons()[:2]) or 'no capacity'}"
            for group, metric in evaluation.failed_tg_allocs.items()
        ]

    def settle(self, job_id: str) -> None:
        """Play the client agents: pending allocations start; stopped ones complete."""
        updates = []
        for alloc in self.store.allocs_by_job("default", job_id):
            if alloc.server_terminal() and not alloc.client_terminal():
                updates.append(
                    AllocClientUpdate(alloc.id, ClientStatus.COMPLETE, "stopped", self.now())
                )
            elif alloc.client_status is ClientStatus.PENDING:
                updates.append(
                    AllocClientUpdate(alloc.id, ClientStatus.RUNNING, "started", self.now())
                )
        if updates:
            self.store.commit(UpdateAllocsClientStatus(tuple(updates)))

    def counts(self, job_id: str) -> str:
        job = self.store.job("default", job_id)
        assert job is not None
        return ", ".join(f"{tg.name}={tg.count}" for tg in job.task_groups)

    def versions(self, job_id: str) -> str:
        return ", ".join(
            f"v{v.version} {v.status}" for v in self.store.job_versions("default", job_id)
        )


def run_demo(nodes: int = 40, workers: int = 4, seed: int = 1) -> int:
    demo = Demo(nodes, workers, seed)
    print(f"drover demo: {nodes} simulated nodes, {workers} scheduler workers\n")

    print("1. Register the example jobs (plus copies of web to crowd the fleet)")
    jobs = [parse_job_file(p) for p in sorted(EXAMPLES.glob("*.nomad"))]
    web = next(j for j in jobs if j.id == "web")
    for n in range(1, 4):
        jobs.append(web.replace(id=f"web-{n}", name=f"web-{n}"))
    for job in jobs:
        demo.commit(demo.run(job))
    demo.schedule_pending()
    for job in jobs:
        demo.settle(job.id)
    print()
    _print_status(demo, [j.id for j in jobs])

    print(
        "\n2. The autoscaler scales web's first group up; a plain `job run` resets it; "
        "-preserve-counts keeps it"
    )
    group = web.task_groups[0]
    target = group.scaling.max if group.scaling else group.count + 2
    changed = web.replace(meta={**web.meta, "release": "2"})
    _step(
        demo,
        demo.scale("web", group.name, target, "autoscaler: cpu high"),
        f"scale {group.name} to {target}",
    )
    _step(demo, demo.run(changed), "job run (changed file)")
    _step(
        demo,
        demo.scale("web", group.name, target, "autoscaler again"),
        f"scale {group.name} to {target}",
    )
    again = changed.replace(meta={**web.meta, "release": "3"})
    _step(demo, demo.run(again, preserve_counts=True), "job run -preserve-counts")

    print("\n3. Stop and revert (Nomad #24957: v1 must read dead, the revert running)")
    batch_id = next(j.id for j in jobs if j.type == "batch")
    _step(
        demo,
        stop_job(demo.store, "default", "web-1", now_ns=demo.now(), new_id=demo.new_id),
        "stop web-1",
        "web-1",
    )
    current = demo.store.job("default", "web-1")
    assert current is not None
    _step(
        demo,
        revert_job(demo.store, "default", "web-1", 0, now_ns=demo.now(), new_id=demo.new_id),
        "revert web-1 to v0",
        "web-1",
    )
    print(f"  web-1 versions: {demo.versions('web-1')}")
    print()
    _print_status(demo, [j.id for j in jobs if j.id != batch_id] + [batch_id])
    conflicts = sum(len(r.rejected_nodes) for r in demo.planner.results)
    partial = sum(1 for r in demo.planner.results if r.rejected_nodes)
    print(
        f"\n{len(demo.planner.plans)} plans applied, {partial} partially rejected "
        f"({conflicts} node conflicts), "
        f"{sum(1 for a in demo.store.allocs() if not a.terminal())} allocations running."
    )
    return 0


def _step(demo: Demo, write: JobWrite, label: str, job_id: str = "web") -> None:
    demo.commit(write)
    demo.schedule_pending()
    demo.settle(job_id)
    print(f"  after {label}: {demo.counts(job_id)}")


def _print_status(demo: Demo, job_ids: list[str]) -> None:
    print(f"  {'Job':<15} {'Type':<8} {'Status':<8} {'Allocs':<7} Versions")
    for job_id in job_ids:
        job = demo.store.job("default", job_id)
        if job is None:
            continue
        running = sum(1 for a in demo.store.allocs_by_job("default", job_id) if not a.terminal())
        print(f"  {job_id:<15} {job.type:<8} {job.status:<8} {running:<7} {demo.versions(job_id)}")
