"""AllocRunner: the client status of one allocation, driven by a fake clock."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from actors.agent.core import (
    COMPLETE_DESCRIPTION,
    RUNNING_DESCRIPTION,
    STOPPED_DESCRIPTION,
    AllocRunner,
    Driver,
    MockDriver,
    RawExecDriver,
    TaskHandle,
    TaskState,
    TaskStatus,
    task_env,
)
from actors.agent.core.drivers import MockHandle
from actors.agent.core.runner import PENDING_DESCRIPTION
from contracts import (
    AllocatedDevice,
    AllocatedResources,
    Allocation,
    ClientStatus,
    DesiredStatus,
    Job,
    Task,
    TaskGroup,
)
from contracts.state_log import AllocClientUpdate


class RecordingMock(MockDriver):
    """The mock driver, remembering what it was asked to do."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[tuple[str, str, dict[str, str], float]] = []
        self.stopped: list[str] = []

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> MockHandle:
        handle = super().start(alloc_id, task, env, now)
        self.started.append((alloc_id, task.name, dict(env), now))
        return handle

    def stop(self, handle: TaskHandle, now: float) -> None:
        self.stopped.append(handle.task_name)
        super().stop(handle, now)


def mock(name: str = "t", **config: Any) -> Task:
    return Task(name=name, driver="mock", config=config)


def make_job(*tasks: Task, version: int = 0) -> Job:
    group = TaskGroup(name="g", tasks=tasks)
    return Job(id="web", name="web", task_groups=(group,), version=version, meta={"team": "a"})


def make_alloc(**changes: Any) -> Allocation:
    base = Allocation(
        id="a1", name="web.g[0]", node_id="n1", node_name="node-1", job_id="web", task_group="g"
    )
    return dataclasses.replace(base, **changes)


def runner(
    *tasks: Task, alloc: Allocation | None = None, drivers: Mapping[str, Driver] | None = None
) -> AllocRunner:
    return AllocRunner(alloc or make_alloc(), make_job(*tasks), drivers or {"mock": MockDriver()})


def update(status: ClientStatus, description: str, now: float) -> AllocClientUpdate:
    return AllocClientUpdate("a1", status, description, int(now * 1e9), "n1")


def test_pending_running_complete() -> None:
    r = runner(mock(run_for="10s"))
    assert r.status is ClientStatus.PENDING
    assert r.step(100.0) == update(ClientStatus.RUNNING, RUNNING_DESCRIPTION, 100.0)
    assert r.next_wake(100.0) == 110.0
    assert r.step(105.0) is None
    assert r.step(110.0) == update(ClientStatus.COMPLETE, COMPLETE_DESCRIPTION, 110.0)
    assert r.finished and r.next_wake(110.0) is None
    assert r.step(120.0) is None


def test_a_task_is_not_polled_before_its_wake_time() -> None:
    class CountingMock(MockDriver):
        polls = 0

        def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
            self.polls += 1
            return super().poll(handle, now)

    d = CountingMock()
    r = runner(mock("a", run_for="10s"), mock("b"), drivers={"mock": d})
    r.step(0.0)
    assert d.polls == 0  # just started: neither can have changed (wake_at 10 and never)
    assert r.step(5.0) is None and d.polls == 0
    assert r.step(10.0) is None and d.polls == 1  # "a" completes; "b" runs on
    assert r.status is ClientStatus.RUNNING


def test_zero_run_for_reports_only_the_final_status() -> None:
    r = runner(mock(run_for=0))
    assert r.step(1.0) == update(ClientStatus.COMPLETE, COMPLETE_DESCRIPTION, 1.0)


def test_alloc_completes_when_all_tasks_complete() -> None:
    r = runner(mock("a", run_for="5s"), mock("b", run_for="20s"))
    r.step(0.0)
    assert r.step(5.0) is None and r.status is ClientStatus.RUNNING
    assert r.next_wake(5.0) == 20.0
    assert r.step(20.0) == update(ClientStatus.COMPLETE, COMPLETE_DESCRIPTION, 20.0)


