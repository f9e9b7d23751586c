"""One allocation on one node: start its group's tasks, watch them, stop them, report.

Nomad's client runs an allocation's tasks side by side and derives the allocation's client
status from theirs (`getClientStatus`): failed as soon as any task failed (its siblings
are then killed), running while any runs, pending while the tasks left are all waiting to
start (a Ray task queued for its node's resources), complete once all exited
successfully. A desired status of stop or evict kills the tasks, pending ones too, and
reports complete. The runner reports only changes, so re-reading the same allocation
record is harmless.

Before a task starts, a dispatched job's payload is written to the file its
`dispatch_payload` block names, under the task's `local/` folder (payload.py); failing to
write it fails the allocation as a failed start does.

Restarts: a runner built from a record that is already client-terminal never starts
anything. A record that says running is started again (there is no process to reattach
to, as Nomad does; the mock's timer restarts from now), keeping the status quiet because
the server already believes it, unless the restarted tasks are pending again (Ray queued
them): that is reported, and running once they run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum

from actors.agent.core.drivers import Driver, DriverError, TaskHandle, TaskState
from actors.agent.core.env import TaskEnv
from actors.agent.core.payload import PayloadError, payload_file, write_dispatch_payload
from contracts import CLIENT_TERMINAL, Allocation, ClientStatus, Job, Task, TaskGroup
from contracts.node_commands import (
    TASK_NOT_FOUND,
    TASK_NOT_RUNNING,
    ReplyError,
    TaskEvent,
    signaling_event,
)
from contracts.state_log import AllocClientUpdate, client_update

RUNNING_DESCRIPTION = "Tasks are running"
PENDING_DESCRIPTION = "No tasks have started"
COMPLETE_DESCRIPTION = "All tasks have completed"
STOPPED_DESCRIPTION = "stopped by scheduler"


# Driver verdicts on task configs: every allocation of a job version shares its Task records,
# so thousands of runners ask about the same few. Validation is a pure function of the task;
# entries hold their driver and task, so an id is never reused while its entry lives.
_VALIDATED: dict[tuple[int, int], tuple[Driver, Task, list[str]]] = {}
_VALIDATED_MAX = 4096


# The group an allocation runs and the problems found with it, per (job version, group,
# drivers): the same for every allocation of a plan. Entries hold what they are keyed by.
_CHECKED: dict[tuple[int, str, int], tuple[Job, Mapping[str, Driver], TaskGroup | None, str]] = {}


def _start_check(
    job: Job, group_name: str, drivers: Mapping[str, Driver]
) -> tuple[TaskGroup | None, str]:
    """The allocation's task group and why it cannot start ("" if it can)."""
    key = (id(job), group_name, id(drivers))
    hit = _CHECKED.get(key)
    if hit is not None and hit[0] is job and hit[1] is drivers:
        return hit[2], hit[3]
    group = job.lookup_task_group(group_name)
    problems = "; ".join(_group_problems(job, group_name, group, drivers))
    if len(_CHECKED) >= _VALIDATED_MAX:
        _CHECKED.clear()
    _CHECKED[key] = (job, drivers, group, problems)
    return group, problems


def _group_problems(
    job: Job, group_name: str, group: TaskGroup | None, drivers: Mapping[str, Driver]
) -> list[str]:
    if group is None:
        return [f'task group "{group_name}" not found in job "{job.id}"']
    if not group.tasks:
        return [f'task group "{group.name}" has no tasks']
    problems = []
    for task in group.tasks:
        driver = drivers.get(task.driver)
        if driver is None:
            what = f'unknown driver "{task.driver}"' if task.driver else "no driver set"
            problems.append(f'task "{task.name}": {what}')
        else:
            problems += [f'task "{task.name}": {e}' for e in _validated(driver, task)]
    return problems


def _validated(driver: Driver, task: Task) -> list[str]:
    key = (id(driver), id(task))
    hit = _VALIDATED.get(key)
    if hit is not None and hit[0] is driver and hit[1] is task:
        return hit[2]
    problems = driver.validate(task)
    if len(_VALIDATED) >= _VALIDATED_MAX:
        _VALIDATED.clear()
    _VALIDATED[key] = (driver, task, problems)
    return problems


class Phase(Enum):
    NEW = "new"  # nothing started yet
    RUNNING = "running"  # tasks started, each pending or running
    STOPPING = "stopping"  # tasks asked to exit, waiting for them
    DONE = "done"  # no task left; the status is final


