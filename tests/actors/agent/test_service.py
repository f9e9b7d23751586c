"""What the agent takes from a state log entry, and its loop on a real Redis: an allocation
is reported as soon as its plan reaches the log."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from actors.agent.core.drivers import builtin_drivers
from actors.agent.service import AgentService, _without_allocs, records_on_nodes
from actors.leader.service import LeaderService
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import StreamNames
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    DriverInfo,
    Evaluation,
    Job,
    Node,
    NodeResources,
    Plan,
    Resources,
    Task,
    TaskGroup,
)
from contracts.messages import LeaderRequest, PlanSubmission, RequestKind
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


# -- the loop on a real Redis -------------------------------------------------------------------


def test_an_allocation_is_reported_when_its_plan_reaches_the_log_not_at_the_next_tick(
    client: redis.Redis, run_in_thread: Any, tmp_path: Path
) -> None:
    """The agent's tick is an hour here: a report that comes at all came because the log
    brought the allocation and woke the loop."""
    names = StreamNames("agent")
    leader = LeaderService(client, names)
    leader.start()
    node = Node(
        id="n1",
        name="n1",
        drivers={"mock": DriverInfo()},
        node_resources=NodeResources(cpu=1000, memory_mb=1024, disk_mb=1000),
    ).with_computed_class()
    assert leader.handle(LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=(node,))).ok
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    job = Job(id="web", name="web", task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    assert leader.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="j", job=job)).ok
    agent = AgentService(
        "a1",
        client,
        names,
        [node],
        builtin_drivers(data_dir=str(tmp_path)),
        heartbeat_s=3600.0,
        tick_s=3600.0,
    )
    agent.start()
    halt = run_in_thread(agent)
    # One turn ran (the first heartbeat went out); the loop now waits on its tick.
    wait_for(lambda: agent.stats["heartbeats"] == 1)
    alloc = dataclasses.replace(placed("a1", "n1"), job_version=0, create_index=0)
    plan = Plan(eval_id="e1", job_id="web", node_allocation={"n1": (alloc,)})
    leader._apply_plan(PlanSubmission(plan, ""))
    try:
        wait_for(lambda: agent.stats["updates"] >= 1)
    finally:
        halt()
    reports = [
        update
        for _id, fields in client.xrange(names.requests)
        for message in [decode_message(fields, registry_of(LeaderRequest))[1]]
        if isinstance(message, LeaderRequest) and message.kind is RequestKind.CLIENT_UPDATES
        for update in message.updates
    ]
    assert [(u.alloc_id, u.client_status) for u in reports][:1] == [("a1", ClientStatus.RUNNING)]


def wait_for(done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)
