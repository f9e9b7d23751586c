"""The leader's drainer (drainer.py) end to end: decided by the leader core on a clock the test
moves, carried out by the real scheduler. Nomad's drainer scenarios (drainer_test.go,
watch_jobs_test.go TestDrainingJobWatcher_DrainJobs): service groups move by their migrate
block's max_parallel, the next batch once the replacements are healthy, each batch with its
own node-drain eval; batch work runs until the deadline; system work goes last; the deadline
and -force move everything at once; a drain completes when nothing live is left."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from actors.leader.core.deadlines import DeadlineKind
from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.leader.core.leader import LeaderCore
from actors.state import StateReader, StateStore
from actors.worker.core.scheduler import new_scheduler
from contracts import (
    Allocation,
    ClientStatus,
    DrainStrategy,
    DriverInfo,
    Job,
    JobType,
    MigrateStrategy,
    Node,
    NodeResources,
    Plan,
    PlanResult,
    Resources,
    Task,
    TaskGroup,
    TriggeredBy,
)
from contracts.job import DEFAULT_MIGRATE
from contracts.messages import LeaderRequest, PlanSubmission, RequestKind
from contracts.state_log import AllocClientUpdate

S = 1_000_000_000


def node(node_id: str) -> Node:
    return Node(
        id=node_id,
        name=node_id,
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=10_000, memory_mb=10_000, disk_mb=10_000),
    ).with_computed_class()


def job(
    job_id: str,
    count: int = 3,
    *,
    job_type: JobType = JobType.SERVICE,
    migrate: MigrateStrategy | None = DEFAULT_MIGRATE,  # max_parallel 1, 10 s healthy
) -> Job:
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=100))
    group = TaskGroup("g", count, tasks=(task,), migrate=migrate)
    return Job(id=job_id, name=job_id, type=job_type, task_groups=(group,))


class Cluster:
    """n1 holds the work (registered before n2 exists), n2 takes what moves."""

    def __init__(self) -> None:
        self.now = 1_000 * S
        self.store = StateStore()
        ids = (f"id-{n}" for n in itertools.count())
        self.core = LeaderCore(self.store, now_ns=lambda: self.now, new_id=lambda: next(ids))
        self.alloc_ids = (f"alloc-{n}" for n in itertools.count())
        self.request(RequestKind.UPSERT_NODES, nodes=(node("n1"),))

    def request(self, kind: RequestKind, **fields: object):
        decision = self.core.handle(LeaderRequest(kind, request_id="r", **fields))
        self.commit(decision.changes)
        return decision.response

    def commit(self, changes) -> None:
        for change in changes:
            self.store.commit(change)

    def tick(self, seconds: float) -> None:
        self.now += int(seconds * S)
        self.commit(self.core.due())

    def schedule(self) -> None:
        """Run every pending eval, committing plans through the leader core (its drainer
        hears of what they place), as workers do."""
        for ev in [e for e in self.store.evals() if e.status.value == "pending"]:
            new_scheduler(
                ev.type,
                self.store.snapshot(),
                LeaderPlanner(self),
                now_ns=lambda: self.now,
                new_id=self.alloc_ids.__next__,
            ).process(ev)

    def start(self, *jobs: Job) -> None:
        for j in jobs:
            self.request(RequestKind.REGISTER_JOB, job=j)
        self.schedule()
        self.report(self.live_on("n1"), ClientStatus.RUNNING)
        self.request(RequestKind.UPSERT_NODES, nodes=(node("n2"),))
        self.tick(60)  # the work on n1 has been healthy a while

    def drain(self, deadline_s: float = 3600, **fields: object):
        strategy = DrainStrategy(deadline_s=deadline_s, **fields)  # type: ignore[arg-type]
        return self.request(RequestKind.DRAIN_NODE, node_ids=("n1",), drain=strategy)

    def live(self, job_id: str) -> list[Allocation]:
        return [a for a in self.store.allocs_by_job("default", job_id) if not a.terminal()]

    def live_on(self, node_id: str) -> list[Allocation]:
        return [a for a in self.store.allocs_by_node(node_id) if not a.terminal()]

    def marked(self, job_id: str) -> list[str]:
        return sorted(a.name for a in self.live(job_id) if a.desired_transition.migrate)

    def drain_evals(self, job_id: str) -> int:
        return sum(
            1
            for e in self.store.evals_by_job("default", job_id)
            if e.triggered_by is TriggeredBy.NODE_DRAIN
        )

    def report(self, allocs: Iterable[Allocation], status: ClientStatus) -> None:
        updates = tuple(AllocClientUpdate(a.id, status, modify_time=self.now) for a in allocs)
        if updates:
            self.request(RequestKind.CLIENT_UPDATES, updates=updates)

    def settle(self) -> None:
        """Schedule what is pending; stopped allocations finish, new ones come up (now)."""
        self.schedule()
        stopped = [
            a
            for a in self.store.allocs()
            if a.server_terminal() and a.client_status is ClientStatus.RUNNING
        ]
        self.report(stopped, ClientStatus.COMPLETE)
        self.report(
            [a for a in self.live_on("n2") if a.client_status is ClientStatus.PENDING],
            ClientStatus.RUNNING,
        )


class LeaderPlanner(InProcessPlanner):
    """Plans committed through the leader core, as the leader's loop commits them."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster.store)
        self.cluster = cluster

    def submit_plan(self, plan: Plan) -> tuple[PlanResult, StateReader | None]:
        changes, result = self.cluster.core.apply_plan(PlanSubmission(plan, reply_to=""))
        self.cluster.commit(changes)
        return result, (self.store.snapshot() if result.refresh_index else None)


