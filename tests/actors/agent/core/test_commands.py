"""Node commands carried out by the client core: Nomad's signal and client GC rules, with a
fake clock and drivers that record what they were asked."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from actors.agent.core import ClientCore, DriverError, MockDriver, RawExecDriver, TaskHandle
from actors.agent.core.commands import run_command
from actors.agent.core.drivers import MockHandle
from contracts import Allocation, ClientStatus, DesiredStatus, Job, Task, TaskGroup
from contracts.node_commands import (
    NOT_ELIGIBLE_FOR_GC,
    NodeCommand,
    NodeCommandKind,
    ReplyError,
)


class Refusing(MockDriver):
    """A driver whose tasks cannot be signalled (a driver without signals, as Nomad has)."""

    @property
    def name(self) -> str:
        return "refusing"

    def signal(self, handle: TaskHandle, signal: str) -> None:
        raise DriverError("This driver does not support signals")


class Collecting(MockDriver):
    def __init__(self) -> None:
        super().__init__()
        self.collected: list[str] = []

    def collect(self, alloc_id: str) -> None:
        self.collected.append(alloc_id)


def job(*tasks: Task) -> Job:
    return Job(id="web", task_groups=(TaskGroup("g", tasks=tasks),))


def placed(alloc_id: str = "a1", **changes: object) -> Allocation:
    base = Allocation(id=alloc_id, node_id="n1", job_id="web", task_group="g")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def running_core(*tasks: Task, drivers: Mapping[str, MockDriver] | None = None) -> ClientCore:
    core = ClientCore(["n1"], drivers or {"mock": MockDriver()}, lambda: 100.0)
    the_job = job(*tasks)
    core.apply_allocs([placed()], lambda ns, job_id, version: the_job)
    core.tick(100.0)
    assert core.status("a1") is ClientStatus.RUNNING
    return core


def signal(alloc_id: str = "a1", task: str = "", name: str = "SIGUSR1") -> NodeCommand:
    return NodeCommand(
        NodeCommandKind.SIGNAL, "c1", "n1", alloc_id=alloc_id, task=task, signal=name
    )


def handle_of(core: ClientCore, task: str) -> MockHandle:
    runner = core.runner("n1", "a1")
    assert runner is not None
    handle = runner._handles[task][1]
    assert isinstance(handle, MockHandle)
    return handle


def test_a_signal_reaches_every_task_and_each_gets_a_signaling_event() -> None:
    core = running_core(Task("web", "mock"), Task("log", "mock"))
    outcome = run_command(core, signal(name="sigusr1"), 101.5)
    assert outcome.reply.ok and outcome.reply.command_id == "c1"
    assert handle_of(core, "web").signals == handle_of(core, "log").signals == ["SIGUSR1"]
    assert [(e.task, e.type, e.time) for e in outcome.events] == [
        ("web", "Signaling", 101_500_000_000),
        ("log", "Signaling", 101_500_000_000),
    ]
    assert outcome.events[0].display_message == "Task being sent signal SIGUSR1"
    assert outcome.events[0].details == {"signal": "SIGUSR1"}


def test_a_signal_to_one_task_reaches_only_it() -> None:
    core = running_core(Task("web", "mock"), Task("log", "mock"))
    outcome = run_command(core, signal(task="log", name="SIGHUP"), 101.0)
    assert outcome.reply.ok and [e.task for e in outcome.events] == ["log"]
    assert handle_of(core, "web").signals == [] and handle_of(core, "log").signals == ["SIGHUP"]


def test_what_nomad_refuses_is_refused_with_its_words() -> None:
    core = running_core(Task("web", "mock"))
    bad = run_command(core, signal(name="INVALID-SIGNAL"), 101.0)
    assert bad.reply.error_kind is ReplyError.INVALID and bad.events == ()
    assert bad.reply.error.startswith("invalid signal 'INVALID-SIGNAL' - valid signals are [")
    unknown = run_command(core, signal(task="nope"), 101.0)
    assert (unknown.reply.error, unknown.reply.error_kind) == ("Task not found", ReplyError.INVALID)
    missing = run_command(core, signal(alloc_id="zz"), 101.0)
    assert missing.reply.error == 'Unknown allocation "zz"'
    assert missing.reply.error_kind is ReplyError.NOT_FOUND
    elsewhere = dataclasses.replace(signal(), node_id="n2")  # not on the node it was sent to
    assert run_command(core, elsewhere, 101.0).reply.error_kind is ReplyError.NOT_FOUND
    assert handle_of(core, "web").signals == []


def test_a_driver_that_cannot_signal_fails_that_task_and_the_others_still_get_it() -> None:
    drivers = {"mock": MockDriver(), "refusing": Refusing()}
    core = running_core(Task("web", "mock"), Task("odd", "refusing"), drivers=drivers)
    outcome = run_command(core, signal(), 101.0)
    assert outcome.reply.error_kind is ReplyError.FAILED
    assert outcome.reply.error == (
        "Failed to signal task: odd, err: This driver does not support signals"
    )
    assert handle_of(core, "web").signals == ["SIGUSR1"]
    assert [e.task for e in outcome.events] == ["web", "odd"]  # recorded before it was sent


def test_a_finished_allocation_has_no_running_task_to_signal() -> None:
    core = running_core(Task("web", "mock"))
    the_job = job(Task("web", "mock"))
    core.apply_allocs([placed(desired_status=DesiredStatus.STOP)], lambda *_: the_job)
    core.tick(102.0)
    core.tick(102.0)
    assert core.status("a1") is ClientStatus.COMPLETE
    outcome = run_command(core, signal(task="web"), 103.0)
    assert (outcome.reply.error, outcome.events) == ("Task not running", ())


def test_gc_collects_only_what_no_longer_runs() -> None:
    driver = Collecting()
    core = running_core(Task("web", "mock"), drivers={"mock": driver})
    gc = NodeCommand(NodeCommandKind.GC_ALLOC, "c2", "n1", alloc_id="a1")
    refused = run_command(core, gc, 101.0)
    assert (refused.reply.error, refused.reply.error_kind) == (
        NOT_ELIGIBLE_FOR_GC,
        ReplyError.INVALID,
    )
    assert driver.collected == []
    the_job = job(Task("web", "mock"))
    stopped = placed(desired_status=DesiredStatus.STOP)
    core.apply_allocs([stopped], lambda *_: the_job)
    core.tick(102.0)
    core.tick(102.0)
    # Its final report is committed (the record says so): collecting forgets the runner too.
    committed = dataclasses.replace(stopped, client_status=ClientStatus.COMPLETE)
    core.apply_allocs([committed], lambda *_: the_job)
    assert run_command(core, gc, 103.0).reply.collected == ("a1",)
    assert driver.collected == ["a1"] and core.runner("n1", "a1") is None
    everything = NodeCommand(
        NodeCommandKind.GC, "c3", "n1", alloc_ids=("gone-already", "..", "a/b", "a1")
    )
    reply = run_command(core, everything, 104.0).reply
    assert reply.ok and reply.collected == ("gone-already", "a1")
    assert driver.collected == ["a1", "gone-already", "a1"]


def test_raw_exec_collect_removes_the_allocation_folder(tmp_path: Path) -> None:
    raw = RawExecDriver(enabled=True, data_dir=tmp_path)
    local = raw.local_dir("a1", "t")
    assert local == tmp_path / "a1" / "t" / "local" and local.is_dir()
    (tmp_path / "a2").mkdir()
    raw.collect("a1")
    assert not (tmp_path / "a1").exists() and (tmp_path / "a2").exists()
    raw.collect("a1")  # nothing left: no error
