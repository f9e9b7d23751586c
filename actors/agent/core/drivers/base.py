"""The task driver interface: how an allocation runner starts, watches and kills one task.

Nomad's drivers are plugins behind `drivers.DriverPlugin` (StartTask / WaitTask /
StopTask). drover's drivers are polled instead of waited on: the agent hosts thousands of
(simulated) nodes in one process, so nothing may block or spawn a thread per task. A
driver turns the `now` it is given into state changes; the clock belongs to the caller.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from contracts import Task


class DriverError(Exception):
    """A task could not be started; the message becomes the allocation's description."""


def send_signal(pid: int, signal_name: str) -> None:
    """Send a task's process the signal named as Nomad names it (SIGUSR1); DriverError,
    in Nomad's words, if the name is unknown here or the process is gone."""
    try:
        os.kill(pid, signal.Signals[signal_name])
    except KeyError:
        raise DriverError(f"signal {signal_name} does not exist on this system") from None
    except ProcessLookupError:
        raise DriverError("Task not running") from None
    except OSError as exc:
        raise DriverError(f"failed to send {signal_name}: {exc.strerror or exc}") from None


class TaskState(StrEnum):
    PENDING = "pending"  # accepted, not started yet (queued by the backend, e.g. Ray)
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class TaskStatus:
    state: TaskState
    exit_code: int | None = None
    message: str = ""

    @property
    def running(self) -> bool:
        return self.state is TaskState.RUNNING

    @property
    def exited(self) -> bool:
        """The task is gone (complete or failed); pending and running tasks are not."""
        return self.state is TaskState.COMPLETE or self.state is TaskState.FAILED


RUNNING = TaskStatus(TaskState.RUNNING)


@dataclass(slots=True)
class TaskHandle:
    """One started task. Drivers subclass it to keep their own state.

    wake_at: the earliest time `poll` can report a change (math.inf: only after `stop`);
    None: the driver cannot know, poll it on every tick. The client core uses it to skip
    idle simulated tasks, which is what lets one agent host thousands of nodes.
    pending: the task was only queued when `start` returned (the ray driver: Ray starts it
    once the node has its resources). The runner keeps the allocation pending and polls the
    task on every tick until `poll` reports it running; False: it runs once `start` returns.
    """

    alloc_id: str
    task_name: str
    driver: str
    started_at: float
    wake_at: float | None = None
    pending: bool = False


def exit_status(exit_code: int) -> TaskStatus:
    """Nomad's reading of an exit: code 0 completes the task, anything else fails it."""
    if exit_code == 0:
        return TaskStatus(TaskState.COMPLETE, 0, "exited with code 0")
    if exit_code < 0:
        return TaskStatus(TaskState.FAILED, exit_code, f"killed by signal {-exit_code}")
    return TaskStatus(TaskState.FAILED, exit_code, f"exited with code {exit_code}")


class Driver(Protocol):
    """What the allocation runner needs from a task driver.

    name: the `driver` value tasks select it with.
    validate: the task's config problems, each a short sentence (empty: valid).
    start: launch the task or raise DriverError; `env` is the full task environment.
    poll: the task's state at `now` (a stopping task is escalated here, never by sleeping):
        pending until it really started, then running, then complete or failed.
    stop: ask the task to exit (a pending one too); it is gone once `poll` reports it exited.
    usage: what the running task uses at `now`, as (CPU in MHz, resident memory in MB), or
        None when the driver cannot say (not started, gone, nothing to measure). Called on
        the agent's usage timer, never per log entry; it must not block.
    signal: send the running task the signal named as Nomad names it ("SIGUSR1", checked by
        contracts.node_commands.canonical_signal); DriverError (its message is the reply's
        error) when it cannot. Nomad's driver SignalTask.
    collect: remove what the driver keeps on disk for the finished allocation `alloc_id`
        (Nomad's client GC of its alloc dir); nothing where it keeps nothing.
    local_dir: the folder the task sees as `local/` (Nomad's task dir, where a dispatched
        job's payload is written before the task starts), made if needed; None for a driver
        whose tasks have no folder on this machine.
    """

    @property
    def name(self) -> str: ...

    def validate(self, task: Task) -> list[str]: ...

    def start(
        self, alloc_id: str, task: Task, env: Mapping[str, str], now: float
    ) -> TaskHandle: ...

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus: ...

    def stop(self, handle: TaskHandle, now: float) -> None: ...

    def usage(self, handle: TaskHandle, now: float) -> tuple[float, float] | None: ...

    def signal(self, handle: TaskHandle, signal: str) -> None: ...

    def collect(self, alloc_id: str) -> None: ...

    def local_dir(self, alloc_id: str, task_name: str) -> Path | None: ...
