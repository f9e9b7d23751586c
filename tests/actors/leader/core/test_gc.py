"""Forced garbage collection (Nomad's /v1/system/gc) and Node.Evaluate, decided by the leader
core over a real store, with the real scheduler placing what the evals ask for."""

from __future__ import annotations

import itertools

import pytest

from actors.leader.core import gc
from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.leader.core.leader import LeaderCore
from actors.state import StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import (
    ClientStatus,
    DriverInfo,
    EvalStatus,
    Job,
    JobType,
    Node,
    NodeResources,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind
from contracts.state_log import AllocClientUpdate, DeleteEvals, PurgeJob


def node(node_id: str) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=1024, disk_mb=1000),
    ).with_computed_class()


def job(job_id: str, count: int = 2, job_type: JobType = JobType.SERVICE, cpu: int = 100) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=cpu, memory_mb=100))
    return Job(
        id=job_id, name=job_id, type=job_type, task_groups=(TaskGroup("g", count, tasks=(task,)),)
    )


class Cluster:
    def __init__(self) -> None:
        self.store = StateStore()
        ids = (f"id-{n}" for n in itertools.count())
        self.core = LeaderCore(self.store, now_ns=lambda: 1_000, new_id=lambda: next(ids))
        self.request(RequestKind.UPSERT_NODES, nodes=(node("n1"), node("n2")))

    def request(self, kind: RequestKind, **fields: object) -> LeaderResponse:
        decision = self.core.handle(LeaderRequest(kind, request_id="r", **fields))  # type: ignore[arg-type]
        for change in decision.changes:
            self.store.commit(change)
        assert decision.response is not None
        return decision.response

    def schedule_pending(self) -> None:
        for ev in list(self.store.evals()):
            if ev.status is EvalStatus.PENDING:
                ids = (f"{ev.id}-alloc-{n}" for n in itertools.count())
                new_scheduler(
                    ev.type,
                    self.store.snapshot(),
                    InProcessPlanner(self.store),
                    now_ns=lambda: 2_000,
                    new_id=ids.__next__,
                ).process(ev)

    def run(self, spec: Job) -> None:
        assert self.request(RequestKind.REGISTER_JOB, job=spec).ok
        self.schedule_pending()

    def allocs(self, job_id: str):
        return self.store.allocs_by_job("default", job_id)

    def report(self, job_id: str, status: ClientStatus, *, live_only: bool = True) -> None:
        ids = [a.id for a in self.allocs(job_id) if not (live_only and a.client_terminal())]
        updates = tuple(AllocClientUpdate(a, status) for a in ids)
        self.request(RequestKind.CLIENT_UPDATES, updates=updates)

    def gc(self) -> None:
        assert self.request(RequestKind.SYSTEM_GC).ok


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


def test_a_stopped_job_whose_allocations_finished_goes_with_everything_it_left(
    cluster: Cluster,
) -> None:
    cluster.run(job("web"))
    cluster.report("web", ClientStatus.RUNNING)
    cluster.request(RequestKind.STOP_JOB, job_id="web")
    cluster.schedule_pending()
    cluster.gc()  # stopped, but the client has not finished them: all stays
    assert cluster.store.job("default", "web") is not None and len(cluster.allocs("web")) == 2
    cluster.report("web", ClientStatus.COMPLETE)
    cluster.gc()
    assert cluster.store.job("default", "web") is None
    assert cluster.allocs("web") == [] and cluster.store.evals_by_job("default", "web") == []
    assert cluster.store.job_versions("default", "web") == []


def test_a_live_service_job_loses_only_finished_allocations_and_their_evals(
    cluster: Cluster,
) -> None:
    cluster.run(job("web"))
    cluster.report("web", ClientStatus.RUNNING)
    first_eval = cluster.allocs("web")[0].eval_id
    cluster.run(job("web", cpu=200))  # a new version replaces both
    old = [a.id for a in cluster.allocs("web") if a.server_terminal()]
    assert len(old) == 2
    cluster.report("web", ClientStatus.RUNNING)
    cluster.request(
        RequestKind.CLIENT_UPDATES,
        updates=tuple(AllocClientUpdate(a, ClientStatus.COMPLETE) for a in old),
    )
    cluster.gc()
    left = cluster.allocs("web")
    assert {a.id for a in left}.isdisjoint(old) and len(left) == 2
    assert all(a.client_status is ClientStatus.RUNNING for a in left)
    assert cluster.store.eval(first_eval) is None  # all it placed is gone
    assert {a.eval_id for a in left} <= {e.id for e in cluster.store.evals_by_job("default", "web")}
    assert cluster.store.job("default", "web") is not None


