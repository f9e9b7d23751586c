"""StateStore: index stamping, versions, idempotent apply, replicas, usage and snapshots."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.state import NodeUsage, StateReader, StateSnapshot, StateStore
from contracts import (
    AllocatedDevice,
    AllocatedResources,
    Allocation,
    ClientStatus,
    CodecError,
    DesiredStatus,
    EvalStatus,
    Evaluation,
    Job,
    JobStatus,
    Node,
    ScalingEvent,
    Task,
    TaskGroup,
)
from contracts.state_log import (
    AllocClientUpdate,
    AppendScalingEvent,
    DeleteEvals,
    DeleteNodes,
    GroupScalingEvent,
    LogEntry,
    PurgeJob,
    StateChange,
    UpdateAllocsClientStatus,
    UpsertAllocs,
    UpsertEvals,
    UpsertJob,
    UpsertNodes,
    decode_entry,
    encode_entry,
)


def make_job(job_id: str = "web", count: int = 3, **kw: Any) -> Job:
    group = TaskGroup(name="web", count=count, tasks=(Task(name="srv", driver="docker"),))
    return Job(id=job_id, name=job_id, task_groups=(group,), **kw)


def make_alloc(
    alloc_id: str,
    node_id: str = "n1",
    job_id: str = "web",
    cpu: int = 100,
    mem: int = 256,
    devices: tuple[str, ...] = (),
    **kw: Any,
) -> Allocation:
    dev = (AllocatedDevice("nvidia", "gpu", "A100", devices),) if devices else ()
    return Allocation(
        id=alloc_id,
        node_id=node_id,
        job_id=job_id,
        task_group="web",
        name=f"{job_id}.web[0]",
        allocated_resources=AllocatedResources(cpu=cpu, memory_mb=mem, disk_mb=10, devices=dev),
        **kw,
    )


def ev(eval_id: str, job_id: str = "web", status: EvalStatus = EvalStatus.PENDING) -> Evaluation:
    return Evaluation(id=eval_id, job_id=job_id, status=status)


# ---------------------------------------------------------------------------------------------
# Indexes


def test_commit_stamps_indexes_and_keeps_create_index() -> None:
    s = StateStore()
    i1 = s.commit(UpsertNodes((Node(id="n1"),)))
    i2 = s.commit(UpsertNodes((Node(id="n1", name="renamed"),)))
    node = s.node("n1")
    assert node is not None and (i1, i2) == (1, 2)
    assert (node.create_index, node.modify_index, node.name) == (1, 2, "renamed")
    assert s.table_index("nodes") == 2 and s.latest_index() == 2

    s.commit(UpsertAllocs((make_alloc("a1"),), evals=(ev("e1"),)))
    s.commit(UpsertAllocs((make_alloc("a1", cpu=200),)))
    alloc = s.alloc("a1")
    assert alloc is not None
    assert (alloc.create_index, alloc.modify_index, alloc.alloc_modify_index) == (3, 4, 4)
    e1 = s.eval("e1")
    assert e1 is not None and (e1.create_index, e1.modify_index) == (3, 3)
    assert s.table_index("allocs") == 4 and s.table_index("evals") == 3
    assert s.table_index("nodes") == 2 and s.table_index("nope") == 0


def test_upsert_job_versions_and_indexes() -> None:
    s = StateStore()
    s.commit(UpsertJob(make_job(), evals=(ev("e0"),)))
    s.commit(UpsertJob(make_job(priority=70), evals=(ev("e1"),)))
    job = s.job("default", "web")
    assert job is not None
    assert (job.version, job.create_index, job.modify_index, job.job_modify_index) == (1, 1, 2, 2)
    assert [j.version for j in s.job_versions("default", "web")] == [1, 0]
    v0 = s.job_version("default", "web", 0)
    assert v0 is not None and v0.priority == 50 and s.job_version("default", "web", 9) is None
    e1 = s.eval("e1")
    assert e1 is not None and e1.job_modify_index == 2  # stamped as in Nomad's FSM
    assert s.job_versions("default", "nope") == []


def test_version_retention_keeps_newest_stable() -> None:
    """TestStateStore_UpdateUpsertJob_JobVersion: 300 upserts with v0 stable."""
    s = StateStore()
    s.commit(UpsertJob(make_job(stable=True)))
    for i in range(1, 300):
        s.commit(UpsertJob(make_job(meta={"i": str(i)})))
    versions = [j.version for j in s.job_versions("default", "web")]
    assert versions == [299, 298, 297, 296, 295, 0]
    job = s.job("default", "web")
    assert job is not None and job.version == 299


def test_version_retention_without_stable_drops_oldest() -> None:
    s = StateStore()
    for i in range(10):
        s.commit(UpsertJob(make_job(meta={"i": str(i)})))
    assert [j.version for j in s.job_versions("default", "web")] == [9, 8, 7, 6, 5, 4]


def test_keep_version_rewrites_a_row_in_place() -> None:
    s = StateStore()
    s.commit(UpsertJob(make_job()))
    s.commit(UpsertJob(make_job(priority=60)))
    current = s.job("default", "web")
    assert current is not None
    s.commit(UpsertJob(current.replace(stable=True), keep_version=True))
    job = s.job("default", "web")
    assert job is not None and job.stable and job.version == 1
    assert (job.job_modify_index, job.modify_index, job.create_index) == (2, 3, 1)
    assert s.job_versions("default", "web")[0] == job
    # An older version's row changes without touching the current job.
    v0 = s.job_version("default", "web", 0)
    assert v0 is not None
    s.commit(UpsertJob(v0.replace(stable=True), keep_version=True))
    v0_after = s.job_version("default", "web", 0)
    assert v0_after is not None and v0_after.stable and v0_after.modify_index == 4
    assert s.job("default", "web") == job
    # Unknown version or job: nothing happens.
    s.commit(UpsertJob(make_job(version=7), keep_version=True))
    s.commit(UpsertJob(make_job("ghost"), keep_version=True))
    assert len(s.job_versions("default", "web")) == 2 and s.job("default", "ghost") is None


def test_apply_is_idempotent() -> None:
    s = StateStore()
    entries = [
        LogEntry(1, 1, UpsertNodes((Node(id="n1"),))),
        LogEntry(2, 1, UpsertJob(make_job(), evals=(ev("e0"),))),
        LogEntry(5, 1, UpsertAllocs((make_alloc("a1"),))),
    ]
    for e in entries:
        s.apply(e)
    before = dump(s)
    for e in entries:
        s.apply(e)  # replayed: ignored
    s.apply(LogEntry(4, 1, UpsertNodes((Node(id="late"),))))  # below latest: ignored
    assert dump(s) == before
    assert s.node("late") is None and s.latest_index() == 5
    job = s.job("default", "web")
    assert job is not None and job.version == 0


def test_apply_rejects_non_changes() -> None:
    s = StateStore()
    with pytest.raises(TypeError):
        s.apply(LogEntry(1, 0, "not a change"))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Allocations


def test_plan_update_keeps_client_status_unless_lost() -> None:
    s = StateStore()
    s.commit(UpsertAllocs((make_alloc("a1"),)))
    s.commit(UpdateAllocsClientStatus((AllocClientUpdate("a1", ClientStatus.RUNNING, "ok", 99),)))
    a = s.alloc("a1")
    assert a is not None
    assert (a.client_status, a.client_description, a.modify_time) == (
        ClientStatus.RUNNING,
        "ok",
        99,
    )
    assert (a.modify_index, a.alloc_modify_index) == (2, 1)  # client updates: not alloc_modify
    # A stop from a (stale) plan keeps what the client reported.
    stale = make_alloc("a1", desired_status=DesiredStatus.STOP)
    s.commit(UpsertAllocs((stale,)))
    a = s.alloc("a1")
    assert a is not None and a.client_status is ClientStatus.RUNNING
    assert a.desired_status is DesiredStatus.STOP
    # The scheduler may mark it lost.
    s.commit(UpsertAllocs((dataclasses.replace(stale, client_status=ClientStatus.LOST),)))
    a = s.alloc("a1")
    assert a is not None and a.client_status is ClientStatus.LOST
    # Unknown alloc ids in client updates are ignored.
    s.commit(UpdateAllocsClientStatus((AllocClientUpdate("ghost", ClientStatus.RUNNING),)))
    assert s.alloc("ghost") is None


def test_alloc_indexes_by_job_and_node() -> None:
    s = StateStore()
    s.commit(
        UpsertAllocs(
            (make_alloc("a1"), make_alloc("a2", node_id="n2"), make_alloc("b1", job_id="db"))
        )
    )
    assert [a.id for a in s.allocs_by_job("default", "web")] == ["a1", "a2"]
    assert [a.id for a in s.allocs_by_node("n1")] == ["a1", "b1"]
    assert s.alloc_count() == 3
    # Terminal allocations stay in the indexes.
    s.commit(UpsertAllocs((make_alloc("a1", desired_status=DesiredStatus.STOP),)))
    assert [a.id for a in s.allocs_by_job("default", "web")] == ["a1", "a2"]
    # A (theoretical) move between nodes re-indexes.
    s.commit(UpsertAllocs((make_alloc("a2", node_id="n3"),)))
    assert [a.id for a in s.allocs_by_node("n3")] == ["a2"] and s.allocs_by_node("n2") == []


def test_node_usage_counts_only_live_allocs() -> None:
    s = StateStore()
    s.commit(
        UpsertAllocs(
            (
                make_alloc("a1", cpu=100, mem=200, devices=("gpu-0",)),
                make_alloc("a2", cpu=50, mem=100, devices=("gpu-1",)),
                make_alloc("a3", cpu=7, mem=7, desired_status=DesiredStatus.STOP),
            )
        )
    )
    assert s.node_usage("n1") == NodeUsage(150, 300, 20, frozenset({"gpu-0", "gpu-1"}), 2)
    s.commit(UpdateAllocsClientStatus((AllocClientUpdate("a1", ClientStatus.COMPLETE),)))
    assert s.node_usage("n1") == NodeUsage(50, 100, 10, frozenset({"gpu-1"}), 1)
    s.commit(UpsertAllocs((make_alloc("a2", desired_status=DesiredStatus.EVICT),)))
    assert s.node_usage("n1") == NodeUsage()
    assert s.node_usage("unknown") == NodeUsage()


def test_delete_evals_and_allocs_gc() -> None:
    s = StateStore()
    s.commit(UpsertJob(make_job(), evals=(ev("e0"),)))
    s.commit(UpsertAllocs((make_alloc("a1"),), evals=(ev("e0", status=EvalStatus.COMPLETE),)))
    job = s.job("default", "web")
    assert job is not None and job.status is JobStatus.RUNNING
    s.commit(DeleteEvals(("e0", "nope"), alloc_ids=("a1",)))
    assert s.eval("e0") is None and s.alloc("a1") is None
    assert s.evals_by_job("default", "web") == [] and s.allocs_by_node("n1") == []
    assert s.node_usage("n1") == NodeUsage()
    job = s.job("default", "web")
    assert job is not None and job.status is JobStatus.DEAD  # evalDelete
    assert s.job_versions("default", "web")[0].status is JobStatus.DEAD


def test_delete_nodes() -> None:
    s = StateStore()
    s.commit(UpsertNodes((Node(id="n1"), Node(id="n2"))))
    s.commit(DeleteNodes(("n1", "ghost")))
    assert [n.id for n in s.nodes()] == ["n2"] and s.node_count() == 1


# ---------------------------------------------------------------------------------------------
# Evals, purge, scaling events


def test_successful_eval_cancels_blocked_evals() -> None:
    s = StateStore()
    blocked = dataclasses.replace(ev("b1", status=EvalStatus.BLOCKED), modify_time=1)
    s.commit(UpsertEvals((blocked, ev("e1"), ev("other", job_id="db", status=EvalStatus.BLOCKED))))
    done = dataclasses.replace(ev("e1", status=EvalStatus.COMPLETE), modify_time=55)
    s.commit(UpsertEvals((done,)))
    b1 = s.eval("b1")
    assert b1 is not None and b1.status is EvalStatus.CANCELED and b1.modify_time == 55
    assert b1.status_description == 'evaluation "e1" successful'
    other = s.eval("other")
    assert other is not None and other.status is EvalStatus.BLOCKED


def test_failed_placements_do_not_cancel_blocked_evals() -> None:
    from contracts import AllocMetric

    s = StateStore()
    s.commit(UpsertEvals((ev("b1", status=EvalStatus.BLOCKED),)))
    done = dataclasses.replace(
        ev("e1", status=EvalStatus.COMPLETE), failed_tg_allocs={"web": AllocMetric()}
    )
    s.commit(UpsertEvals((done,)))
    b1 = s.eval("b1")
    assert b1 is not None and b1.status is EvalStatus.BLOCKED


def test_purge_deletes_job_versions_and_events_but_keeps_allocs_and_evals() -> None:
    s = StateStore()
    event = ScalingEvent(time=1, count=3, previous_count=1)
    s.commit(
        UpsertJob(make_job(), evals=(ev("e0"),), scaling_events=(GroupScalingEvent("web", event),))
    )
    s.commit(UpsertAllocs((make_alloc("a1"),)))
    idx = s.commit(PurgeJob("default", "web", evals=(ev("e1"),)))
    assert s.job("default", "web") is None and s.job_versions("default", "web") == []
    assert s.scaling_events("default", "web") == {}
    assert [a.id for a in s.allocs_by_job("default", "web")] == ["a1"]
    assert [e.id for e in s.evals_by_job("default", "web")] == ["e0", "e1"]
    e1 = s.eval("e1")
    assert e1 is not None and e1.job_modify_index == idx
    assert s.table_index("jobs") == idx


def test_scaling_events_newest_first_capped_at_20() -> None:
    s = StateStore()
    for i in range(25):
        s.commit(AppendScalingEvent("default", "web", "web", ScalingEvent(time=i, message=str(i))))
    s.commit(AppendScalingEvent("default", "web", "db", ScalingEvent(time=100)))
    events = s.scaling_events("default", "web")
    assert [e.time for e in events["web"]] == list(range(24, 4, -1))
    assert [e.time for e in events["db"]] == [100]
    events["web"] = ()  # a copy: the store is unaffected
    assert len(s.scaling_events("default", "web")["web"]) == 20


# ---------------------------------------------------------------------------------------------
# Replicas and snapshots


def dump(r: StateReader) -> dict[str, Any]:
    """Every reader method's answer, in iteration order (to compare stores and snapshots)."""
    job_keys = sorted({(j.namespace, j.id) for j in r.jobs()} | {("default", "web")})
    node_ids = sorted({n.id for n in r.nodes()} | {a.node_id for a in r.allocs()} | {"n1"})
    return {
        "latest": r.latest_index(),
        "tables": {t: r.table_index(t) for t in ("jobs", "nodes", "allocs", "evals")},
        "jobs": list(r.jobs()),
        "job": {k: r.job(*k) for k in job_keys},
        "versions": {k: r.job_versions(*k) for k in job_keys},
        "version0": {k: r.job_version(*k, 0) for k in job_keys},
        "nodes": list(r.nodes()),
        "node": {n: r.node(n) for n in node_ids},
        "node_count": r.node_count(),
        "allocs": list(r.allocs()),
        "alloc": {a.id: r.alloc(a.id) for a in r.allocs()},
        "by_job": {k: r.allocs_by_job(*k) for k in job_keys},
        "by_node": {n: r.allocs_by_node(n) for n in node_ids},
        "alloc_count": r.alloc_count(),
        "usage": {n: r.node_usage(n) for n in node_ids},
        "evals": list(r.evals()),
        "eval": {e.id: r.eval(e.id) for e in r.evals()},
        "evals_by_job": {k: r.evals_by_job(*k) for k in job_keys},
        "scaling": {k: r.scaling_events(*k) for k in job_keys},
    }


