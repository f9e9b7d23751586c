"""The `ray` driver on a real local Ray (2 CPUs, no GPU, dashboard off, as drover runs it):
pending until Ray runs the task, running on the node its start marker names, failures with
the user's message, stops of running and of queued tasks."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import ray

from actors.agent.core import DriverError, TaskHandle, TaskState, TaskStatus
from actors.agent.ray_driver import PENDING_MESSAGE, RayDriver, RayHandle, failure_message
from contracts import DeviceRequest, Resources, Task

ROOT = str(Path(__file__).resolve().parents[3])
TASKS = "tests.actors.agent.ray_tasks"
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def node_id() -> Iterator[str]:
    # This module needs a node of known size: any Ray left running by another module goes.
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        address="local",  # our own: never a cluster another process left running
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": ROOT}},
    )
    yield ray.get_runtime_context().get_node_id()
    ray.shutdown()


class TrackedDriver(RayDriver):
    """The driver, remembering its tasks so that a test leaves none behind."""

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id)
        self.started: list[TaskHandle] = []

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> TaskHandle:
        handle = super().start(alloc_id, task, env, now)
        self.started.append(handle)
        return handle


@pytest.fixture
def driver(node_id: str) -> Iterator[RayDriver]:
    """A driver whose tasks are all stopped and gone when the test ends."""
    driver = TrackedDriver(node_id)
    yield driver
    for handle in driver.started:
        driver.stop(handle, time.time())
        wait_for(driver, handle, TaskState.COMPLETE, TaskState.FAILED)


def ray_task(
    entrypoint: str, *args: Any, cpu: int = 100, gpus: int = 0, name: str = "main"
) -> Task:
    devices = (DeviceRequest(name="nvidia/gpu", count=gpus),) if gpus else ()
    return Task(
        name=name,
        driver="ray",
        config={"entrypoint": entrypoint, "args": list(args)},
        resources=Resources(cpu=cpu, memory_mb=64, devices=devices),
    )


def start(driver: RayDriver, task: Task, alloc_id: str) -> RayHandle:
    handle = driver.start(alloc_id, task, {"DROVER_ALLOC_ID": alloc_id}, time.time())
    assert isinstance(handle, RayHandle) and handle.pending
    return handle


def wait_for(driver: RayDriver, handle: TaskHandle, *states: TaskState) -> TaskStatus:
    """Poll until the task reaches one of `states`; the states seen on the way must never go
    back (pending, then running, then exited)."""
    order = [TaskState.PENDING, TaskState.RUNNING, TaskState.COMPLETE, TaskState.FAILED]
    deadline = time.monotonic() + DEADLINE_S
    last = TaskState.PENDING
    while time.monotonic() < deadline:
        status = driver.poll(handle, time.time())
        assert order.index(status.state) >= min(order.index(last), 2), (last, status)
        last = status.state
        if status.state in states:
            return status
        time.sleep(0.05)
    raise AssertionError(f"task {handle.task_name} still {last} after {DEADLINE_S:.0f}s")


def wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + DEADLINE_S
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return path.read_text()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_task_runs_on_the_node_its_start_marker_names_and_a_stop_kills_it(
    driver: RayDriver, node_id: str, tmp_path: Path
) -> None:
    handle = start(driver, ray_task(f"{TASKS}:record_node", str(tmp_path), 600), "a-run")
    status = wait_for(driver, handle, TaskState.RUNNING)
    assert handle.ray_node == node_id and handle.pid is not None
    assert status.message == f"running as a Ray task on node {node_id} (pid {handle.pid})"
    assert wait_for_file(tmp_path / "a-run") == node_id  # the task's own word for it
    assert pid_alive(handle.pid)

    driver.stop(handle, time.time())
    status = wait_for(driver, handle, TaskState.COMPLETE, TaskState.FAILED)
    assert (status.state, status.exit_code, status.message) == (TaskState.COMPLETE, 0, "stopped")
    deadline = time.monotonic() + DEADLINE_S
    while pid_alive(handle.pid):  # force-cancelled: Ray kills the worker running it
        assert time.monotonic() < deadline, "the stopped task's worker still runs"
        time.sleep(0.05)


def test_a_task_that_returns_completes(driver: RayDriver, tmp_path: Path) -> None:
    handle = start(driver, ray_task(f"{TASKS}:record_node", str(tmp_path)), "a-done")
    status = wait_for(driver, handle, TaskState.COMPLETE, TaskState.FAILED)
    assert (status.state, status.exit_code) == (TaskState.COMPLETE, 0)
    assert status.message == "entrypoint returned"
    assert handle.ray_node is not None  # it did start: the marker came before the end
    assert driver.poll(handle, time.time()) == status  # polling an ended task is harmless


def test_a_task_queued_behind_others_stays_pending_until_they_leave(
    driver: RayDriver, node_id: str, tmp_path: Path
) -> None:
    def two_cpus(alloc_id: str) -> RayHandle:
        task = ray_task(f"{TASKS}:record_node", str(tmp_path), 600, cpu=2000)
        return start(driver, task, alloc_id)

    first = two_cpus("a-1")
    wait_for(driver, first, TaskState.RUNNING)
    second, third = two_cpus("a-2"), two_cpus("a-3")
    # The first holds both CPUs until it is stopped: the others cannot have started.
    for _ in range(20):
        for handle in (second, third):
            assert driver.poll(handle, time.time()) == TaskStatus(
                TaskState.PENDING, None, PENDING_MESSAGE
            )
    driver.stop(third, time.time())  # a stop of a queued task: Ray drops it
    status = wait_for(driver, third, TaskState.COMPLETE, TaskState.FAILED)
    assert (status.state, status.message) == (TaskState.COMPLETE, "stopped")
    assert driver.poll(second, time.time()).state is TaskState.PENDING

    driver.stop(first, time.time())
    assert wait_for(driver, first, TaskState.COMPLETE).message == "stopped"
    wait_for(driver, second, TaskState.RUNNING)
    assert second.ray_node == node_id
    assert wait_for_file(tmp_path / "a-2") == node_id
    assert third.ray_node is None and not (tmp_path / "a-3").exists()


def test_a_task_its_node_can_never_hold_fails_saying_so(driver: RayDriver, node_id: str) -> None:
    # Under hard node affinity Ray refuses it at once rather than queue it forever.
    for alloc_id, task, asks in (
        ("a-gpu", ray_task("time:sleep", 600, gpus=1), "0.1 CPU, 1 GPU"),
        ("a-cpu", ray_task("time:sleep", 600, cpu=3000), "3 CPU, 0 GPU"),
    ):
        handle = start(driver, task, alloc_id)
        status = wait_for(driver, handle, TaskState.COMPLETE, TaskState.FAILED)
        assert status == TaskStatus(
            TaskState.FAILED,
            1,
            f"Ray cannot run the task ({asks}) on node {node_id}:"
            " the node is gone or can never hold it",
        )
        assert handle.ray_node is None


def test_a_raising_entrypoint_fails_with_the_users_message(driver: RayDriver) -> None:
    handle = start(driver, ray_task(f"{TASKS}:fail", "disk on fire"), "a-fail")
    status = wait_for(driver, handle, TaskState.COMPLETE, TaskState.FAILED)
    assert (status.state, status.exit_code) == (TaskState.FAILED, 1)
    assert status.message == "ValueError: disk on fire"  # not Ray's page of traceback

    handle = start(driver, ray_task("no_such_module:main"), "a-missing")
    status = wait_for(driver, handle, TaskState.COMPLETE, TaskState.FAILED)
    assert status.state is TaskState.FAILED
    assert status.message == "ModuleNotFoundError: No module named 'no_such_module'"


def test_a_crashed_task_fails_and_is_not_run_again(driver: RayDriver, tmp_path: Path) -> None:
    # Retried, the second run would return and hide the crash behind a completion.
    handle = start(driver, ray_task(f"{TASKS}:crash_once", str(tmp_path / "ran")), "a-crash")
    status = wait_for(driver, handle, TaskState.COMPLETE, TaskState.FAILED)
    assert status.state is TaskState.FAILED
    assert status.message.startswith("WorkerCrashedError: The worker died unexpectedly")


def test_failure_message_reads_the_cause() -> None:
    assert failure_message(KeyError("x")) == "KeyError: 'x'"
    assert failure_message(ValueError()) == "ValueError"
    assert failure_message(RuntimeError("y" * 1000)) == f"RuntimeError: {'y' * 486}"


def test_a_running_task_reports_its_worker_process_use(driver: RayDriver, tmp_path: Path) -> None:
    """Read from the OS: the worker the start marker names. A spinning task uses clearly
    more CPU than a sleeping one (loose bounds: a busy machine); both hold memory."""
    busy = start(driver, ray_task(f"{TASKS}:spin", 600), "a-busy")
    idle = start(driver, ray_task(f"{TASKS}:record_node", str(tmp_path), 600), "a-idle")
    assert driver.usage(busy, time.time()) is None  # not running yet
    wait_for(driver, busy, TaskState.RUNNING)
    wait_for(driver, idle, TaskState.RUNNING)
    time.sleep(1.0)
    now = time.time()
    busy_use, idle_use = driver.usage(busy, now), driver.usage(idle, now)
    assert busy_use is not None and idle_use is not None
    assert busy_use[0] > 20 and busy_use[0] > 5 * idle_use[0]  # ordering: a loaded machine
    assert busy_use[1] > 10 and idle_use[1] > 10  # resident MB of a Python worker
    driver.stop(busy, time.time())
    wait_for(driver, busy, TaskState.COMPLETE, TaskState.FAILED)
    assert driver.usage(busy, time.time()) is None


def test_a_signal_reaches_the_running_tasks_worker_and_a_queued_task_is_not_running(
    driver: RayDriver, tmp_path: Path
) -> None:
    out = tmp_path / "signalled"
    handle = start(driver, ray_task(f"{TASKS}:trap_usr1", str(out), 60.0), "sig-1")
    with pytest.raises(DriverError, match="Task not running"):
        driver.signal(handle, "SIGUSR1")  # nothing runs yet: no worker to send it to
    wait_for(driver, handle, TaskState.RUNNING)
    wait_for_file(tmp_path / "signalled.ready")  # its handler is installed
    driver.signal(handle, "SIGUSR1")
    assert wait_for_file(out) == "usr1"
    wait_for(driver, handle, TaskState.COMPLETE)
    with pytest.raises(DriverError, match="Task not running"):
        driver.signal(handle, "SIGUSR1")