def test_a_failed_task_fails_the_alloc_and_stops_its_siblings() -> None:
    d = RecordingMock()
    r = runner(mock("ok"), mock("bad", run_for="3s", exit_code=2), drivers={"mock": d})
    r.step(0.0)
    assert r.step(3.0) == update(ClientStatus.FAILED, 'task "bad" failed: exited with code 2', 3.0)
    assert d.stopped == ["ok"]
    assert r.step(4.0) is None and r.finished


def test_desired_stop_stops_tasks_and_reports_complete() -> None:
    d = RecordingMock()
    r = runner(mock(), alloc=make_alloc(), drivers={"mock": d})
    r.step(0.0)
    assert r.next_wake(0.0) is None  # runs forever: nothing to do until a new record
    assert r.update(make_alloc(desired_status=DesiredStatus.STOP))
    assert r.step(7.0) == update(ClientStatus.COMPLETE, STOPPED_DESCRIPTION, 7.0)
    assert d.stopped == ["t"] and r.finished


def test_evict_is_a_stop_too() -> None:
    r = runner(mock())
    r.step(0.0)
    r.update(make_alloc(desired_status=DesiredStatus.EVICT))
    assert r.step(1.0) == update(ClientStatus.COMPLETE, STOPPED_DESCRIPTION, 1.0)


def test_stop_before_start_never_starts() -> None:
    d = RecordingMock()
    r = runner(mock(), alloc=make_alloc(desired_status=DesiredStatus.STOP), drivers={"mock": d})
    assert r.step(0.0) == update(ClientStatus.COMPLETE, STOPPED_DESCRIPTION, 0.0)
    assert d.started == []


def test_a_stop_after_failure_keeps_the_failure() -> None:
    r = runner(mock(run_for="1s", exit_code=1))
    r.step(0.0)
    r.step(1.0)
    assert not r.update(make_alloc(desired_status=DesiredStatus.STOP))
    assert r.step(2.0) is None and r.status is ClientStatus.FAILED


def test_same_record_twice_changes_nothing() -> None:
    d = RecordingMock()
    alloc = make_alloc()
    r = runner(mock(), alloc=alloc, drivers={"mock": d})
    r.step(0.0)
    assert not r.update(alloc)
    assert not r.update(dataclasses.replace(alloc, client_status=ClientStatus.RUNNING))
    assert r.step(1.0) is None
    assert len(d.started) == 1


def test_start_error_fails_with_its_message() -> None:
    r = runner(mock(start_error="out of sockets"))
    assert r.step(0.0) == update(
        ClientStatus.FAILED, 'task "t": failed to start: out of sockets', 0.0
    )
    assert r.finished


def test_start_error_of_a_later_task_stops_the_started_ones() -> None:
    d = RecordingMock()
    r = runner(mock("first"), mock("second", start_error="boom"), drivers={"mock": d})
    out = r.step(0.0)
    assert out is not None and out.client_description == 'task "second": failed to start: boom'
    assert d.stopped == ["first"] and r.finished


class Exploding(MockDriver):
    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> MockHandle:
        raise RuntimeError("driver bug")


def test_an_unexpected_driver_exception_fails_only_this_alloc() -> None:
    r = runner(mock(), drivers={"mock": Exploding()})
    out = r.step(0.0)
    assert out is not None and out.client_status is ClientStatus.FAILED
    assert out.client_description == 'task "t": failed to start: driver bug'


def test_bad_input_fails_with_a_message_naming_task_and_problem(tmp_path: Path) -> None:
    drivers: dict[str, Driver] = {
        "mock": MockDriver(),
        "raw_exec": RawExecDriver(enabled=True, data_dir=tmp_path),
    }
    tasks = (
        mock("m", run_for="forever"),
        Task(name="d", driver="docker"),
        Task(name="x", driver="raw_exec", config={"args": ["1"]}),
        Task(name="n"),
    )
    r = runner(*tasks, drivers=drivers)
    out = r.step(0.0)
    assert out is not None and out.client_status is ClientStatus.FAILED
    assert out.client_description == "; ".join(
        [
            "task \"m\": mock: run_for: invalid duration 'forever'",
            'task "d": unknown driver "docker"',
            'task "x": raw_exec: missing required config "command"',
            'task "n": no driver set',
        ]
    )
    assert list(tmp_path.iterdir()) == []  # nothing was started