def busy_history() -> list[LogEntry]:
    changes: list[StateChange] = [
        UpsertNodes(tuple(Node(id=f"n{i}", attributes={"rack": str(i % 3)}) for i in range(6))),
        UpsertJob(make_job(), evals=(ev("e0"),)),
        UpsertJob(make_job("db", count=1), evals=(ev("d0", job_id="db"),)),
        UpsertAllocs(
            tuple(make_alloc(f"a{i}", node_id=f"n{i % 6}", devices=(f"g{i}",)) for i in range(9)),
            evals=(ev("e0", status=EvalStatus.COMPLETE),),
        ),
        UpdateAllocsClientStatus(
            tuple(AllocClientUpdate(f"a{i}", ClientStatus.RUNNING, "", i) for i in range(0, 9, 2))
        ),
        UpsertJob(
            make_job(count=5),
            evals=(ev("e1"),),
            scaling_events=(GroupScalingEvent("web", ScalingEvent(time=3, count=5)),),
        ),
        UpsertAllocs((make_alloc("a1", desired_status=DesiredStatus.STOP),)),
        AppendScalingEvent("default", "db", "web", ScalingEvent(time=9, message="hi")),
        DeleteNodes(("n5",)),
        PurgeJob("default", "db", evals=(ev("d1", job_id="db"),)),
        DeleteEvals(("d0",), alloc_ids=("a2",)),
    ]
    return [LogEntry(index=i + 1, term=1, change=c) for i, c in enumerate(changes)]