def test_a_drain_moves_one_allocation_at_a_time_each_once_its_replacement_is_healthy() -> None:
    c = Cluster()
    c.start(job("web", 3, migrate=MigrateStrategy(min_healthy_time_s=10)))
    assert len(c.live_on("n1")) == 3
    response = c.drain()
    assert c.marked("web") == ["web.g[0]"] and c.drain_evals("web") == 1
    (first,) = response.eval_ids
    assert c.store.eval(first).triggered_by is TriggeredBy.NODE_DRAIN
    for batch in (1, 2):
        c.settle()
        assert len(c.live("web")) == 3 and c.marked("web") == []
        c.tick(9.9)
        assert c.marked("web") == [], "the replacement is not healthy yet"
        c.tick(0.1)
        assert c.marked("web") == [f"web.g[{batch}]"], "healthy: the next batch goes"
        assert c.drain_evals("web") == batch + 1, "each batch with its own eval"
    assert c.store.node("n1").drain
    c.settle()
    assert [a.node_id for a in c.live("web")] == ["n2"] * 3
    assert not c.store.node("n1").drain, "nothing left: the drain is complete"
    assert c.core.drainer.jobs == set()


def test_two_jobs_drain_max_parallel_at_a_time_each() -> None:
    """TestDrainingJobWatcher_DrainJobs: two jobs of 8 with max_parallel 3 move 3+3, 3+3,
    then 2+2 allocations, each batch once the previous replacements are healthy."""
    c = Cluster()
    paced = MigrateStrategy(max_parallel=3, min_healthy_time_s=5)
    c.start(job("a", 8, migrate=paced), job("b", 8, migrate=paced))
    c.drain()
    for batch in (3, 3, 2):
        assert (len(c.marked("a")), len(c.marked("b"))) == (batch, batch)
        c.settle()
        assert c.marked("a") == c.marked("b") == []
        c.tick(5)
    assert (c.drain_evals("a"), c.drain_evals("b")) == (3, 3)
    assert not c.store.node("n1").drain


def test_a_replacement_that_never_comes_up_counts_at_its_healthy_deadline() -> None:
    c = Cluster()
    c.start(job("web", 2, migrate=MigrateStrategy(min_healthy_time_s=1, healthy_deadline_s=60)))
    c.drain()
    assert c.marked("web") == ["web.g[0]"]
    c.schedule()  # the replacement is placed but never reports running
    c.tick(59)
    assert c.marked("web") == []
    c.tick(1)
    assert c.marked("web") == ["web.g[1]"], "unhealthy at its deadline: Nomad counts it too"