def test_a_failed_allocation_stays_until_replaced_and_running_ones_always_stay(
    cluster: Cluster,
) -> None:
    cluster.run(job("web", count=1))
    (alloc,) = cluster.allocs("web")
    cluster.request(
        RequestKind.CLIENT_UPDATES, updates=(AllocClientUpdate(alloc.id, ClientStatus.FAILED),)
    )
    cluster.gc()  # may still be rescheduled: kept
    assert cluster.store.alloc(alloc.id) is not None
    cluster.schedule_pending()  # the alloc-failure eval places its replacement
    assert cluster.store.alloc(alloc.id).next_allocation
    cluster.gc()
    assert cluster.store.alloc(alloc.id) is None
    assert len(cluster.allocs("web")) == 1


def test_a_live_batch_job_keeps_its_finished_work_until_it_is_dead(cluster: Cluster) -> None:
    cluster.run(job("sweep", count=2, job_type=JobType.BATCH))
    cluster.run(job("sweep", count=3, job_type=JobType.BATCH, cpu=150))
    cluster.report("sweep", ClientStatus.RUNNING)
    current = max(a.job_version for a in cluster.allocs("sweep"))
    for a in cluster.allocs("sweep"):
        if a.job_version == current:
            cluster.request(
                RequestKind.CLIENT_UPDATES,
                updates=(AllocClientUpdate(a.id, ClientStatus.COMPLETE),),
            )
    cluster.gc()
    # The finished allocations of the current version stay (else the scheduler would run
    # them again), and the job stays while the older ones still run on their clients.
    assert sum(1 for a in cluster.allocs("sweep") if a.job_version == current) == 3
    cluster.report("sweep", ClientStatus.COMPLETE)
    sweep = cluster.store.job("default", "sweep")
    assert sweep is not None and sweep.status == "dead"
    cluster.gc()
    assert cluster.store.job("default", "sweep") is None and cluster.allocs("sweep") == []


def test_large_collections_commit_in_bounded_entries(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gc, "BATCH", 3)
    for n in range(3):
        cluster.run(job(f"j{n}", count=2))
        cluster.report(f"j{n}", ClientStatus.COMPLETE)
        cluster.request(RequestKind.STOP_JOB, job_id=f"j{n}")
    cluster.schedule_pending()
    changes = gc.collect_garbage(cluster.store.snapshot())
    deletes = [c for c in changes if isinstance(c, DeleteEvals)]
    assert len([c for c in changes if isinstance(c, PurgeJob)]) == 3
    assert len(deletes) >= 2 and all(
        len(d.alloc_ids) <= 3 and len(d.eval_ids) <= 3 for d in deletes
    )
    assert sum(len(d.alloc_ids) for d in deletes) == 6
    cluster.gc()
    assert list(cluster.store.jobs()) == [] and list(cluster.store.allocs()) == []


def test_node_evaluate_creates_node_update_evals_for_its_jobs_and_system_jobs(
    cluster: Cluster,
) -> None:
    cluster.run(job("web", count=1))
    cluster.run(job("agent", count=1, job_type=JobType.SYSTEM))
    on = cluster.allocs("web")[0].node_id
    response = cluster.request(RequestKind.NODE_EVALUATE, node_ids=(on,))
    evals = [cluster.store.eval(e) for e in response.eval_ids]
    assert sorted(e.job_id for e in evals) == ["agent", "web"]
    assert all(e.triggered_by is TriggeredBy.NODE_UPDATE and e.node_id == on for e in evals)
    other = "n2" if on == "n1" else "n1"
    assert [
        cluster.store.eval(e).job_id
        for e in cluster.request(RequestKind.NODE_EVALUATE, node_ids=(other,)).eval_ids
    ] == ["agent"]
    missing = cluster.request(RequestKind.NODE_EVALUATE, node_ids=("ghost",))
    assert not missing.ok and missing.error_kind == "not-found"
