"""The leader's timers (deadlines.py): Nomad's drain deadline (batch work runs on until it,
then is forced off) and a run's wait limit (dstack's retry.duration for no-capacity).
Decided by the leader core on a clock the test moves, carried out by the real scheduler."""

from __future__ import annotations

import dataclasses
import itertools

from actors.agent.core import FleetSpec, simulated_nodes
from actors.api.core.runs import run_job
from actors.leader.core.deadlines import DeadlineKind, Deadlines
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
    Node,
    NodeEligibility,
    NodeResources,
    Resources,
    Task,
    TaskGroup,
)
from contracts.dstack.task import parse_task
from contracts.messages import LeaderRequest, RequestKind
from contracts.share import ENDED_NO_CAPACITY, RUN_ENDED_META
from contracts.state_log import AllocClientUpdate

S = 1_000_000_000


def node(node_id: str) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=1024, disk_mb=1000),
    ).with_computed_class()


def job(job_id: str, job_type: JobType, count: int = 1) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=100))
    group = TaskGroup("g", count, tasks=(task,))
    return Job(id=job_id, name=job_id, type=job_type, task_groups=(group,))


class Cluster:
    def __init__(self) -> None:
        self.now = 1_000 * S
        self.store = StateStore()
        ids = (f"id-{n}" for n in itertools.count())
        self.core = LeaderCore(self.store, now_ns=lambda: self.now, new_id=lambda: next(ids))
        self.alloc_ids = (f"alloc-{n}" for n in itertools.count())

    def request(self, kind: RequestKind, **fields: object):
        decision = self.core.handle(LeaderRequest(kind, request_id="r", **fields))
        self.commit(decision.changes)
        return decision.response

    def commit(self, changes) -> None:
        for change in changes:
            self.store.commit(change)

    def tick(self, seconds: float) -> None:
        """Time passes; the leader decides what came due (as its loop does)."""
        self.now += int(seconds * S)
        self.commit(self.core.due())

    def schedule_pending(self) -> None:
        ids = self.alloc_ids
        for ev in [e for e in self.store.evals() if e.status.value == "pending"]:
            new_scheduler(
                ev.type,
                self.store.snapshot(),
                InProcessPlanner(self.store),
                now_ns=lambda: self.now,
                new_id=ids.__next__,
            ).process(ev)

    def live(self, job_id: str):
        return [a for a in self.store.allocs_by_job("default", job_id) if not a.terminal()]

    def report(self, allocs, status: ClientStatus) -> None:
        self.request(
            RequestKind.CLIENT_UPDATES,
            updates=tuple(AllocClientUpdate(a.id, status) for a in allocs),
        )


def loaded_cluster() -> Cluster:
    """One node with a service allocation and a batch allocation, one spare node."""
    c = Cluster()
    c.request(RequestKind.UPSERT_NODES, nodes=(node("n1"),))
    c.request(RequestKind.REGISTER_JOB, job=job("web", JobType.SERVICE))
    c.request(RequestKind.REGISTER_JOB, job=job("etl", JobType.BATCH))
    c.schedule_pending()
    c.report(c.live("web") + c.live("etl"), ClientStatus.RUNNING)
    c.request(RequestKind.UPSERT_NODES, nodes=(node("n2"),))
    return c


def test_batch_work_runs_on_until_the_deadline_then_is_forced_off() -> None:
    c = loaded_cluster()
    c.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=DrainStrategy(deadline_s=60))
    (web,), (etl,) = c.live("web"), c.live("etl")
    assert web.desired_transition.migrate, "a service allocation migrates at once"
    assert not etl.desired_transition.migrate, "batch work is left to finish (Nomad)"
    c.schedule_pending()
    c.report([c.store.alloc(web.id)], ClientStatus.COMPLETE)
    assert c.store.node("n1").drain, "the drain waits for the batch allocation"

    c.tick(59)
    assert not c.store.alloc(etl.id).desired_transition.migrate
    c.tick(1)
    assert c.store.alloc(etl.id).desired_transition.migrate, "forced at the deadline"
    c.schedule_pending()
    (moved,) = c.live("etl")
    assert moved.node_id == "n2"
    c.report([c.store.alloc(etl.id)], ClientStatus.COMPLETE)
    n1 = c.store.node("n1")
    assert not n1.drain and n1.scheduling_eligibility is NodeEligibility.INELIGIBLE


