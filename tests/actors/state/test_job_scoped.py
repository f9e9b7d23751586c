"""JobScopedStore: the same log as the eager store, allocation records settled per job.

Every test feeds one log, encoded and decoded as on the wire, to a leader store, an eager
replica and job-scoped replicas, and checks that what a job-scoped replica answers (node
usage and job status at once, a job's allocations once settled, everything after
settle_all) equals the eager replica's. Replicas read the log both ways decode_entry offers:
records built (the default) and left in their compact groups (`compact=True`, as workers
read it).
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
    """A leader store that stamps and commits, and the replicas that follow it: `scoped`
    reads the log compact (as workers do), `scoped_built` and `eager_compact` the other way
    round from their kind's usual."""

    def __init__(self) -> None:
        self.leader = StateStore(shards=2, alloc_shards=4, job_shards=2)
        self.eager = StateStore(shards=2, alloc_shards=4, job_shards=2)
        self.eager_compact = StateStore(shards=2, alloc_shards=4, job_shards=2)
        self.scoped = JobScopedStore(shards=2, alloc_shards=4, job_shards=2)
        self.scoped_built = JobScopedStore(shards=2, alloc_shards=4, job_shards=2)

    def commit(self, change: StateChange) -> int:
        index = self.leader.latest_index() + 1
        raw = encode_entry(LogEntry(index, 1, self.leader.stamped(change, index)))
        built, compact = decode_entry(raw), decode_entry(raw, compact=True)
        for store in (self.leader, self.eager, self.scoped_built):
            store.apply(built)
        for store in (self.scoped, self.eager_compact):
            store.apply(compact)
        return index

    def replicas(self) -> tuple[StateStore, JobScopedStore, JobScopedStore]:
        return self.eager_compact, self.scoped, self.scoped_built


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


def assert_same_everywhere(eager: StateStore, scoped: StateStore) -> None:
    """Cluster-wide answers that must hold without settling anything."""
    assert scoped.latest_index() == eager.latest_index()
    for node in NODES:
        assert scoped.node_usage(node) == eager.node_usage(node)
    for job in JOBS:
        assert scoped.job("default", job) == eager.job("default", job)
    assert scoped.table_index("allocs") == eager.table_index("allocs")


def assert_settled_equal(eager: StateStore, scoped: StateStore) -> None:
    if isinstance(scoped, JobScopedStore):
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
placement = st.tuples(
    ALLOC_IDS,
    st.sampled_from(JOBS),
    st.sampled_from(NODES),
    st.sampled_from([100, 300]),  # few shapes: placements of one entry share groups
    st.sampled_from(list(DesiredStatus)),
    st.sampled_from([ClientStatus.PENDING, ClientStatus.LOST]),
)
# One entry may place, update and stop several allocations, and carry several reports: the
# compact form splits a group's rows into runs of new allocations and updates between them.
upsert_op = st.tuples(st.just("upsert"), st.lists(placement, min_size=1, max_size=4))
report = st.tuples(ALLOC_IDS, st.sampled_from(list(ClientStatus)))
client_op = st.tuples(st.just("client"), st.lists(report, min_size=1, max_size=4))
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
            # An ID may come twice in one entry: the leader stamps both as new, and the
            # second updates the first.
            batch: list[Allocation] = []
            for aid, job, node, cpu, desired, client in op[1]:
                owner = c.leader.alloc(aid) or next((a for a in batch if a.id == aid), None)
                job = owner.job_id if owner is not None else job  # an allocation keeps its job
                batch.append(
                    make_alloc(aid, job, node, cpu, desired_status=desired, client_status=client)
                )
            c.commit(UpsertAllocs(tuple(batch)))
        elif op[0] == "client":
            updates = tuple(AllocClientUpdate(aid, status, "", 5) for aid, status in op[1])
            c.commit(UpdateAllocsClientStatus(updates))
        elif op[0] == "delete":
            c.commit(DeleteEvals((), alloc_ids=(op[1],)))
        else:
            for scoped in (c.scoped, c.scoped_built):
                snap = scoped.snapshot_for_job("default", op[1])
                want = c.eager.allocs_by_job("default", op[1])
                assert snap.allocs_by_job("default", op[1]) == want
        for replica in c.replicas():
            assert_same_everywhere(c.eager, replica)
    for replica in c.replicas():
        assert_settled_equal(c.eager, replica)


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
    assert c.scoped.unfiled_allocations() == 6
    assert_same_everywhere(c.eager, c.scoped)
    allocs = c.scoped.snapshot_for_job("default", "web").allocs_by_job("default", "web")
    assert [a.client_status for a in allocs] == [ClientStatus.RUNNING] * 6
    assert allocs == c.eager.allocs_by_job("default", "web")  # same records, same indexes
    assert c.scoped.queued_jobs() == 0 and c.scoped.unfiled_allocations() == 0

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
