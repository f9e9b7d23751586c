"""An allocation's per-task view as Nomad's API gives it: `TaskStates` and
`AllocatedResources.Tasks`.

drover's agents report one status per allocation (ClientStatus, ClientDescription and the
report's time, see actors/agent/core/runner.py), not per task, and keep no task event log.
So the task states here are derived from that record, and say no more than it knows:

- State: pending, running or dead, from the allocation's client status (a lost allocation's
  tasks are dead; an unknown one's are shown running, as last reported);
- Failed: the allocation failed and this task is the one its description names (every task
  when it names none); a failed task's siblings are dead, not failed, as in Nomad;
- Restarts 0 and LastRestart unset: drover's agents do not restart tasks in place;
- StartedAt: for a running task, when its allocation was last recorded (its ModifyTime: the
  running report, unless the server changed the allocation since); a finished task's start
  is not recorded anywhere, so it is the zero time, as Nomad shows a task that never ran;
- FinishedAt: a dead task's allocation's ModifyTime (its terminal report);
- Events: "Received" at the allocation's creation, "Started" when the start time is known,
  then "Terminated" (exit or failure, with the agent's message), "Sibling Task Failed" or
  "Killed" (stopped by the scheduler), Nomad's event types and display messages; with the
  events the agent recorded itself merged in by time ("Signaling", contracts/node_commands.py,
  which only `GET /v1/allocation/:id` reads: a list would read one Redis list per
  allocation), each task's newest MAX_EVENTS kept, as Nomad's client keeps them.

Per-task resources: each task's CPU and memory ask from its job version (the allocation's
totals when the group has one task), and the allocation's device instances given to the
tasks in the order they asked for them (what the scheduler does, stack.offer_devices).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from actors.agent.core.runner import STOPPED_DESCRIPTION
from actors.state import StateReader
from contracts import Allocation, ClientStatus, Job, TaskGroup
from contracts.node_commands import TaskEvent

ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time.Time, as Nomad serialises it
MAX_EVENTS = 10  # per task, as Nomad's client keeps them

_STATE = {
    ClientStatus.PENDING: "pending",
    ClientStatus.RUNNING: "running",
    ClientStatus.UNKNOWN: "running",
    ClientStatus.COMPLETE: "dead",
    ClientStatus.FAILED: "dead",
    ClientStatus.LOST: "dead",
}


def go_time(ns: int) -> str:
    """Unix nanoseconds as Go's RFC 3339 (time.Time's JSON); 0 is the zero time."""
    if ns <= 0:
        return ZERO_TIME
    seconds, nanos = divmod(ns, 1_000_000_000)
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + fraction + "Z"


def _event(kind: str, at: int, display: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "Type": kind,
        "Time": at,
        "Message": message,
        "DisplayMessage": display,
        "Details": {},
        "FailsTask": False,
        **extra,
    }


def _failure_of(description: str, task: str) -> str | None:
    """What the agent said about this task in a failed allocation's description; None when
    it names other tasks only. The runner writes `task "x" failed: ...` or `task "x": ...`,
    joined by "; "."""
    named = [part for part in description.split("; ") if part.startswith('task "')]
    if not named:
        return description or "failed"
    for part in named:
        if part.startswith(f'task "{task}"'):
            return part
    return None


def _recorded(event: TaskEvent) -> dict[str, Any]:
    """An event the agent recorded, in Nomad's TaskEvent JSON (a Signaling event also
    carries the signal in TaskSignal, as Nomad's does)."""
    extra: dict[str, Any] = {"Details": dict(event.details)}
    if "signal" in event.details:
        extra |= {"TaskSignal": event.details["signal"], "TaskSignalReason": ""}
    return _event(event.type, event.time, event.display_message, event.message, **extra)