def unordered(d: dict[str, Any]) -> dict[str, Any]:
    """Iteration order depends on the shard layout; compare contents only."""
    return {k: sorted(map(repr, v)) if isinstance(v, list) else v for k, v in d.items()}


def test_replica_applying_encoded_entries_matches_leader() -> None:
    leader, replica = StateStore(), StateStore()
    other_layout = StateStore(shards=64, alloc_shards=128, job_shards=64)
    for entry in busy_history():
        leader.apply(entry)
        replica.apply(decode_entry(encode_entry(entry)))
        other_layout.apply(decode_entry(encode_entry(entry)))
    # Same shard layout: identical answers, iteration order included.
    assert dump(replica) == dump(leader)
    assert unordered(dump(other_layout)) == unordered(dump(leader))
    # Replaying the whole log on the replica changes nothing.
    for entry in busy_history():
        replica.apply(decode_entry(encode_entry(entry)))
    assert dump(replica) == dump(leader)


def test_encode_decode_roundtrip_and_errors() -> None:
    for entry in busy_history():
        assert decode_entry(encode_entry(entry)) == entry
    with pytest.raises(CodecError, match=r"^\$: not valid JSON"):
        decode_entry(b"{nope")
    with pytest.raises(CodecError) as exc:
        decode_entry(b'{"Index": 1, "Term": 0, "Type": "Bogus", "Change": {}}')
    assert exc.value.path == "$.Type"
    with pytest.raises(CodecError) as exc:
        decode_entry(b'{"Index": "x", "Term": 0, "Type": "UpsertNodes", "Change": {"Nodes": []}}')
    assert exc.value.path == "$.Index"
    with pytest.raises(CodecError) as exc:
        decode_entry(b'{"Index": 1, "Term": 0, "Type": "UpsertNodes", "Change": {"Nodes": [{}]}}')
    assert exc.value.path == "$.Change.Nodes[0].ID"
    with pytest.raises(CodecError) as exc:
        decode_entry(b'{"Index": 1, "Term": 0, "Type": "UpsertNodes"}')
    assert exc.value.path == "$.Change"
    with pytest.raises(CodecError) as exc:
        decode_entry(b'{"Index": 1, "Term": 0, "Type": "DeleteNodes", "Change": {}, "X": 1}')
    assert exc.value.path == "$.X"
    with pytest.raises(CodecError):
        decode_entry(b"[1]")