def test_disabled_raw_exec_fails_the_alloc(tmp_path: Path) -> None:
    drivers = {"raw_exec": RawExecDriver(enabled=False, data_dir=tmp_path)}
    task = Task(name="t", driver="raw_exec", config={"command": "/bin/true"})
    out = runner(task, drivers=drivers).step(0.0)
    assert out == update(
        ClientStatus.FAILED,
        'task "t": failed to start: raw_exec driver is disabled on this agent',
        0.0,
    )


def test_missing_job_or_group_fails() -> None:
    out = AllocRunner(make_alloc(job_version=3), None, {"mock": MockDriver()}).step(0.0)
    assert out is not None and out.client_description == 'job "web" version 3 not found'
    out = runner(mock(), alloc=make_alloc(task_group="db")).step(0.0)
    assert out is not None
    assert out.client_description == 'task group "db" not found in job "web"'
    out = runner().step(0.0)
    assert out is not None and out.client_description == 'task group "g" has no tasks'


def test_task_environment() -> None:
    d = RecordingMock()
    gpus = AllocatedResources(devices=(AllocatedDevice("nvidia", "gpu", "H100", ("g0", "g1")),))
    task = Task(name="t", driver="mock", env={"PORT": "8080", "DROVER_NODE_NAME": "mine"})
    r = runner(task, alloc=make_alloc(allocated_resources=gpus), drivers={"mock": d})
    r.step(0.0)
    ((_, _, env, _),) = d.started
    assert env["DROVER_ALLOC_ID"] == "a1"
    assert env["DROVER_ALLOC_INDEX"] == "0"
    assert env["DROVER_JOB_ID"] == "web"
    assert env["DROVER_GROUP_NAME"] == "g"
    assert env["DROVER_TASK_NAME"] == "t"
    assert env["DROVER_NODE_ID"] == "n1"
    assert env["DROVER_META_team"] == "a"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "g0,g1"
    assert env["PORT"] == "8080"
    assert env["DROVER_NODE_NAME"] == "mine"  # the task's env wins, as in Nomad


@pytest.mark.parametrize(
    ("device_ids", "visible"),
    [
        (("GPU-6b1d9c1a-0c5e-4c44-9c8e-2f7f7d4a1b2c",), "GPU-6b1d9c1a-0c5e-4c44-9c8e-2f7f7d4a1b2c"),
        (("0ca82a05-gpu0", "0ca82a05-gpu3"), "0,3"),  # Ray's GPUs: by position on the node
    ],
)
def test_nvidia_visible_devices_name_gpus_as_the_container_runtime_takes_them(
    device_ids: tuple[str, ...], visible: str
) -> None:
    d = RecordingMock()
    gpus = AllocatedResources(devices=(AllocatedDevice("nvidia", "gpu", "H200", device_ids),))
    task = Task(name="t", driver="mock")
    runner(task, alloc=make_alloc(allocated_resources=gpus), drivers={"mock": d}).step(0.0)
    ((_, _, env, _),) = d.started
    assert env["NVIDIA_VISIBLE_DEVICES"] == visible


def test_terminal_record_is_never_started() -> None:
    for status in (ClientStatus.COMPLETE, ClientStatus.FAILED, ClientStatus.LOST):
        d = RecordingMock()
        r = runner(mock(), alloc=make_alloc(client_status=status), drivers={"mock": d})
        assert r.finished and r.acknowledged
        assert r.step(0.0) is None and d.started == []


def test_running_record_restarts_quietly_with_a_fresh_timer() -> None:
    d = RecordingMock()
    alloc = make_alloc(client_status=ClientStatus.RUNNING, client_description=RUNNING_DESCRIPTION)
    r = runner(mock(run_for="10s"), alloc=alloc, drivers={"mock": d})
    assert r.step(500.0) is None  # the server already believes it runs
    assert [s[3] for s in d.started] == [500.0]
    assert r.next_wake(500.0) == 510.0
    assert r.step(510.0) == update(ClientStatus.COMPLETE, COMPLETE_DESCRIPTION, 510.0)