def _task_state(alloc: Allocation, task: str, recorded: Sequence[TaskEvent] = ()) -> dict[str, Any]:
    status = alloc.client_status
    events = [_event("Received", alloc.create_time, "Task received by client")]
    started = alloc.modify_time if status is ClientStatus.RUNNING else 0
    finished = alloc.modify_time if _STATE[status] == "dead" else 0
    failed = False
    if started:
        events.append(_event("Started", started, "Task started by client"))
    if status is ClientStatus.COMPLETE:
        if alloc.client_description == STOPPED_DESCRIPTION:
            events.append(_event("Killed", finished, "Task successfully killed"))
        else:
            events.append(_event("Terminated", finished, "Exit Code: 0", ExitCode=0))
    elif status is ClientStatus.FAILED:
        reason = _failure_of(alloc.client_description, task)
        if reason is not None:
            failed = True
            events.append(_event("Terminated", finished, reason, reason, FailsTask=True))
        else:
            text = "Task's sibling failed"
            events.append(_event("Sibling Task Failed", finished, text))
            events.append(_event("Killed", finished, "Task successfully killed"))
    if recorded:
        events += [_recorded(e) for e in recorded if e.task == task]
        events.sort(key=lambda e: int(e["Time"]))  # stable: derived ones first at a tie
        events = events[-MAX_EVENTS:]
    return {
        "State": _STATE[status],
        "Failed": failed,
        "Restarts": 0,
        "LastRestart": ZERO_TIME,
        "StartedAt": go_time(started),
        "FinishedAt": go_time(finished),
        "Events": events,
    }


def _group(alloc: Allocation, job: Job | None) -> TaskGroup | None:
    return job.lookup_task_group(alloc.task_group) if job is not None else None


def task_states(
    alloc: Allocation, job: Job | None, recorded: Sequence[TaskEvent] = ()
) -> dict[str, Any] | None:
    """Nomad's TaskStates (task name -> TaskState), with the events the agent `recorded`;
    None when the job version is gone."""
    group = _group(alloc, job)
    if group is None:
        return None
    return {task.name: _task_state(alloc, task.name, recorded) for task in group.tasks}


def task_resources(alloc: Allocation, job: Job | None) -> dict[str, Any]:
    """Nomad's AllocatedResources.Tasks: per task Cpu.CpuShares, Memory.MemoryMB and the
    device instances it holds (Devices[].DeviceIDs)."""
    group = _group(alloc, job)
    if group is None:
        return {}
    held = alloc.allocated_resources
    devices = list(held.devices)
    asked = sum(len(t.resources.devices) for t in group.tasks)
    out: dict[str, Any] = {}
    for n, task in enumerate(group.tasks):
        only = len(group.tasks) == 1
        if only or asked != len(held.devices):
            # One task, or devices that do not pair with the asks (a run's shared instance
            # blocks): the first task holds them all.
            mine = devices if n == 0 else []
        else:
            mine, devices = (
                devices[: len(task.resources.devices)],
                devices[len(task.resources.devices) :],
            )
        out[task.name] = {
            "Cpu": {"CpuShares": held.cpu if only else task.resources.cpu, "ReservedCores": None},
            "Memory": {
                "MemoryMB": held.memory_mb if only else task.resources.memory_mb,
                "MemoryMaxMB": 0,
            },
            "Networks": None,
            "Devices": [
                {
                    "Vendor": d.vendor,
                    "Type": d.type,
                    "Name": d.name,
                    "DeviceIDs": list(d.device_ids),
                }
                for d in mine
            ],
        }
    return out


def job_lookup(state: StateReader) -> Callable[[Allocation], Job | None]:
    """The job version each allocation runs, looked up once per version (a list holds
    thousands of allocations of a few versions)."""
    seen: dict[tuple[str, str, int], Job | None] = {}

    def lookup(alloc: Allocation) -> Job | None:
        key = (alloc.namespace, alloc.job_id, alloc.job_version)
        if key not in seen:
            seen[key] = state.job_version(*key)
        return seen[key]

    return lookup
