"""What the agent takes from a state log entry (the Redis-backed loop runs in tests/launch)."""

from __future__ import annotations

from actors.agent.service import _without_allocs, records_on_nodes
from contracts import AllocatedResources, Allocation, ClientStatus, Evaluation
from contracts.state_log import (
    AllocClientUpdate,
    LogEntry,
    UpdateAllocsClientStatus,
    UpsertAllocRows,
    UpsertAllocs,
    UpsertEvals,
    decode_entry,
    encode_entry,
)


def placed(alloc_id: str, node_id: str, job_id: str = "web") -> Allocation:
    return Allocation(
        id=alloc_id,
        job_id=job_id,
        task_group="g",
        node_id=node_id,
        allocated_resources=AllocatedResources(cpu=100, memory_mb=64),
        create_index=5,
        modify_index=5,
        alloc_modify_index=5,
    )


def test_records_on_its_nodes_are_built_from_either_form() -> None:
    allocs = (
        placed("a1", "n1"),
        placed("a2", "n2"),
        placed("a3", "n1", job_id="api"),
        placed("a4", "n3"),
        placed("a5", "n1"),
    )
    entry = LogEntry(5, 1, UpsertAllocs(allocs, evals=(Evaluation(id="e1"),)))
    raw = encode_entry(entry)
    built, compact = decode_entry(raw), decode_entry(raw, compact=True)
    assert isinstance(built.change, UpsertAllocs)
    assert isinstance(compact.change, UpsertAllocRows)
    for change in (built.change, compact.change):
        mine = records_on_nodes(change, frozenset({"n1"}))
        # The entry's order (its groups': the web allocations, then the api one).
        assert [a.id for a in mine] == ["a1", "a5", "a3"]
        assert {a.id: a for a in mine} == {a.id: a for a in allocs if a.node_id == "n1"}
        assert records_on_nodes(change, frozenset({"n9"})) == []


def test_the_agents_store_keeps_evaluations_but_no_allocation_records() -> None:
    evaluation = Evaluation(id="e1")
    allocs = UpsertAllocs((placed("a1", "n1"),), evals=(evaluation,))
    reports = UpdateAllocsClientStatus(
        (AllocClientUpdate("a1", ClientStatus.RUNNING, "", 1, "n1"),)
    )
    for entry in (LogEntry(5, 1, allocs), LogEntry(6, 1, reports)):
        raw = encode_entry(entry)
        for decoded in (decode_entry(raw), decode_entry(raw, compact=True)):
            kept = _without_allocs(decoded)
            assert kept.index == entry.index
            want = (evaluation,) if entry.index == 5 else ()
            assert kept.change == UpsertEvals(want)
