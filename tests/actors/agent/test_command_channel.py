"""Node commands on a real Redis: a running agent reads its node's command stream in its loop,
signals the tasks (a real raw_exec process and a mock task), records "Signaling" task events,
collects finished allocations' folders, and answers each command on its reply list."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from actors.agent.core.drivers import MockHandle, builtin_drivers
from actors.agent.service import AgentService
from actors.leader.service import LeaderService
from actors.streams.names import StreamNames
from actors.streams.node_link import send_command, task_events
from contracts import (
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
    DriverInfo,
    Job,
    Node,
    NodeResources,
    Plan,
    Resources,
    Task,
    TaskGroup,
)
from contracts.messages import LeaderRequest, PlanSubmission, RequestKind
from contracts.node_commands import (
    NOT_ELIGIBLE_FOR_GC,
    NodeCommand,
    NodeCommandKind,
    ReplyError,
)

TRAP = "trap 'echo got-usr1 >> signals' USR1; while true; do sleep 0.05; done"


def wait_for(done: Callable[[], Any], what: str, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = done()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def command(kind: NodeCommandKind, **fields: Any) -> NodeCommand:
    return NodeCommand(kind, command_id=str(uuid.uuid4()), node_id="n1", **fields)


def test_an_agent_signals_collects_and_answers_over_its_command_stream(
    client: redis.Redis, run_in_thread: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Finished runners stay until collected: the signal to the stopped allocation below finds
    # it stopped, not forgotten.
    monkeypatch.setattr("actors.agent.service.SWEEP_INTERVAL_S", 3600.0)
    names = StreamNames("commands")
    # Sent before the agent runs: nobody was there to answer it, so it is never carried out.
    early = dataclasses.replace(command(NodeCommandKind.GC, alloc_ids=("a1",)), reply_to="")
    assert send_command(client, names, early, timeout_s=0.05) is None
    leader = LeaderService(client, names)
    leader.start()
    node = Node(
        id="n1",
        name="n1",
        drivers={"mock": DriverInfo(), "raw_exec": DriverInfo()},
        node_resources=NodeResources(cpu=4000, memory_mb=4096, disk_mb=1000),
    ).with_computed_class()
    assert leader.handle(LeaderRequest(RequestKind.UPSERT_NODES, request_id="n", nodes=(node,))).ok
    tasks = (
        Task(name="m", driver="mock", resources=Resources(cpu=100, memory_mb=64)),
        Task(
            name="r",
            driver="raw_exec",
            config={"command": "/bin/sh", "args": ["-c", TRAP]},
            resources=Resources(cpu=100, memory_mb=64),
            kill_timeout_s=0.5,
        ),
    )
    job = Job(id="web", name="web", task_groups=(TaskGroup("g", 1, tasks=tasks),))
    assert leader.handle(LeaderRequest(RequestKind.REGISTER_JOB, request_id="j", job=job)).ok
    drivers = builtin_drivers(data_dir=str(tmp_path), raw_exec_enabled=True)
    agent = AgentService(
        "a1", client, names, [node], drivers, heartbeat_s=3600.0, tick_s=0.02, usage_interval_s=0
    )
    agent.start()
    halt = run_in_thread(agent)
    alloc = Allocation(
        id="a1",
        job_id="web",
        task_group="g",
        node_id="n1",
        allocated_resources=AllocatedResources(cpu=200, memory_mb=128),
    )
    leader._apply_plan(
        PlanSubmission(Plan(eval_id="e1", job_id="web", node_allocation={"n1": (alloc,)}), "")
    )
    try:
        wait_for(lambda: agent.core.status("a1") is ClientStatus.RUNNING, "the allocation to run")
        task_dir = tmp_path / "a1" / "r"
        wait_for(lambda: task_dir.exists(), "the raw_exec task's folder")

        # Every task: the raw_exec process runs its trap, the mock task records the signal.
        reply = send_command(
            client, names, command(NodeCommandKind.SIGNAL, alloc_id="a1", signal="sigusr1"), 10
        )
        assert reply is not None and reply.ok, reply
        assert wait_for(lambda: (task_dir / "signals").exists(), "the trap to run")
        assert (task_dir / "signals").read_text() == "got-usr1\n"
        runner = agent.core.runner("n1", "a1")
        assert runner is not None
        mock_handle = runner._handles["m"][1]
        assert isinstance(mock_handle, MockHandle) and mock_handle.signals == ["SIGUSR1"]
        events = task_events(client, names, "a1")
        assert sorted(e.task for e in events) == ["m", "r"]
        assert {(e.type, e.display_message, e.details["signal"]) for e in events} == {
            ("Signaling", "Task being sent signal SIGUSR1", "SIGUSR1")
        }

        # One task, by name.
        one = command(NodeCommandKind.SIGNAL, alloc_id="a1", task="m", signal="SIGHUP")
        assert (reply := send_command(client, names, one, 10)) is not None and reply.ok
        assert mock_handle.signals == ["SIGUSR1", "SIGHUP"]
        assert [e.task for e in task_events(client, names, "a1")][-1] == "m"

        refused = [
            (
                dict(alloc_id="a1", task="nope", signal="SIGHUP"),
                ReplyError.INVALID,
                "Task not found",
            ),
            (dict(alloc_id="a1", signal="INVALID-SIGNAL"), ReplyError.INVALID, "invalid signal"),
            (dict(alloc_id="zz", signal="SIGHUP"), ReplyError.NOT_FOUND, 'Unknown allocation "zz"'),
        ]
        for fields, kind, text in refused:
            reply = send_command(client, names, command(NodeCommandKind.SIGNAL, **fields), 10)
            assert reply is not None and reply.error_kind is kind and text in reply.error

        # A running allocation is not collected; a stopped one is, folder and all.
        gc = command(NodeCommandKind.GC_ALLOC, alloc_id="a1")
        reply = send_command(client, names, gc, 10)
        assert reply is not None and reply.error == NOT_ELIGIBLE_FOR_GC
        assert task_dir.exists()
        stopped = dataclasses.replace(alloc, desired_status=DesiredStatus.STOP)
        leader._apply_plan(
            PlanSubmission(Plan(eval_id="e2", job_id="web", node_update={"n1": (stopped,)}), "")
        )
        wait_for(lambda: agent.core.status("a1") is ClientStatus.COMPLETE, "the stop")
        signal_stopped = command(NodeCommandKind.SIGNAL, alloc_id="a1", signal="SIGHUP")
        reply = send_command(client, names, signal_stopped, 10)
        assert reply is not None and "Task not running" in reply.error
        everything = command(NodeCommandKind.GC, alloc_ids=("a1", "../escape", "never-here"))
        reply = send_command(client, names, everything, 10)
        assert reply is not None and reply.ok and reply.collected == ("a1", "never-here")
        assert not (tmp_path / "a1").exists()
        assert agent.commands.stats["commands"] == 8  # the one sent before the start: never
    finally:
        halt()
    # Every reply was read by its sender: no reply list is left behind.
    assert client.keys(f"{{{names.prefix}}}:node-replies:*") == []
    assert client.xlen(names.node_commands("n1")) == 9


def test_a_node_hosted_later_is_read_at_once(
    client: redis.Redis, run_in_thread: Any, tmp_path: Path
) -> None:
    """The agent that hosts declared fleets starts with no node: one hosted later has its
    command stream read without waiting out the reader's block."""
    names = StreamNames("hosted")
    agent = AgentService(
        "sim", client, names, [], builtin_drivers(data_dir=str(tmp_path)), heartbeat_s=3600.0
    )
    agent.start()
    halt = run_in_thread(agent)
    try:
        node = Node(id="n9", name="n9", drivers={"mock": DriverInfo()}).with_computed_class()
        agent.host([node])
        started = time.monotonic()
        gc = dataclasses.replace(command(NodeCommandKind.GC), node_id="n9")
        reply = send_command(client, names, gc, 10)
        assert reply is not None and reply.ok and reply.collected == ()
        assert time.monotonic() - started < 4.0  # not after the reader's 5 s block
    finally:
        halt()