def test_a_batch_allocation_that_finishes_first_completes_the_drain() -> None:
    c = loaded_cluster()
    c.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=DrainStrategy(deadline_s=60))
    c.schedule_pending()
    c.report(c.store.allocs_by_node("n1"), ClientStatus.COMPLETE)
    assert not c.store.node("n1").drain
    c.tick(120)
    assert c.live("etl") == [], "nothing is re-placed for finished batch work"


def test_a_forced_drain_moves_batch_work_at_once_and_no_deadline_never_forces() -> None:
    forced = loaded_cluster()
    forced.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=DrainStrategy(deadline_s=-1))
    assert all(a.desired_transition.migrate for a in forced.store.allocs_by_node("n1"))

    endless = loaded_cluster()
    endless.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=DrainStrategy(deadline_s=0))
    assert len(endless.core.deadlines) == 0
    endless.tick(10 * 3600)
    (etl,) = endless.live("etl")
    assert not etl.desired_transition.migrate


def test_a_cancelled_drain_leaves_its_deadline_nothing_to_do() -> None:
    c = loaded_cluster()
    c.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=DrainStrategy(deadline_s=60))
    c.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=None, mark_eligible=True)
    c.tick(61)
    (etl,) = c.live("etl")
    assert not etl.desired_transition.migrate and c.store.node("n1").ready()


def test_registering_again_keeps_a_drain_and_otherwise_takes_the_clients_eligibility() -> None:
    c = loaded_cluster()
    c.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=DrainStrategy(deadline_s=60))
    c.request(RequestKind.UPSERT_NODES, nodes=(node("n1"),))
    n1 = c.store.node("n1")
    assert n1.drain and n1.scheduling_eligibility is NodeEligibility.INELIGIBLE
    # An agent registers an instance it cannot split ineligible, and eligible once it can:
    # its word stands for a node that is not draining.
    unsplit = dataclasses.replace(node("n2"), scheduling_eligibility=NodeEligibility.INELIGIBLE)
    c.request(RequestKind.UPSERT_NODES, nodes=(unsplit,))
    assert c.store.node("n2").scheduling_eligibility is NodeEligibility.INELIGIBLE
    c.request(RequestKind.UPSERT_NODES, nodes=(node("n2"),))
    assert c.store.node("n2").scheduling_eligibility is NodeEligibility.ELIGIBLE


def test_deadlines_are_rebuilt_from_the_state_after_a_reload() -> None:
    c = loaded_cluster()
    c.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=DrainStrategy(deadline_s=60))
    reloaded = LeaderCore(c.store, now_ns=lambda: c.now, new_id=lambda: "x")
    assert reloaded.rebuild_deadlines() == 1
    c.core = reloaded
    c.tick(60)
    assert c.store.alloc(c.live("etl")[0].id).desired_transition.migrate


# -- runs' wait limit -----------------------------------------------------------------------------


def fleet_cluster(instances: int) -> Cluster:
    c = Cluster()
    spec = FleetSpec(
        "f",
        instances,
        cpu_mhz=2000,
        memory_mb=2048,
        blocks=2,
        placement="cluster",
        drivers=("raw_exec",),
    )
    c.request(RequestKind.UPSERT_NODES, nodes=tuple(simulated_nodes(spec)))
    return c


def run(name: str, nodes: int, retry: object = None) -> Job:
    doc: dict[str, object] = {
        "type": "task",
        "name": name,
        "nodes": nodes,
        "resources": {"cpu": "1..", "memory": "1GB..", "gpu": 0, "disk": "1GB.."},
        "commands": ["true"],
    }
    if retry is not None:
        doc["retry"] = retry
    return run_job(parse_task(doc), wait_limit_s=_limit(retry))


def _limit(retry: object) -> float | None:
    if isinstance(retry, dict):
        return float(retry["duration"].rstrip("s"))
    return None


