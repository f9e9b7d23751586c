"""Operator writes: node drain and eligibility, alloc stop, job evaluate — decided by the
leader core, then carried out by the real scheduler (migrations land on other nodes)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.leader.core.leader import LeaderCore
from actors.state import StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import (
    ClientStatus,
    DrainStrategy,
    DriverInfo,
    Job,
    JobType,
    MigrateStrategy,
    Node,
    NodeEligibility,
    NodeResources,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.messages import LeaderRequest, RequestKind
from contracts.state_log import AllocClientUpdate


def node(node_id: str) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=1024, disk_mb=1000),
    ).with_computed_class()


def job(job_id: str = "web", count: int = 2, job_type: JobType = JobType.SERVICE) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=100))
    return Job(
        id=job_id,
        name=job_id,
        type=job_type,
        task_groups=(TaskGroup("g", count, tasks=(task,)),),
    )


class Cluster:
    """A leader core over a store, plus the scheduler to run the evals it creates."""

    def __init__(self) -> None:
        self.store = StateStore()
        ids = (f"id-{n}" for n in itertools.count())
        self.core = LeaderCore(self.store, now_ns=lambda: 1_000, new_id=lambda: next(ids))

    def request(self, kind: RequestKind, **fields: object):
        decision = self.core.handle(LeaderRequest(kind, request_id="r", **fields))
        for change in decision.changes:
            self.store.commit(change)
        return decision.response

    def schedule(self, eval_id: str) -> None:
        evaluation = self.store.eval(eval_id)
        assert evaluation is not None
        ids = (f"{eval_id}-alloc-{n}" for n in itertools.count())
        new_scheduler(
            evaluation.type,
            self.store.snapshot(),
            InProcessPlanner(self.store),
            now_ns=lambda: 2_000,
            new_id=lambda: next(ids),
        ).process(evaluation)

    def live(self, job_id: str = "web"):
        return [a for a in self.store.allocs_by_job("default", job_id) if not a.terminal()]

    def report(self, alloc_ids, status: ClientStatus):
        return self.request(
            RequestKind.CLIENT_UPDATES,
            updates=tuple(AllocClientUpdate(a, status) for a in alloc_ids),
        )


@pytest.fixture
def cluster() -> Cluster:
    c = Cluster()
    c.request(RequestKind.UPSERT_NODES, nodes=(node("n1"), node("n2")))
    response = c.request(RequestKind.REGISTER_JOB, job=job(count=2))
    c.schedule(response.eval_id)
    return c


def test_drain_migrates_every_allocation_off_the_node_then_completes(cluster: Cluster) -> None:
    # A migrate block that lets the whole group go at once once healthy (drainer tests pace).
    migrate = MigrateStrategy(max_parallel=2, min_healthy_time_s=0)
    (group,) = job().task_groups
    paced = job().replace(task_groups=(dataclasses.replace(group, migrate=migrate),))
    cluster.schedule(cluster.request(RequestKind.REGISTER_JOB, job=paced).eval_id)
    cluster.report([a.id for a in cluster.live()], ClientStatus.RUNNING)
    drained_id = cluster.live()[0].node_id
    on_n1 = [a.id for a in cluster.live() if a.node_id == drained_id]
    response = cluster.request(
        RequestKind.DRAIN_NODE, node_ids=(drained_id,), drain=DrainStrategy(deadline_s=60)
    )
    assert response.ok and len(response.eval_ids) == 1
    n1 = cluster.store.node(drained_id)
    assert n1.drain and n1.scheduling_eligibility is NodeEligibility.INELIGIBLE
    assert cluster.store.eval(response.eval_ids[0]).triggered_by is TriggeredBy.NODE_DRAIN
    assert all(cluster.store.alloc(a).desired_transition.migrate for a in on_n1)

    cluster.schedule(response.eval_ids[0])
    live = cluster.live()
    assert len(live) == 2 and all(a.node_id != drained_id for a in live)
    # The stopped allocations finish on the client: the drain is complete, the node stays
    # ineligible (as in Nomad).
    cluster.report(on_n1, ClientStatus.COMPLETE)
    n1 = cluster.store.node(drained_id)
    assert not n1.drain and n1.scheduling_eligibility is NodeEligibility.INELIGIBLE


def test_drain_of_an_empty_node_completes_at_once_and_disable_restores_eligibility(
    cluster: Cluster,
) -> None:
    cluster.request(RequestKind.UPSERT_NODES, nodes=(node("n3"),))
    empty = "n3"
    response = cluster.request(RequestKind.DRAIN_NODE, node_ids=(empty,), drain=DrainStrategy())
    assert response.ok and response.eval_ids == ()
    assert not cluster.store.node(empty).drain
    assert cluster.store.node(empty).scheduling_eligibility is NodeEligibility.INELIGIBLE
    cluster.request(RequestKind.DRAIN_NODE, node_ids=(empty,), drain=None, mark_eligible=True)
    assert cluster.store.node(empty).ready()


def test_eligibility_toggles_and_is_refused_while_draining(cluster: Cluster) -> None:
    assert cluster.request(RequestKind.NODE_ELIGIBILITY, node_ids=("n2",), eligible=False).ok
    assert cluster.store.node("n2").scheduling_eligibility is NodeEligibility.INELIGIBLE
    system = job("sys", count=1, job_type=JobType.SYSTEM)
    cluster.request(RequestKind.REGISTER_JOB, job=system)
    back = cluster.request(RequestKind.NODE_ELIGIBILITY, node_ids=("n2",), eligible=True)
    assert back.ok and back.eval_ids, "an eligible node re-evaluates the system jobs"
    loaded = next(n for n in ("n1", "n2") if cluster.store.allocs_by_node(n))
    cluster.request(RequestKind.DRAIN_NODE, node_ids=(loaded,), drain=DrainStrategy())
    refused = cluster.request(RequestKind.NODE_ELIGIBILITY, node_ids=(loaded,), eligible=True)
    assert not refused.ok and "draining" in refused.error


def test_alloc_stop_replaces_the_allocation(cluster: Cluster) -> None:
    victim = cluster.live()[0]
    response = cluster.request(RequestKind.STOP_ALLOC, alloc_id=victim.id)
    assert response.ok
    assert cluster.store.eval(response.eval_id).triggered_by is TriggeredBy.ALLOC_STOP
    cluster.schedule(response.eval_id)
    live = cluster.live()
    assert len(live) == 2 and victim.id not in {a.id for a in live}
    assert cluster.store.alloc(victim.id).server_terminal()


def test_unknown_ids_are_refused_with_the_id(cluster: Cluster) -> None:
    for kind, fields in (
        (RequestKind.STOP_ALLOC, {"alloc_id": "ghost"}),
        (RequestKind.DRAIN_NODE, {"node_ids": ("ghost",), "drain": DrainStrategy()}),
        (RequestKind.NODE_ELIGIBILITY, {"node_ids": ("ghost",)}),
        (RequestKind.EVALUATE_JOB, {"job_id": "ghost"}),
    ):
        response = cluster.request(kind, **fields)
        assert not response.ok and '"ghost" not found' in response.error


def test_evaluate_and_set_stable(cluster: Cluster) -> None:
    evaluated = cluster.request(RequestKind.EVALUATE_JOB, job_id="web")
    assert evaluated.ok
    assert cluster.store.eval(evaluated.eval_id).triggered_by is TriggeredBy.JOB_REGISTER
    assert cluster.request(RequestKind.SET_STABLE, job_id="web", version=0, stable=True).ok
    assert cluster.store.job_version("default", "web", 0).stable
