"""JobScopedStore: the same log as the eager store, allocation records settled per job.

Every test feeds one log, encoded and decoded as on the wire, to a leader store, an eager
replica and a job-scoped replica, and checks that what the job-scoped replica answers (node
usage and job status at once, a job's allocations once settled, everything after
settle_all) equals the eager replica's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.state import StateStore
from actors.state.job_scoped import JobScopedStore, UnsettledRead
from actors.worker.core.scheduler import new_scheduler
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
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
from contracts.state_log import (
    AllocClientUpdate,
    DeleteEvals,
    LogEntry,
    StateChange,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertJob,
    UpsertNodes,
    decode_entry,
    encode_entry,
)

JOBS = ("web", "api", "db")
NODES = ("n1", "n2", "n3")


class Cluster:
    """A leader store that stamps and commits, and the two replicas that follow it."""

    def __init__(self) -> None:
        self.leader = StateStore(shards=2, alloc_shards=4)
        self.eager = StateStore(shards=2, alloc_shards=4)
        self.scoped = JobScopedStore(shards=2, alloc_shards=4)

    def commit(self, change: StateChange) -> int:
        index = self.leader.latest_index() + 1
        entry = decode_entry(encode_entry(LogEntry(index, 1, self.leader.stamped(change, index))))
        for store in (self.leader, self.eager, self.scoped):
            store.apply(entry)
        return index


def make_alloc(alloc_id: str, job_id: str, node_id: str, cpu: int = 100, **kw: Any) -> Allocation:
    return Allocation(
        id=alloc_id,
        node_id=node_id,
        job_id=job_id,
        task_group="g",
        name=f"{job_id}.g[0]",
        allocated_resources=AllocatedResources(cpu=cpu, memory_mb=cpu, disk_mb=10),
        **kw,
    )


def assert_same_everywhere(eager: StateStore, scoped: JobScopedStore) -> None:
    """Cluster-wide answers that must hold without settling anything."""
    assert scoped.latest_index() == eager.latest_index()
    for node in NODES:
        assert scoped.node_usage(node) == eager.node_usage(node)
    for job in JOBS:
        assert scoped.job("default", job) == eager.job("default", job)
    assert scoped.table_index("allocs") == eager.table_index("allocs")


def assert_settled_equal(eager: StateStore, scoped: JobScopedStore) -> None:
    scoped.settle_all()
    assert scoped.queued_jobs() == 0
    assert sorted(scoped.allocs(), key=lambda a: a.id) == sorted(eager.allocs(), key=lambda a: a.id)
    for job in JOBS:
        assert scoped.allocs_by_job("default", job) == eager.allocs_by_job("default", job)
    for node in NODES:
        assert sorted(a.id for a in scoped.allocs_by_node(node)) == sorted(
            a.id for a in eager.allocs_by_node(node)
        )
    assert_same_everywhere(eager, scoped)


ALLOC_IDS = st.sampled_from([f"a{i}" for i in range(10)])
upsert_op = st.tuples(
    st.just("upsert"),
    ALLOC_IDS,
    st.sampled_from(JOBS),
    st.sampled_from(NODES),
    st.integers(1, 500),
    st.sampled_from(list(DesiredStatus)),
    st.sampled_from([ClientStatus.PENDING, ClientStatus.LOST]),
)
client_op = st.tuples(st.just("client"), ALLOC_IDS, st.sampled_from(list(ClientStatus)))
delete_op = st.tuples(st.just("delete"), ALLOC_IDS)
read_op = st.tuples(st.just("read"), st.sampled_from(JOBS))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(upsert_op, client_op, delete_op, read_op), max_size=40))
def test_job_scoped_replica_answers_as_the_eager_one(ops: list[tuple[Any, ...]]) -> None:
    c = Cluster()
    for job in JOBS:
        c.commit(UpsertJob(Job(id=job, name=job)))
    for op in ops:
        if op[0] == "upsert":
            _, aid, job, node, cpu, desired, client = op
            owner = c.leader.alloc(aid)
            job = owner.job_id if owner is not None else job  # an allocation keeps its job
            alloc = make_alloc(aid, job, node, cpu, desired_status=desired, client_status=client)
            c.commit(UpsertAllocs((alloc,)))
        elif op[0] == "client":
            c.commit(UpdateAllocsClientStatus((AllocClientUpdate(op[1], op[2], "", 5),)))
        elif op[0] == "delete":
            c.commit(DeleteEvals((), alloc_ids=(op[1],)))
        else:
            snap = c.scoped.snapshot_for_job("default", op[1])
            assert snap.allocs_by_job("default", op[1]) == c.eager.allocs_by_job("default", op[1])
        assert_same_everywhere(c.eager, c.scoped)
    assert_settled_equal(c.eager, c.scoped)


def test_running_reports_and_new_allocations_wait_for_their_job() -> None:
    c = Cluster()
    c.commit(UpsertJob(Job(id="web", name="web")))
    placed = tuple(make_alloc(f"a{i}", "web", NODES[i % 3]) for i in range(6))
    c.commit(UpsertAllocs(placed))
    c.commit(
        UpdateAllocsClientStatus(
            tuple(AllocClientUpdate(a.id, ClientStatus.RUNNING, "", 9, a.node_id) for a in placed)
        )
    )
    assert c.scoped.queued_jobs() == 1  # nothing filed yet, usage already counted
    assert_same_everywhere(c.eager, c.scoped)
    allocs = c.scoped.snapshot_for_job("default", "web").allocs_by_job("default", "web")
    assert [a.client_status for a in allocs] == [ClientStatus.RUNNING] * 6
    assert allocs == c.eager.allocs_by_job("default", "web")  # same records, same indexes
    assert c.scoped.queued_jobs() == 0

    # A terminal report settles the job first, then leaves the live set at once.
    c.commit(UpsertAllocs((make_alloc("b0", "web", "n1"),)))
    c.commit(UpdateAllocsClientStatus((AllocClientUpdate("b0", ClientStatus.FAILED, "", 10),)))
    assert c.scoped.queued_jobs() == 0
    assert_settled_equal(c.eager, c.scoped)


def test_a_job_scoped_snapshot_refuses_other_allocation_reads() -> None:
    c = Cluster()
    c.commit(UpsertAllocs((make_alloc("a1", "web", "n1"), make_alloc("a2", "api", "n2"))))
    snap = c.scoped.snapshot_for_job("default", "web")
    assert [a.id for a in snap.allocs_by_job("default", "web")] == ["a1"]
    for read in (
        lambda: snap.allocs_by_job("default", "api"),
        lambda: snap.alloc("a1"),
        lambda: list(snap.allocs()),
        lambda: snap.allocs_by_node("n2"),
        snap.alloc_count,
    ):
        with pytest.raises(UnsettledRead, match="settled the allocations of job default/web"):
            read()
    full = c.scoped.snapshot()  # settles everything: a complete snapshot
    assert full.alloc_count() == 2 and full.alloc("a2") is not None


class RecordingStore(StateStore):
    """A leader store that keeps every entry it applies, for replicas to replay."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[LogEntry] = []

    def apply(self, entry: LogEntry) -> None:
        super().apply(entry)
        self.log.append(entry)