def test_snapshot_isolation_of_every_reader_method() -> None:
    s = StateStore()
    history = busy_history()
    for entry in history[:6]:
        s.apply(entry)
    snap = s.snapshot()
    assert isinstance(snap, StateSnapshot)
    frozen = dump(snap)
    assert frozen == dump(s)
    for entry in history[6:]:
        s.apply(entry)
    # Hit every table again: new job version, allocs everywhere, evals, events, purge.
    s.commit(UpsertJob(make_job(count=9), evals=(ev("e9"),)))
    s.commit(UpsertAllocs(tuple(make_alloc(f"z{i}", node_id=f"n{i % 6}") for i in range(20))))
    s.commit(UpdateAllocsClientStatus((AllocClientUpdate("a0", ClientStatus.FAILED),)))
    s.commit(AppendScalingEvent("default", "web", "web", ScalingEvent(time=77)))
    s.commit(UpsertNodes((Node(id="n1", name="changed"),)))
    assert dump(snap) == frozen
    assert dump(s) != frozen


def test_snapshot_after_many_snapshots_and_writes() -> None:
    s = StateStore(shards=2, alloc_shards=2, job_shards=2)
    snaps: list[tuple[StateSnapshot, dict[str, Any]]] = []
    for i in range(30):
        s.commit(UpsertAllocs((make_alloc(f"a{i % 7}", node_id=f"n{i % 3}", cpu=i),)))
        if i % 4 == 0:
            s.commit(UpdateAllocsClientStatus((AllocClientUpdate(f"a{i % 7}", ClientStatus.LOST),)))
        snap = s.snapshot()
        snaps.append((snap, dump(snap)))
    for snap, expected in snaps:
        assert dump(snap) == expected