def test_server_marked_lost_stops_tasks_without_reporting() -> None:
    d = RecordingMock()
    r = runner(mock(), drivers={"mock": d})
    r.step(0.0)
    assert r.update(make_alloc(client_status=ClientStatus.LOST, client_description="node down"))
    assert r.step(1.0) is None
    assert d.stopped == ["t"]
    assert (r.status, r.description) == (ClientStatus.LOST, "node down") and r.acknowledged


def test_acknowledged_only_once_the_record_shows_the_final_status() -> None:
    r = runner(mock(run_for=1))
    r.step(0.0)
    r.step(1.0)
    assert r.finished and not r.acknowledged
    r.update(make_alloc(client_status=ClientStatus.COMPLETE))
    assert r.acknowledged


class SlowStop(MockDriver):
    """A task that takes until t=50 to exit once stopped; polled on every tick."""

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> MockHandle:
        handle = super().start(alloc_id, task, env, now)
        handle.wake_at = None
        return handle

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
        assert isinstance(handle, MockHandle)
        if handle.stopped and now < 50.0:
            return TaskStatus(TaskState.RUNNING)
        return super().poll(handle, now)


def test_stopping_waits_for_the_tasks_to_exit() -> None:
    r = runner(mock(), drivers={"mock": SlowStop()})
    r.step(0.0)
    assert r.next_wake(0.0) == 0.0  # unpredictable task: poll on every tick
    r.update(make_alloc(desired_status=DesiredStatus.STOP))
    assert r.step(10.0) is None and r.status is ClientStatus.RUNNING
    assert r.next_wake(10.0) == 10.0
    assert r.step(50.0) == update(ClientStatus.COMPLETE, STOPPED_DESCRIPTION, 50.0)


def test_a_job_versions_tasks_are_validated_once_and_envs_built_only_when_read() -> None:
    class Counting(MockDriver):
        def __init__(self) -> None:
            self.validated = 0
            self.envs: list[Mapping[str, str]] = []

        def validate(self, task: Task) -> list[str]:
            self.validated += 1
            return super().validate(task)

        def start(
            self, alloc_id: str, task: Task, env: Mapping[str, str], now: float
        ) -> MockHandle:
            self.envs.append(env)
            return super().start(alloc_id, task, env, now)

    driver = Counting()
    job = make_job(mock())
    for i in range(5):
        alloc = make_alloc(id=f"a{i}", name=f"web.g[{i}]")
        out = AllocRunner(alloc, job, {"mock": driver}).step(0.0)
        assert out is not None and out.client_status is ClientStatus.RUNNING
    assert driver.validated == 1  # the same Task record: one verdict
    # A bad config is still reported, for every allocation of it.
    bad = make_job(mock(bogus=1))
    for i in range(2):
        out = AllocRunner(make_alloc(id=f"b{i}"), bad, {"mock": driver}).step(0.0)
        assert out is not None and 'unknown config key "bogus"' in out.client_description
    # The environment is complete when a driver reads it.
    env = driver.envs[3]
    assert env["DROVER_ALLOC_ID"] == "a3" and env["DROVER_ALLOC_INDEX"] == "3"
    assert dict(env) == task_env(
        make_alloc(id="a3", name="web.g[3]"), job, job.task_groups[0], mock()
    )


class QueuedDriver:
    """Tasks that start pending, as Ray queues them: the test says when each starts and ends."""

    name = "queued"

    def __init__(self) -> None:
        self.states: dict[str, TaskState] = {}
        self.stopped: list[str] = []
        self.polls = 0

    def validate(self, task: Task) -> list[str]:
        return []

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> TaskHandle:
        self.states[task.name] = TaskState.PENDING
        # wake_at says "nothing before a stop": a pending task is polled on every tick anyway.
        return TaskHandle(alloc_id, task.name, self.name, now, wake_at=math.inf, pending=True)

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
        self.polls += 1
        state = self.states[handle.task_name]
        return TaskStatus(state, 1 if state is TaskState.FAILED else None, "boom")

    def stop(self, handle: TaskHandle, now: float) -> None:
        self.stopped.append(handle.task_name)  # gone once the test says so, as Ray confirms