def test_a_run_that_waits_past_its_limit_fails_for_want_of_capacity() -> None:
    c = fleet_cluster(2)
    c.request(RequestKind.REGISTER_JOB, job=run("big", nodes=3, retry={"duration": "600s"}))
    c.schedule_pending()
    assert c.live("big") == [] and any(e.status.value == "blocked" for e in c.store.evals())
    c.tick(599)
    assert not c.store.job("default", "big").stop
    c.tick(1)
    ended = c.store.job("default", "big")
    assert ended.stop and ended.meta[RUN_ENDED_META] == ENDED_NO_CAPACITY


def test_a_run_that_started_within_its_limit_is_left_alone() -> None:
    c = fleet_cluster(2)
    c.request(RequestKind.REGISTER_JOB, job=run("fits", nodes=2, retry={"duration": "60s"}))
    c.schedule_pending()
    assert len(c.live("fits")) == 2
    c.tick(61)
    assert not c.store.job("default", "fits").stop


def test_a_run_without_a_limit_waits_for_good() -> None:
    c = fleet_cluster(1)
    c.request(RequestKind.REGISTER_JOB, job=run("patient", nodes=2))
    c.schedule_pending()
    assert len(c.core.deadlines) == 0
    c.tick(30 * 24 * 3600)
    assert not c.store.job("default", "patient").stop


def test_a_forced_drain_ends_the_runs_on_the_node() -> None:
    c = fleet_cluster(2)
    c.request(RequestKind.REGISTER_JOB, job=run("gang", nodes=2))
    c.schedule_pending()
    ranks = c.live("gang")
    c.report(ranks, ClientStatus.RUNNING)
    c.request(
        RequestKind.DRAIN_NODE, node_ids=(ranks[0].node_id,), drain=DrainStrategy(deadline_s=30)
    )
    assert not c.store.job("default", "gang").stop, "a rank is batch work: it runs on"
    assert not any(a.desired_transition.migrate for a in c.live("gang"))
    c.tick(30)
    assert c.store.job("default", "gang").stop, "a rank cannot move alone: the run ends"


def test_deadlines_pop_in_order_and_ignore_repeats() -> None:
    d = Deadlines()
    d.add(30, DeadlineKind.DRAIN, ("b", 1))
    d.add(10, DeadlineKind.DRAIN, ("a", 1))
    d.add(10, DeadlineKind.DRAIN, ("a", 1))
    d.add(20, DeadlineKind.RUN_WAIT, ("default", "r", 5))
    assert len(d) == 3 and d.next_at() == 10
    assert [x.key for x in d.pop_due(20)] == [("a", 1), ("default", "r", 5)]
    assert d.pop_due(29) == [] and d.next_at() == 30
    assert [x.key for x in d.pop_due(10**12, limit=1)] == [("b", 1)]


def test_a_cancelled_drain_does_not_end_the_runs_on_the_node() -> None:
    c = fleet_cluster(2)
    c.request(RequestKind.REGISTER_JOB, job=run("gang", nodes=2))
    c.schedule_pending()
    ranks = c.live("gang")
    c.report(ranks, ClientStatus.RUNNING)
    node_id = ranks[0].node_id
    c.request(RequestKind.DRAIN_NODE, node_ids=(node_id,), drain=DrainStrategy(deadline_s=30))
    c.request(RequestKind.DRAIN_NODE, node_ids=(node_id,), drain=None, mark_eligible=True)
    c.tick(31)
    assert not c.store.job("default", "gang").stop


def test_a_run_ends_once_when_the_drains_of_all_its_nodes_come_due_together() -> None:
    c = fleet_cluster(2)
    c.request(RequestKind.REGISTER_JOB, job=run("gang", nodes=2))
    c.schedule_pending()
    ranks = c.live("gang")
    c.report(ranks, ClientStatus.RUNNING)
    for rank in ranks:
        drain = DrainStrategy(deadline_s=30)
        c.request(RequestKind.DRAIN_NODE, node_ids=(rank.node_id,), drain=drain)
    versions_before = len(c.store.job_versions("default", "gang"))
    c.tick(30)
    assert c.store.job("default", "gang").stop
    assert len(c.store.job_versions("default", "gang")) == versions_before + 1


def test_a_drain_deadline_that_cannot_be_reached_is_no_deadline() -> None:
    assert DrainStrategy(deadline_s=float("inf")).deadline_ns() is None
    assert DrainStrategy(deadline_s=float("nan")).deadline_ns() is None
