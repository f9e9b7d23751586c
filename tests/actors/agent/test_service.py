"""What the agent takes from a state log entry, and its loop on a real Redis: an allocation
is reported as soon as its plan reaches the log."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from actors.agent.core.drivers import builtin_drivers
from actors.agent.service import AgentService, records_on_nodes
from actors.leader.service import LeaderService
from actors.streams.envelope import decode_message, registry_of
from actors.streams.names import StreamNames
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
    DriverInfo,
    EvalStatus,
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
    UpsertJob,
    decode_entry,
    encode_entry,
    without_allocs,
)
from contracts.usage import REPORT_TYPE, UsageReport, decode_report


def placed(alloc_id: str, node_id: str, job_id: str = "web", **changes: Any) -> Allocation:
    return Allocation(
        id=alloc_id,
        job_id=job_id,
        task_group="g",
        node_id=node_id,
        allocated_resources=AllocatedResources(cpu=100, memory_mb=64),
        create_index=5,
        modify_index=5,
        alloc_modify_index=5,
        **changes,
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


def test_without_allocs_keeps_a_plans_evaluations_but_no_allocation_records() -> None:
    evaluation = Evaluation(id="e1")
    allocs = UpsertAllocs((placed("a1", "n1"),), evals=(evaluation,))
    reports = UpdateAllocsClientStatus(
        (AllocClientUpdate("a1", ClientStatus.RUNNING, "", 1, "n1"),)
    )
    for entry in (LogEntry(5, 1, allocs), LogEntry(6, 1, reports)):
        raw = encode_entry(entry)
        for decoded in (decode_entry(raw), decode_entry(raw, compact=True)):
            kept = without_allocs(decoded)
            assert kept.index == entry.index
            want = (evaluation,) if entry.index == 5 else ()
            assert kept.change == UpsertEvals(want)


def test_the_agents_store_keeps_job_versions_and_no_evaluations(
    client: redis.Redis, tmp_path: Path
) -> None:
    """The agent's own replica settings: its tasks are found by job version, and neither
    evaluations nor allocation records are kept."""
    names = StreamNames("agent-store")
    task = Task(name="t", driver="mock", resources=Resources(cpu=100, memory_mb=64))
    job = Job(id="web", name="web", task_groups=(TaskGroup("g", 1, tasks=(task,)),))
    evaluation = Evaluation(id="e1", job_id="web")
    entries = (
        LogEntry(1, 1, UpsertJob(job, (evaluation,))),
        LogEntry(2, 1, UpsertAllocs((placed("a1", "n1"),), evals=(evaluation,))),
        LogEntry(3, 1, UpsertEvals((dataclasses.replace(evaluation, status=EvalStatus.COMPLETE),))),
    )
    agent = AgentService("agent-store", client, names, [], {}, work_dir=tmp_path)
    for entry in entries:
        agent.replica.apply_rows([(b"", {b"e": encode_entry(entry)})])

    store = agent.replica.store
    assert store.latest_index() == 3
    stored = store.job_version("default", "web", 0)
    assert stored is not None and stored.task_groups == job.task_groups
    assert list(store.evals()) == [] and store.alloc_count() == 0


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


# -- usage on the usage stream ------------------------------------------------------------------


def usage_reports_in(client: redis.Redis, names: StreamNames) -> list[UsageReport]:
    reports = []
    for _id, fields in client.xrange(names.usage):
        assert fields[b"t"] == REPORT_TYPE.encode() and b"tp" not in fields
        reports.append(decode_report(fields[b"b"]))
    return reports


def load_node(node_id: str = "n1") -> Node:
    return Node(
        id=node_id,
        name=node_id,
        drivers={"mock": DriverInfo()},
        attributes={"cpu.frequency": "2000"},
        node_resources=NodeResources(cpu=8000, memory_mb=4096, disk_mb=1000),
    ).with_computed_class()


def test_the_agent_publishes_what_its_allocations_use_every_interval(
    client: redis.Redis, run_in_thread: Any, tmp_path: Path
) -> None:
    names = StreamNames("usage")
    leader = LeaderService(client, names)
    leader.start()
    node = load_node()
    assert leader.handle(LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=(node,))).ok
    task = Task(
        name="t",
        driver="mock",
        config={"load": {"base": 600, "memory_mb": 48}},
        resources=Resources(cpu=100, memory_mb=64),
    )
    job = Job(id="web", name="web", task_groups=(TaskGroup("g", 2, tasks=(task,)),))
    assert leader.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="j", job=job)).ok
    agent = AgentService(
        "agent-1",
        client,
        names,
        [node],
        builtin_drivers(data_dir=str(tmp_path)),
        heartbeat_s=3600.0,
        tick_s=0.02,
        usage_interval_s=0.05,
    )
    agent.start()
    halt = run_in_thread(agent)
    allocs = tuple(
        dataclasses.replace(placed(a, "n1"), job_version=0, create_index=0) for a in ("a1", "a2")
    )
    plan = Plan(eval_id="e1", job_id="web", node_allocation={"n1": allocs})
    leader._apply_plan(PlanSubmission(plan, ""))
    try:
        wait_for(lambda: agent.stats["usage_reports"] >= 3)
    finally:
        halt()
    reports = usage_reports_in(client, names)
    assert len(reports) == agent.stats["usage_reports"] >= 3
    assert all(r.agent_id == "agent-1" for r in reports)
    sample = reports[-1].samples[0]
    assert sorted(s.alloc_id for s in reports[-1].samples) == ["a1", "a2"]
    assert (sample.namespace, sample.job_id, sample.task_group, sample.node_id) == (
        "default",
        "web",
        "g",
        "n1",
    )
    assert (sample.cpu_mhz, sample.memory_mb) == (300.0, 48.0)  # half the group's demand each
    assert sample.cpu_percent == 15.0  # of one 2000 MHz core
    assert (sample.allocated_cpu_mhz, sample.allocated_memory_mb) == (100, 64)
    times = [r.samples[0].time_ns for r in reports]
    assert times == sorted(times) and abs(times[-1] / 1e9 - time.time()) < 30


def test_usage_reports_are_chunked_and_the_stream_capped(
    client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("actors.agent.service.MAX_SAMPLES_PER_REPORT", 3)
    monkeypatch.setattr("actors.agent.service.USAGE_STREAM_MAXLEN", 10)
    names = StreamNames("chunks")
    node = load_node()
    agent = AgentService("agent-2", client, names, [node], builtin_drivers(data_dir=str(tmp_path)))
    task = Task(name="t", driver="mock", config={"load": {"base": 700}})
    job = Job(id="web", task_groups=(TaskGroup("g", 7, tasks=(task,)),))
    agent.core.apply_allocs(
        [placed(f"a{i}", "n1") for i in range(7)], lambda ns, job_id, version: job
    )
    agent.core.tick()
    assert agent.publish_usage() == 7
    reports = usage_reports_in(client, names)
    assert [len(r.samples) for r in reports] == [3, 3, 1]
    assert sorted(s.alloc_id for r in reports for s in r.samples) == [f"a{i}" for i in range(7)]
    assert {s.cpu_mhz for r in reports for s in r.samples} == {100.0}
    # MAXLEN ~ 10: Redis trims whole macro nodes (100 entries each by default), never below 10.
    for _ in range(100):
        agent.publish_usage()
    assert 10 <= client.xlen(names.usage) < 303
    # No running allocation with a load: nothing is published.
    agent.core.apply_allocs(
        [placed(f"a{i}", "n1", desired_status=DesiredStatus.STOP) for i in range(7)],
        lambda ns, job_id, version: job,
    )
    agent.core.tick()
    before = client.xlen(names.usage)
    assert agent.publish_usage() == 0 and client.xlen(names.usage) == before