class AllocRunner:
    """The client side of one allocation; `step` advances it, `update` feeds new records."""

    __slots__ = (
        "_abandoned",
        "_confirmed",
        "_drivers",
        "_handles",
        "_outcome",
        "_pending",
        "_reported",
        "alloc",
        "description",
        "extra_env",
        "job",
        "phase",
        "status",
    )

    def __init__(
        self,
        alloc: Allocation,
        job: Job | None,
        drivers: Mapping[str, Driver],
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.alloc = alloc
        self.job = job
        self.extra_env = extra_env  # a run's cluster variables (cluster.py)
        self._drivers = drivers
        self.status = alloc.client_status
        self.description = alloc.client_description
        self._reported = (self.status, self.description)
        self._handles: dict[str, tuple[Driver, TaskHandle]] = {}
        self._pending: set[str] = set()  # tasks of _handles that have not started yet
        self._outcome: tuple[ClientStatus, str] | None = None
        self._abandoned = False
        self._confirmed = False
        self.phase = Phase.DONE if alloc.client_terminal() else Phase.NEW

    @property
    def finished(self) -> bool:
        """No task is left running and the status will not change again."""
        return self.phase is Phase.DONE

    @property
    def acknowledged(self) -> bool:
        """Finished, and the latest record already shows the final status (or nobody cares)."""
        return self.finished and (
            self._abandoned or self._confirmed or self.alloc.client_status is self.status
        )

    def confirm(self) -> None:
        """The shell knows its last report was committed (an alternative to a new record)."""
        self._confirmed = self.finished and self._reported == (self.status, self.description)

    def update(self, alloc: Allocation) -> bool:
        """Take a newer record of this allocation; True if the runner has work to do.

        Only the server-owned fields matter (desired status): the client fields in the record
        are this runner's own earlier reports, except a terminal status the server set
        itself (`lost` for allocations of a node it declared down).
        """
        old, self.alloc = self.alloc, alloc
        if self.phase is Phase.DONE:
            return False
        return alloc.desired_status is not old.desired_status or self._server_terminal()

    def abandon(self) -> None:
        """Stop the tasks without reporting anything (the node left this agent)."""
        self._abandoned = True

    def step(self, now: float) -> AllocClientUpdate | None:
        """Advance to `now`; the status update to send, if the status changed."""
        if self.phase is Phase.DONE:
            return None
        if self._server_terminal():
            self.status, self.description = self.alloc.client_status, self.alloc.client_description
            self._reported = (self.status, self.description)
            self._stop_all(now)
        elif self._abandoned and self.phase in (Phase.NEW, Phase.RUNNING):
            self._stop_all(now)
        if self.phase is Phase.NEW:
            if self.alloc.server_terminal():
                self._set(ClientStatus.COMPLETE, STOPPED_DESCRIPTION)
                self.phase = Phase.DONE
            else:
                self._start(now)
        if self.phase is Phase.RUNNING:
            if self.alloc.server_terminal():
                self._outcome = (ClientStatus.COMPLETE, STOPPED_DESCRIPTION)
                self._stop_all(now)
            else:
                self._poll_running(now)
        if self.phase is Phase.STOPPING:
            self._reap(now)
        return self._emit(now)

    def signal(self, task: str, signal: str, now: float) -> tuple[list[TaskEvent], str, ReplyError]:
        """Send `signal` to the task named (every task for ""), as Nomad's allocRunner.Signal:
        a "Signaling" event is recorded for each running task before its driver sends it.
        Returns the events, what went wrong ("" when nothing did) and what kind of failure
        that is (a driver's failure, or a task that is not there or not running)."""
        group = self.job.lookup_task_group(self.alloc.task_group) if self.job else None
        names = [t.name for t in group.tasks] if group is not None else []
        if task and task not in names:
            return [], TASK_NOT_FOUND, ReplyError.INVALID
        events: list[TaskEvent] = []
        errors: list[str] = []
        kind = ReplyError.NONE
        for name in [task] if task else names:
            entry = self._handles.get(name)
            live = self.phase in (Phase.RUNNING, Phase.STOPPING) and name not in self._pending
            error = ""
            if entry is None or not live:
                error = TASK_NOT_RUNNING
                kind = kind or ReplyError.INVALID
            else:
                events.append(signaling_event(name, signal, int(now * 1e9)))
                try:
                    entry[0].signal(entry[1], signal)
                except Exception as exc:  # a driver's failure fails this signal, not the agent
                    error = str(exc) or type(exc).__name__
                    kind = ReplyError.FAILED
            if error:
                errors.append(error if task else f"Failed to signal task: {name}, err: {error}")
        return events, "; ".join(errors), kind

    @property
    def measurable(self) -> bool:
        """Could any of its tasks say what it uses? Mock tasks only with a `load`: the
        thousands of plain mock allocations of a simulated fleet are never visited."""
        if self.job is None:
            return False
        group = self.job.lookup_task_group(self.alloc.task_group)
        return group is not None and any(
            t.driver != "mock" or "load" in t.config for t in group.tasks
        )

    def usage(self, now: float) -> tuple[float, float] | None:
        """(CPU MHz, memory MB) the running allocation uses at `now`: the sum over its tasks
        that run; None while it is not running, or when none of its drivers can say."""
        if self.phase is not Phase.RUNNING or self.status is not ClientStatus.RUNNING:
            return None
        cpu = memory = 0.0
        measured = False
        for name, (driver, handle) in self._handles.items():
            if name in self._pending:
                continue
            used = driver.usage(handle, now)
            if used is not None:
                measured = True
                cpu += used[0]
                memory += used[1]
        return (cpu, memory) if measured else None

    def next_wake(self, now: float) -> float | None:
        """When `step` next has something to do: None means only after a new record."""
        if self.phase is Phase.DONE:
            return None
        if self.phase is not Phase.RUNNING:
            return now
        if self._pending:
            return now  # a queued task may start at any moment
        wake = math.inf
        for _, handle in self._handles.values():
            if handle.wake_at is None:
                return now
            wake = min(wake, handle.wake_at)
        return None if wake == math.inf else wake

    # -- internals ---------------------------------------------------------------------

    def _server_terminal(self) -> bool:
        return self.alloc.client_terminal() and self.status not in CLIENT_TERMINAL

    def _set(self, status: ClientStatus, description: str) -> None:
        self.status, self.description = status, description

    def _emit(self, now: float) -> AllocClientUpdate | None:
        current = (self.status, self.description)
        if self._abandoned or current == self._reported:
            return None
        self._reported = current
        return client_update(
            self.alloc.id, self.status, self.description, int(now * 1e9), self.alloc.node_id
        )

    def _start(self, now: float) -> None:
        a = self.alloc
        if self.job is None:
            group, problems = None, f'job "{a.job_id}" version {a.job_version} not found'
        else:
            group, problems = _start_check(self.job, a.task_group, self._drivers)
        if problems:
            self._set(ClientStatus.FAILED, problems)
            self.phase = Phase.DONE
            return
        assert self.job is not None and group is not None
        self.phase = Phase.RUNNING
        for task in group.tasks:
            driver = self._drivers[task.driver]
            env = TaskEnv(self.alloc, self.job, group, task, self.extra_env)
            try:
                self._write_payload(driver, task)
                handle = driver.start(self.alloc.id, task, env, now)
            except Exception as exc:  # a driver bug must fail this alloc, not the agent
                detail = str(exc) or type(exc).__name__
                self._set(ClientStatus.FAILED, f'task "{task.name}": failed to start: {detail}')
                self._stop_all(now)
                return
            self._handles[task.name] = (driver, handle)
            if handle.pending:
                self._pending.add(task.name)
        self._set_live_status()

    def _write_payload(self, driver: Driver, task: Task) -> None:
        """A dispatched job's payload, in the task's `local/` before it starts (payload.py)."""
        assert self.job is not None
        file = payload_file(self.job, task)
        local = driver.local_dir(self.alloc.id, task.name) if file is not None else None
        if file is not None and local is not None:
            try:
                write_dispatch_payload(local, file, self.job.payload)
            except PayloadError as exc:
                raise DriverError(f"dispatch payload: {exc}") from None

    def _poll_running(self, now: float) -> None:
        failures = []
        for name, (driver, handle) in list(self._handles.items()):
            wake = handle.wake_at
            if wake is not None and wake > now and name not in self._pending:
                continue  # its driver said nothing can change before then (TaskHandle)
            status = driver.poll(handle, now)
            if status.running:
                self._pending.discard(name)
            if not status.exited:
                continue
            del self._handles[name]
            self._pending.discard(name)
            if status.state is TaskState.FAILED:
                failures.append(f'task "{name}" failed: {status.message}')
        if failures:
            self._set(ClientStatus.FAILED, "; ".join(failures))
            self._stop_all(now)
        elif not self._handles:
            self._set(ClientStatus.COMPLETE, COMPLETE_DESCRIPTION)
            self.phase = Phase.DONE
        else:
            self._set_live_status()

    def _set_live_status(self) -> None:
        """getClientStatus while no task failed and some are left: running if any runs."""
        if len(self._pending) < len(self._handles):
            self._set(ClientStatus.RUNNING, RUNNING_DESCRIPTION)
        else:
            self._set(ClientStatus.PENDING, PENDING_DESCRIPTION)

    def _stop_all(self, now: float) -> None:
        for driver, handle in self._handles.values():
            driver.stop(handle, now)
        self.phase = Phase.STOPPING if self._handles else Phase.DONE
        if self.phase is Phase.DONE:
            self._finish_stop()

    def _reap(self, now: float) -> None:
        for name, (driver, handle) in list(self._handles.items()):
            if driver.poll(handle, now).exited:
                del self._handles[name]
                self._pending.discard(name)
        if not self._handles:
            self.phase = Phase.DONE
            self._finish_stop()

    def _finish_stop(self) -> None:
        if self._outcome is not None and self.status not in CLIENT_TERMINAL:
            self._set(*self._outcome)
        self._outcome = None