# ---------------------------------------------------------------------------------------------
# Incremental node usage against a recomputation from scratch


def recompute_usage(r: StateReader, node_id: str) -> NodeUsage:
    live = [a for a in r.allocs_by_node(node_id) if not a.terminal()]
    return NodeUsage(
        cpu=sum(a.allocated_resources.cpu for a in live),
        memory_mb=sum(a.allocated_resources.memory_mb for a in live),
        disk_mb=sum(a.allocated_resources.disk_mb for a in live),
        device_ids=frozenset(
            i for a in live for d in a.allocated_resources.devices for i in d.device_ids
        ),
        alloc_count=len(live),
    )


ALLOC_IDS = st.sampled_from([f"a{i}" for i in range(8)])
NODE_IDS = st.sampled_from(["n1", "n2", "n3"])
upsert_op = st.tuples(
    st.just("upsert"),
    ALLOC_IDS,
    NODE_IDS,
    st.integers(0, 500),
    st.lists(st.sampled_from(["g0", "g1", "g2"]), max_size=2, unique=True),
    st.sampled_from(list(DesiredStatus)),
    st.sampled_from([ClientStatus.PENDING, ClientStatus.LOST]),
)
client_op = st.tuples(st.just("client"), ALLOC_IDS, st.sampled_from(list(ClientStatus)))
delete_op = st.tuples(st.just("delete"), ALLOC_IDS)
snapshot_op = st.tuples(st.just("snapshot"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(upsert_op, client_op, delete_op, snapshot_op), max_size=40))
def test_node_usage_is_maintained_incrementally(ops: list[tuple[Any, ...]]) -> None:
    s = StateStore(shards=2, alloc_shards=2, job_shards=2)
    snaps: list[tuple[StateSnapshot, dict[str, NodeUsage]]] = []
    for op in ops:
        if op[0] == "upsert":
            _, aid, node, cpu, devs, desired, client = op
            alloc = make_alloc(
                aid,
                node_id=node,
                cpu=cpu,
                mem=cpu * 2,
                devices=tuple(devs),
                desired_status=desired,
                client_status=client,
            )
            s.commit(UpsertAllocs((alloc,)))
        elif op[0] == "client":
            s.commit(UpdateAllocsClientStatus((AllocClientUpdate(op[1], op[2]),)))
        elif op[0] == "delete":
            s.commit(DeleteEvals((), alloc_ids=(op[1],)))
        else:
            snap = s.snapshot()
            snaps.append((snap, {n: recompute_usage(snap, n) for n in ("n1", "n2", "n3")}))
        for node in ("n1", "n2", "n3"):
            assert s.node_usage(node) == recompute_usage(s, node)
    for snap, expected in snaps:
        for node, usage in expected.items():
            assert snap.node_usage(node) == usage


# ---------------------------------------------------------------------------------------------
# Fast record copies


def test_replacer_matches_dataclasses_replace() -> None:
    from contracts.copying import replacer

    alloc = make_alloc("a1", devices=("g0",), client_status=ClientStatus.RUNNING)
    stamp = replacer(Allocation, "create_index", "modify_index", "alloc_modify_index")
    fast = stamp(alloc, 1, 2, 3)
    assert fast == dataclasses.replace(alloc, create_index=1, modify_index=2, alloc_modify_index=3)
    assert type(fast) is Allocation and fast.allocated_resources is alloc.allocated_resources
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.modify_index = 9  # type: ignore[misc]
    with pytest.raises(ValueError, match="no fields"):
        replacer(Allocation, "nope")


def test_replacer_falls_back_to_the_constructor() -> None:
    from contracts.copying import replacer

    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int
        b: int = 0
        c: int = dataclasses.field(default=5, init=False)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")

    assert replacer(Plain, "b")(Plain(1, 2), 7) == Plain(1, 7)
    with pytest.raises(ValueError, match="negative"):
        replacer(Checked, "a")(Checked(1), -1)
