"""ClientCore: many nodes' allocations on one agent, fed records, ticked by a fake clock."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from actors.agent.core import (
    RUNNING_DESCRIPTION,
    STOPPED_DESCRIPTION,
    ClientCore,
    Driver,
    MockDriver,
    RawExecDriver,
    TaskHandle,
    TaskStatus,
)
from actors.agent.core.drivers import MockHandle
from contracts import Allocation, ClientStatus, DesiredStatus, Job, Task, TaskGroup
from contracts.state_log import AllocClientUpdate


class CountingMock(MockDriver):
    def __init__(self) -> None:
        super().__init__()
        self.starts = 0
        self.polls = 0

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> MockHandle:
        self.starts += 1
        return super().start(alloc_id, task, env, now)

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
        self.polls += 1
        return super().poll(handle, now)


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def job(job_id: str = "web", version: int = 0, **config: Any) -> Job:
    task = Task(name="t", driver="mock", config=config)
    return Job(id=job_id, version=version, task_groups=(TaskGroup(name="g", tasks=(task,)),))


def alloc(alloc_id: str, node_id: str = "n1", job_id: str = "web", **changes: Any) -> Allocation:
    base = Allocation(id=alloc_id, node_id=node_id, job_id=job_id, task_group="g")
    return dataclasses.replace(base, **changes)


def lookup(*jobs: Job) -> Callable[[str, str, int], Job | None]:
    table = {(j.namespace, j.id, j.version): j for j in jobs}
    return lambda ns, job_id, version: table.get((ns, job_id, version))


def core(*nodes: str, driver: Driver | None = None, clock: Clock | None = None) -> ClientCore:
    d = driver or MockDriver()
    return ClientCore(nodes or ("n1",), {d.name: d}, clock or Clock())


def statuses(updates: list[AllocClientUpdate]) -> dict[str, ClientStatus]:
    return {u.alloc_id: u.client_status for u in updates}


def test_runs_only_its_own_nodes_allocs_in_batches() -> None:
    c = core("n1", "n2")
    c.apply_allocs(
        [alloc("a1", "n1"), alloc("a2", "n2"), alloc("x", "elsewhere")], lookup(job(run_for="10s"))
    )
    assert len(c) == 2 and c.status("x") is None
    first = c.tick(0.0)
    assert statuses(first) == {"a1": ClientStatus.RUNNING, "a2": ClientStatus.RUNNING}
    assert first[0] == AllocClientUpdate("a1", ClientStatus.RUNNING, RUNNING_DESCRIPTION, 0, "n1")
    assert c.running_count() == 2
    assert c.tick(5.0) == []
    assert statuses(c.tick(10.0)) == {"a1": ClientStatus.COMPLETE, "a2": ClientStatus.COMPLETE}
    assert c.running_count() == 0


def test_tick_defaults_to_the_clock() -> None:
    clock = Clock(42.0)
    c = core(clock=clock)
    c.apply_allocs([alloc("a1")], lookup(job()))
    (u,) = c.tick()
    assert u.modify_time == 42 * 10**9


def test_job_lookup_uses_the_allocs_version_and_skips_terminal_allocs() -> None:
    asked: list[tuple[str, str, int]] = []

    def jobs(ns: str, job_id: str, version: int) -> Job | None:
        asked.append((ns, job_id, version))
        return job(version=version)

    c = core()
    c.apply_allocs(
        [
            alloc("a1", job_version=4),
            alloc("a2", client_status=ClientStatus.COMPLETE),
            alloc("a3", desired_status=DesiredStatus.STOP),
        ],
        jobs,
    )
    assert asked == [("default", "web", 4)]
    assert statuses(c.tick(0.0)) == {"a1": ClientStatus.RUNNING, "a3": ClientStatus.COMPLETE}


def test_missing_job_fails_the_alloc() -> None:
    c = core()
    c.apply_allocs([alloc("a1", job_version=9)], lookup(job()))
    (u,) = c.tick(0.0)
    assert (u.client_status, u.client_description) == (
        ClientStatus.FAILED,
        'job "web" version 9 not found',
    )


def test_idle_tasks_are_not_polled_every_tick() -> None:
    d = CountingMock()
    c = core(driver=d)
    c.apply_allocs(
        [alloc("forever"), alloc("timed", job_id="batch")],
        lookup(job(), job("batch", run_for="1m")),
    )
    c.tick(0.0)
    polls = d.polls
    for t in range(1, 60):
        assert c.tick(float(t)) == []
    assert d.polls == polls  # nothing was due before the timed task's deadline
    assert statuses(c.tick(60.0)) == {"timed": ClientStatus.COMPLETE}
    assert d.polls == polls + 1


def test_desired_stop_from_a_new_record() -> None:
    c = core()
    c.apply_allocs([alloc("a1")], lookup(job()))
    c.tick(0.0)
    c.apply_allocs([alloc("a1", desired_status=DesiredStatus.STOP)], lookup())
    assert c.tick(1.0) == [
        AllocClientUpdate("a1", ClientStatus.COMPLETE, STOPPED_DESCRIPTION, 10**9, "n1")
    ]


def test_reapplying_the_same_records_is_idempotent() -> None:
    d = CountingMock()
    c = core(driver=d)
    records = [alloc("a1"), alloc("a2")]
    c.apply_allocs(records, lookup(job()))
    c.tick(0.0)
    c.apply_allocs(records, lookup(job()))
    assert c.tick(1.0) == [] and d.starts == 2


def test_forget_terminal_waits_for_the_record_to_show_the_final_status() -> None:
    d = CountingMock()
    c = core(driver=d)
    c.apply_allocs([alloc("a1")], lookup(job(run_for="1s")))
    c.tick(0.0)
    c.tick(1.0)
    assert c.forget_terminal() == 0  # the report may still be in flight
    stale = alloc("a1", client_status=ClientStatus.RUNNING)
    c.apply_allocs([stale], lookup(job(run_for="1s")))
    assert c.tick(2.0) == [] and d.starts == 1  # a stale record does not restart it
    c.apply_allocs([alloc("a1", client_status=ClientStatus.COMPLETE)], lookup())
    assert c.forget_terminal() == 1 and len(c) == 0


def test_acknowledge_lets_a_shell_confirm_reports_without_records() -> None:
    c = core()
    c.apply_allocs([alloc("a1"), alloc("a2")], lookup(job(run_for="1s")))
    c.tick(0.0)
    c.acknowledge(["a1", "a2", "unknown"])  # running reports: nothing to forget yet
    c.tick(1.0)
    assert c.forget_terminal() == 0
    c.acknowledge(["a1"])
    assert c.forget_terminal() == 1 and c.status("a2") is ClientStatus.COMPLETE


def test_restart_does_not_rerun_terminal_allocs_and_reruns_running_ones() -> None:
    records = [
        alloc("done", client_status=ClientStatus.COMPLETE),
        alloc("failed", client_status=ClientStatus.FAILED),
        alloc("lost", client_status=ClientStatus.LOST),
        alloc("run", client_status=ClientStatus.RUNNING, client_description=RUNNING_DESCRIPTION),
        alloc("new"),
    ]
    d = CountingMock()
    c = core(driver=d)  # a fresh agent after a crash, replaying the state log
    c.apply_allocs(records, lookup(job(run_for="10s")))
    assert statuses(c.tick(500.0)) == {"new": ClientStatus.RUNNING}
    assert d.starts == 2 and c.running_count() == 2
    # The restarted mock timer counts from the restart, not from the original start.
    assert statuses(c.tick(510.0)) == {"run": ClientStatus.COMPLETE, "new": ClientStatus.COMPLETE}
    assert c.forget_terminal() == 3  # the three terminal records are acknowledged already


def test_drop_node_stops_its_tasks_silently() -> None:
    d = CountingMock()
    c = core("n1", "n2", driver=d)
    assert c.node_ids == {"n1", "n2"}
    c.apply_allocs([alloc("a1", "n1"), alloc("a2", "n2")], lookup(job()))
    c.tick(0.0)
    assert c.drop_node("n1") == 1
    assert c.node_ids == {"n2"}
    c.add_node("n3")
    assert c.node_ids == {"n2", "n3"}
    c.drop_node("n3")
    assert c.tick(1.0) == []
    assert c.running_count() == 1
    c.apply_allocs([alloc("a3", "n1")], lookup(job()))
    assert c.status("a3") is None
    assert c.forget_terminal() == 1 and c.status("a1") is None
    assert c.drop_node("unknown") == 0


def test_thousands_of_virtual_nodes() -> None:
    """What lets one agent host thousands of nodes: a tick polls only the tasks that are due,
    so 30 ticks over 5,000 timed tasks poll each once, at its deadline (not 150,000 polls).
    How fast that is belongs to the benchmarks, not to a test."""
    d = CountingMock()
    nodes = [f"n{i}" for i in range(5000)]
    c = core(*nodes, driver=d)
    allocs = [alloc(f"a{i}", f"n{i}") for i in range(5000)]
    jobs = lookup(job(run_for="30s"))
    c.apply_allocs(allocs, jobs)
    assert len(c.tick(0.0)) == 5000
    polls = d.polls
    for t in range(1, 30):
        assert c.tick(float(t)) == []
    assert d.polls == polls
    done = c.tick(30.0)
    assert len(done) == 5000 and all(u.client_status is ClientStatus.COMPLETE for u in done)
    assert d.starts == 5000 and d.polls == polls + 5000


def test_raw_exec_allocs_end_to_end(tmp_path: Path) -> None:
    d = RawExecDriver(enabled=True, data_dir=tmp_path)
    c = ClientCore(["n1"], {"raw_exec": d}, Clock())

    def exec_job(job_id: str, *argv: str) -> Job:
        task = Task(
            name="t",
            driver="raw_exec",
            config={"command": argv[0], "args": list(argv[1:])},
            kill_timeout_s=1.0,
        )
        return Job(id=job_id, task_groups=(TaskGroup(name="g", tasks=(task,)),))

    jobs = lookup(exec_job("fails", "/bin/sh", "-c", "exit 3"), exec_job("sleeps", "sleep", "30"))
    c.apply_allocs([alloc("f", job_id="fails"), alloc("s", job_id="sleeps")], jobs)
    seen: dict[str, AllocClientUpdate] = {}

    def tick_until(alloc_id: str, status: ClientStatus) -> AllocClientUpdate:
        deadline = time.monotonic() + 30  # real processes: generous on a loaded machine
        while alloc_id not in seen or seen[alloc_id].client_status is not status:
            assert time.monotonic() < deadline, f"{alloc_id} never became {status}"
            seen.update({u.alloc_id: u for u in c.tick(time.monotonic())})
            time.sleep(0.01)
        return seen[alloc_id]

    failed = tick_until("f", ClientStatus.FAILED)
    assert failed.client_description == 'task "t" failed: exited with code 3'
    assert seen["s"].client_status is ClientStatus.RUNNING
    c.apply_allocs([alloc("s", job_id="sleeps", desired_status=DesiredStatus.STOP)], jobs)
    stopped = tick_until("s", ClientStatus.COMPLETE)
    assert stopped.client_description == STOPPED_DESCRIPTION
    assert c.running_count() == 0
