"""Snapshot images (actors/state/image.py): a store rebuilt from its image answers every read
as the store it was taken from, before and after more of the log is applied to both.

The log is random (hypothesis): nodes, job versions with scaling events, evaluations in
every status (blocked ones hold instances), allocations placed, updated, reported and
deleted. Each chunk crosses the wire as followers read it: encoded as a log entry, decoded
with records built and in compact groups, into an eager store and a job-scoped one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.state import StateStore
from actors.state.image import image_entries, restore
from actors.state.job_scoped import JobScopedStore
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
    EvalStatus,
    Evaluation,
    Job,
    Node,
    NodeResources,
)
from contracts.scaling import ScalingEvent
from contracts.snapshot import SnapshotHeader, decode_header, encode_header
from contracts.state_log import (
    AllocClientUpdate,
    AppendScalingEvent,
    DeleteEvals,
    LogEntry,
    RestoreJobs,
    StateChange,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
    decode_entry,
    encode_entry,
)

JOBS = ("web", "api")
NODES = ("n1", "n2")
ALLOC_IDS = [f"a{i}" for i in range(8)]
EVAL_IDS = [f"e{i}" for i in range(5)]


def node(node_id: str) -> Node:
    resources = NodeResources(cpu=4000, memory_mb=4096, disk_mb=10_000)
    return Node(node_id, node_id, node_resources=resources)


def alloc(aid: str, job: str, node_id: str, desired: DesiredStatus) -> Allocation:
    return Allocation(
        id=aid,
        node_id=node_id,
        job_id=job,
        task_group="g",
        name=f"{job}.g[0]",
        desired_status=desired,
        allocated_resources=AllocatedResources(cpu=100, memory_mb=64, disk_mb=10),
    )


def change_of(op: tuple[Any, ...], leader: StateStore) -> StateChange:
    kind = op[0]
    if kind == "job":
        _, job, meta = op
        return UpsertJob(Job(id=job, name=job, meta={"v": str(meta)}))
    if kind == "scale":
        return AppendScalingEvent("default", op[1], "g", ScalingEvent(time=op[2], message="x"))
    if kind == "eval":
        _, eid, job, status = op
        reserved = ("n1",) if status is EvalStatus.BLOCKED else ()
        ev = Evaluation(id=eid, job_id=job, status=status, reserved_nodes=reserved)
        return UpsertEvals((ev,))
    if kind == "place":
        batch = []
        for aid, job, node_id, desired in op[1]:
            owner = leader.alloc(aid) or next((a for a in batch if a.id == aid), None)
            batch.append(alloc(aid, owner.job_id if owner else job, node_id, desired))
        return UpsertAllocs(tuple(batch))
    if kind == "report":
        return UpdateAllocsClientStatus((AllocClientUpdate(op[1], op[2], "", 7),))
    return DeleteEvals((op[1],), alloc_ids=(op[2],))


ops = st.lists(
    st.one_of(
        st.tuples(st.just("job"), st.sampled_from(JOBS), st.integers(0, 2)),
        st.tuples(st.just("scale"), st.sampled_from(JOBS), st.integers(1, 10**9)),
        st.tuples(
            st.just("eval"),
            st.sampled_from(EVAL_IDS),
            st.sampled_from(JOBS),
            st.sampled_from(list(EvalStatus)),
        ),
        st.tuples(
            st.just("place"),
            st.lists(
                st.tuples(
                    st.sampled_from(ALLOC_IDS),
                    st.sampled_from(JOBS),
                    st.sampled_from(NODES),
                    st.sampled_from(list(DesiredStatus)),
                ),
                min_size=1,
                max_size=3,
            ),
        ),
        st.tuples(
            st.just("report"), st.sampled_from(ALLOC_IDS), st.sampled_from(list(ClientStatus))
        ),
        st.tuples(st.just("delete"), st.sampled_from(EVAL_IDS), st.sampled_from(ALLOC_IDS)),
    ),
    max_size=30,
)


def commit(stores: list[StateStore], change: StateChange) -> None:
    leader = stores[0]
    index = leader.latest_index() + 1
    raw = encode_entry(LogEntry(index, 1, leader.stamped(change, index)))
    for i, store in enumerate(stores):
        store.apply(decode_entry(raw, compact=i % 2 == 1))


def assert_same(want: StateStore, got: StateStore) -> None:
    if isinstance(got, JobScopedStore):
        got.settle_all()
    assert got.latest_index() == want.latest_index()
    for table in ("nodes", "jobs", "job_versions", "evals", "allocs", "scaling_events"):
        assert got.table_index(table) == want.table_index(table), table
    assert sorted(got.nodes(), key=lambda n: n.id) == sorted(want.nodes(), key=lambda n: n.id)
    for job in JOBS:
        assert got.job("default", job) == want.job("default", job)
        assert got.job_versions("default", job) == want.job_versions("default", job)
        assert got.scaling_events("default", job) == want.scaling_events("default", job)
        # Creation order, except for a record moved to another node or job (never done).
        assert sorted(got.allocs_by_job("default", job), key=lambda a: a.id) == sorted(
            want.allocs_by_job("default", job), key=lambda a: a.id
        )
        assert sorted(e.id for e in got.evals_by_job("default", job)) == sorted(
            e.id for e in want.evals_by_job("default", job)
        )
    assert sorted(got.evals(), key=lambda e: e.id) == sorted(want.evals(), key=lambda e: e.id)
    assert sorted(got.allocs(), key=lambda a: a.id) == sorted(want.allocs(), key=lambda a: a.id)
    for node_id in NODES:
        assert got.node_usage(node_id) == want.node_usage(node_id)
        assert got.node_holds(node_id) == want.node_holds(node_id)
        # Creation order, except across jobs placed by one entry (a plan places one job's)
        # and for moved records.
        assert sorted(a.id for a in got.allocs_by_node(node_id)) == sorted(
            a.id for a in want.allocs_by_node(node_id)
        )


@settings(max_examples=200, deadline=None)
@given(before=ops, after=ops)
def test_a_store_restored_from_its_image_answers_as_the_original(
    before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]
) -> None:
    original = StateStore(shards=2, alloc_shards=4, job_shards=2)
    commit([original], UpsertNodes(tuple(node(n) for n in NODES)))
    for job in JOBS:
        commit([original], UpsertJob(Job(id=job, name=job)))
    for op in before:
        commit([original], change_of(op, original))
    state = original.snapshot()
    header = decode_header(
        encode_header(SnapshotHeader(state.latest_index(), 1, 0, dict(state._table_index)))
    )
    raws = [encode_entry(entry) for entry in image_entries(state, term=1)]
    restored: list[StateStore] = [
        StateStore(shards=2, alloc_shards=4, job_shards=2),
        StateStore(shards=4, alloc_shards=2, job_shards=4),
        JobScopedStore(shards=2, alloc_shards=4, job_shards=2),
        JobScopedStore(shards=2, alloc_shards=4, job_shards=2),
    ]
    for i, store in enumerate(restored):
        commit([store], UpsertNodes((node("stale"),)))  # restore replaces what was there
        restore(store, header, (decode_entry(raw, compact=i % 2 == 1).change for raw in raws))
        assert store.node("stale") is None
        assert_same(original, store)
    for op in after:
        commit([original, *restored], change_of(op, original))
    for store in restored:
        assert_same(original, store)


def test_an_image_leaves_out_a_history_that_is_only_the_job_itself() -> None:
    original = StateStore()
    commit([original], UpsertJob(Job(id="once", name="once")))
    commit([original], UpsertJob(Job(id="twice", name="twice")))
    commit([original], UpsertJob(Job(id="twice", name="twice", meta={"v": "2"})))
    state = original.snapshot()
    images = {
        image.job.id: image
        for entry in image_entries(state, term=1)
        if isinstance(entry.change, RestoreJobs)
        for image in entry.change.jobs
    }
    assert images["once"].versions == ()  # restored as the job itself
    assert [job.version for job in images["twice"].versions] == [1, 0]
    header = SnapshotHeader(state.latest_index(), 1, 0, dict(state._table_index))
    restored = StateStore()
    restore(restored, header, (entry.change for entry in image_entries(state, term=1)))
    assert restored.job_versions("default", "once") == original.job_versions("default", "once")
    assert [job.version for job in restored.job_versions("default", "twice")] == [1, 0]