def test_the_deadline_forces_the_rest_off_and_force_moves_everything_at_once() -> None:
    c = Cluster()
    c.start(job("web", 3), job("etl", 1, job_type=JobType.BATCH, migrate=None))
    c.drain(deadline_s=5)
    assert c.marked("web") == ["web.g[0]"] and c.marked("etl") == []
    c.settle()
    c.tick(5)  # the replacement is not healthy yet (10 s): the deadline moves the rest
    assert c.marked("web") == ["web.g[1]", "web.g[2]"] and c.marked("etl") == ["etl.g[0]"]

    forced = Cluster()
    forced.start(job("web", 3), job("etl", 1, job_type=JobType.BATCH, migrate=None))
    forced.drain(deadline_s=-1)
    assert len(forced.marked("web")) == 3 and forced.marked("etl") == ["etl.g[0]"]
    assert forced.drain_evals("web") == 1


def test_batch_work_runs_on_and_system_work_goes_last() -> None:
    c = Cluster()
    system = job("sys", 1, job_type=JobType.SYSTEM, migrate=None)
    c.start(job("web", 1), job("etl", 1, job_type=JobType.BATCH, migrate=None), system)
    c.drain()
    assert c.marked("web") == ["web.g[0]"]
    assert c.marked("etl") == [] and c.marked("sys") == []
    c.settle()
    assert [a.node_id for a in c.live("sys")] == ["n1", "n2"], "the system job stays on n1"
    c.report(c.live("etl"), ClientStatus.COMPLETE)  # batch work finished: only system left
    assert c.marked("sys") == ["sys.g[0]"] and c.drain_evals("sys") == 1
    assert c.store.node("n1").drain
    c.settle()
    assert [a.node_id for a in c.live("sys")] == ["n2"]
    assert not c.store.node("n1").drain


def test_a_drain_ignoring_system_jobs_completes_with_them_still_running() -> None:
    c = Cluster()
    c.start(job("web", 1), job("sys", 1, job_type=JobType.SYSTEM, migrate=None))
    c.drain(ignore_system_jobs=True)
    c.settle()
    assert not c.store.node("n1").drain
    assert "n1" in [a.node_id for a in c.live("sys")] and c.marked("sys") == []


def test_a_node_with_only_system_work_moves_it_at_once() -> None:
    c = Cluster()
    c.start(job("sys", 1, job_type=JobType.SYSTEM, migrate=None))
    c.drain()
    assert c.marked("sys") == ["sys.g[0]"]


def test_a_reloaded_leader_goes_on_with_the_drain() -> None:
    c = Cluster()
    c.start(job("web", 3))
    c.drain(deadline_s=3600)
    c.settle()
    reloaded = LeaderCore(c.store, now_ns=lambda: c.now, new_id=lambda: f"x-{c.now}")
    assert reloaded.rebuild_deadlines() == 2  # the drain's deadline, the job's next health
    assert reloaded.drainer.jobs == {("default", "web")}
    times = reloaded.deadlines.times(DeadlineKind.MIGRATE)
    assert times == [c.now + 10 * S]
    c.core = reloaded
    c.tick(10)
    assert c.marked("web") == ["web.g[1]"]


def test_only_the_draining_jobs_allocations_are_read() -> None:
    """Bounded work: reports and plans of jobs that are not draining start no timer."""
    c = Cluster()
    c.start(job("web", 2))
    c.drain()
    c.schedule()
    before = c.core.deadlines.times(DeadlineKind.MIGRATE)
    c.request(RequestKind.REGISTER_JOB, job=job("other", 3))
    c.schedule()
    c.report(c.live("other"), ClientStatus.RUNNING)
    assert [a.node_id for a in c.live("other")] == ["n2"] * 3
    assert c.core.deadlines.times(DeadlineKind.MIGRATE) == before
    assert c.core.drainer.jobs == {("default", "web")}


def test_sysbatch_work_runs_on_until_the_deadline_like_batch_work() -> None:
    """Nomad's drainer marks no sysbatch allocation (sysbatch groups have no migrate block)
    and waits for it to finish, or forces it off at the deadline."""
    c = Cluster()
    c.start(job("sweep", 1, job_type=JobType.SYSBATCH, migrate=None))
    c.drain(deadline_s=30)
    assert c.marked("sweep") == [] and c.store.node("n1").drain
    c.tick(30)
    assert c.marked("sweep") == ["sweep.g[0]"]