def queued(name: str = "q") -> Task:
    return Task(name=name, driver="queued")


def with_queue(*tasks: Task, alloc: Allocation | None = None) -> tuple[AllocRunner, QueuedDriver]:
    d = QueuedDriver()
    return runner(*tasks, alloc=alloc, drivers={"mock": MockDriver(), "queued": d}), d


def test_an_alloc_stays_pending_until_its_task_really_starts() -> None:
    r, d = with_queue(queued())
    assert r.step(0.0) == update(ClientStatus.PENDING, PENDING_DESCRIPTION, 0.0)
    for now in (1.0, 2.0, 3.0):
        assert r.next_wake(now - 1.0) == now - 1.0  # polled on every tick while queued
        assert r.step(now) is None and r.status is ClientStatus.PENDING
    assert d.polls == 4  # the step that started it polled it too
    d.states["q"] = TaskState.RUNNING
    assert r.step(4.0) == update(ClientStatus.RUNNING, RUNNING_DESCRIPTION, 4.0)
    assert r.next_wake(4.0) is None  # running now: its wake_at holds (nothing until a stop)
    assert r.step(5.0) is None and d.polls == 5


def test_one_running_task_makes_the_alloc_running() -> None:
    r, _ = with_queue(mock("m"), queued())
    assert r.step(0.0) == update(ClientStatus.RUNNING, RUNNING_DESCRIPTION, 0.0)
    assert r.next_wake(0.0) == 0.0  # the queued one is still watched


def test_pending_again_when_only_queued_tasks_are_left() -> None:
    # Nomad's getClientStatus: a task that completed and one still pending make it pending.
    r, d = with_queue(mock("m", run_for="1s"), queued())
    r.step(0.0)
    assert r.step(1.0) == update(ClientStatus.PENDING, PENDING_DESCRIPTION, 1.0)
    d.states["q"] = TaskState.RUNNING
    assert r.step(2.0) == update(ClientStatus.RUNNING, RUNNING_DESCRIPTION, 2.0)


def test_a_task_that_fails_before_it_starts_fails_the_alloc() -> None:
    r, d = with_queue(queued("a"), queued("b"))
    r.step(0.0)
    d.states["a"] = TaskState.FAILED
    assert r.step(1.0) == update(ClientStatus.FAILED, 'task "a" failed: boom', 1.0)
    assert d.stopped == ["b"] and not r.finished  # until "b" is gone
    d.states["b"] = TaskState.COMPLETE
    assert r.step(2.0) is None and r.finished


def test_a_stop_while_pending_waits_until_the_queued_task_is_gone() -> None:
    r, d = with_queue(queued())
    r.step(0.0)
    assert r.update(make_alloc(desired_status=DesiredStatus.STOP))
    assert r.step(1.0) is None and d.stopped == ["q"]
    assert r.status is ClientStatus.PENDING and r.next_wake(1.0) == 1.0
    d.states["q"] = TaskState.COMPLETE
    assert r.step(2.0) == update(ClientStatus.COMPLETE, STOPPED_DESCRIPTION, 2.0)
    assert r.finished


def test_a_running_record_restarted_as_a_queued_task_says_pending() -> None:
    alloc = make_alloc(client_status=ClientStatus.RUNNING, client_description=RUNNING_DESCRIPTION)
    r, d = with_queue(queued(), alloc=alloc)
    assert r.step(0.0) == update(ClientStatus.PENDING, PENDING_DESCRIPTION, 0.0)
    d.states["q"] = TaskState.RUNNING
    assert r.step(1.0) == update(ClientStatus.RUNNING, RUNNING_DESCRIPTION, 1.0)