def test_the_scheduler_plans_the_same_on_a_job_scoped_snapshot() -> None:
    """Scale a job from 4 to 7: the second evaluation reads the job's queued allocations."""
    nodes = tuple(
        Node(
            id=f"node-{i}",
            name=f"node-{i}",
            drivers={"mock": DriverInfo()},
            node_resources=NodeResources(cpu=2000, memory_mb=4096, disk_mb=10_000),
        ).with_computed_class()
        for i in range(6)
    )
    task = Task(name="t", driver="mock", resources=Resources(cpu=300, memory_mb=300))
    placed: dict[str, list[list[tuple[str, str, str]]]] = {}
    for label, replica in (("eager", StateStore()), ("scoped", JobScopedStore())):
        leader = RecordingStore()
        leader.commit(UpsertNodes(nodes))
        placed[label] = []
        for version, count in enumerate((4, 7)):
            job = Job(
                id="web", name="web", task_groups=(TaskGroup(name="g", count=count, tasks=(task,)),)
            )
            evaluation = Evaluation(
                id=f"eval-{version}", job_id="web", triggered_by=TriggeredBy.JOB_REGISTER
            )
            leader.commit(UpsertJob(job, evals=(evaluation,)))
            for entry in leader.log:
                replica.apply(decode_entry(encode_entry(entry)))
            leader.log.clear()
            snapshot = (
                replica.snapshot_for_job("default", "web")
                if isinstance(replica, JobScopedStore)
                else replica.snapshot()
            )
            planner = InProcessPlanner(leader)
            stored = leader.eval(evaluation.id)
            assert stored is not None
            new_scheduler("service", snapshot, planner).process(stored)
            placed[label].append(
                sorted(
                    (a.id, a.name, a.node_id)
                    for plan in planner.plans
                    for allocs in plan.node_allocation.values()
                    for a in allocs
                )
            )

    def where(plans: list[list[tuple[str, str, str]]]) -> list[list[tuple[str, str]]]:
        return [sorted((name, node) for _id, name, node in plan) for plan in plans]

    assert where(placed["eager"]) == where(placed["scoped"])  # ids are random, places not
    first, second = placed["scoped"]
    # The second evaluation saw the first four (it updates them in place) and adds three.
    assert len(first) == 4 and len(second) == 7 and set(first) < set(second)
