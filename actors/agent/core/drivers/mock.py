"""Nomad's mock driver, simplified and purely clock-driven: no process, no sleep, no thread.

Config (Nomad's names): `run_for` (a Go duration or seconds; absent: run until stopped),
`exit_code` (0: complete, otherwise failed) and `start_error` (fail to start with this
message). Tasks end exactly when the caller's clock passes `start + run_for`, so simulated
fleets and tests are deterministic.

A signal is recorded on the task's handle (`MockHandle.signals`) and changes nothing else,
as Nomad's mock driver takes one.

drover's own key, `load` (a map: shape, base, peak, at, duration, noise, trace, memory_mb,
time_factor; load_model.py), declares the CPU demand the task's group sees: each running
allocation reports its share of it as its use (`usage`), so the autoscaler's loop closes on
simulated fleets. A task without `load` uses nothing measurable and reports no usage: the
simulated fleets of thousands of idle tasks then add nothing to the usage stream.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from actors.agent.core.drivers.base import (
    RUNNING,
    DriverError,
    TaskHandle,
    TaskState,
    TaskStatus,
    exit_status,
)
from actors.agent.core.duration import duration_seconds
from actors.agent.core.load_model import GroupKey, GroupLoads, LoadModel, load_problems, parse_load
from contracts import Task

_KEYS = frozenset({"run_for", "exit_code", "start_error", "load"})
# Parsed `load` blocks by task: every allocation of a job version shares its Task records.
# Entries hold their task, so an id is never reused while its entry lives.
_MODELS_MAX = 4096
MAX_SIGNALS_KEPT = 100  # per task: what a test can ask about, never a growing list


@dataclass(slots=True)
class MockHandle(TaskHandle):
    deadline: float = math.inf
    exit_code: int = 0
    stopped: bool = False
    load: LoadModel | None = None
    group: GroupKey = ("", "", "")
    signals: list[str] = field(default_factory=list)  # received, oldest first


class MockDriver:
    """Tasks that "run" for `run_for` seconds of the caller's clock."""

    def __init__(self, time_factor: float = 1.0) -> None:
        """`time_factor`: the clock factor of load models that set none (the system's one
        shared factor: every group's demand runs that many times faster than real time)."""
        self.time_factor = time_factor
        self.loads = GroupLoads()  # this agent's load-bearing tasks (load_model.py)
        self._models: dict[int, tuple[Task, LoadModel]] = {}

    @property
    def name(self) -> str:
        return "mock"

    def validate(self, task: Task) -> list[str]:
        config = task.config
        errors = [f'mock: unknown config key "{k}"' for k in sorted(config) if k not in _KEYS]
        if "run_for" in config:
            try:
                duration_seconds(config["run_for"])
            except ValueError as exc:
                errors.append(f"mock: run_for: {exc}")
        code = config.get("exit_code", 0)
        if isinstance(code, bool) or not isinstance(code, int):
            errors.append(f"mock: exit_code must be an integer, got {code!r}")
        if not isinstance(config.get("start_error", ""), str):
            errors.append(f"mock: start_error must be a string, got {config['start_error']!r}")
        if "load" in config:
            errors += [f"mock: {problem}" for problem in load_problems(config["load"])]
        return errors

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> MockHandle:
        config = task.config
        if config.get("start_error"):
            raise DriverError(str(config["start_error"]))
        run_for = config.get("run_for")
        deadline = math.inf if run_for is None else now + duration_seconds(run_for)
        handle = MockHandle(
            alloc_id=alloc_id,
            task_name=task.name,
            driver=self.name,
            started_at=now,
            wake_at=deadline,
            deadline=deadline,
            exit_code=int(config.get("exit_code", 0)),
        )
        if "load" in config:
            handle.load = self._model(task)
            # Read only for load-bearing tasks: the lazy task env is built on first read.
            handle.group = (
                env.get("DROVER_NAMESPACE", "default"),
                env.get("DROVER_JOB_ID", ""),
                env.get("DROVER_GROUP_NAME", ""),
            )
            self.loads.begin(handle.group, task.name, alloc_id, now)
        return handle

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
        assert isinstance(handle, MockHandle)
        if handle.stopped:
            return TaskStatus(TaskState.COMPLETE, None, "stopped")
        if now >= handle.deadline:
            self._end(handle)
            return exit_status(handle.exit_code)
        return RUNNING

    def stop(self, handle: TaskHandle, now: float) -> None:
        assert isinstance(handle, MockHandle)
        handle.stopped = True
        handle.wake_at = now
        self._end(handle)

    def usage(self, handle: TaskHandle, now: float) -> tuple[float, float] | None:
        """(CPU MHz, memory MB): the allocation's share of its group's demand; None for a
        task without `load`, or one that is no longer running."""
        assert isinstance(handle, MockHandle)
        model = handle.load
        if model is None or handle.stopped or now >= handle.deadline:
            return None
        cpu = self.loads.share(model, handle.group, handle.task_name, handle.alloc_id, now)
        return cpu, model.memory_mb

    def signal(self, handle: TaskHandle, signal: str) -> None:
        """Recorded, as Nomad's mock driver takes a signal: the task goes on (a stop is the
        runner's to ask for)."""
        assert isinstance(handle, MockHandle)
        if len(handle.signals) < MAX_SIGNALS_KEPT:
            handle.signals.append(signal)

    def collect(self, alloc_id: str) -> None:
        """A mock task keeps nothing on disk."""

    def local_dir(self, alloc_id: str, task_name: str) -> Path | None:
        return None  # no folder: a dispatched payload is not written anywhere

    def _end(self, handle: MockHandle) -> None:
        if handle.load is not None:
            self.loads.end(handle.group, handle.task_name, handle.alloc_id)

    def _model(self, task: Task) -> LoadModel:
        hit = self._models.get(id(task))
        if hit is not None and hit[0] is task:
            return hit[1]
        try:
            model = parse_load(task.config["load"])
        except ValueError as exc:
            raise DriverError(str(exc)) from None
        if "time_factor" not in task.config["load"]:
            model = replace(model, time_factor=self.time_factor)
        if len(self._models) >= _MODELS_MAX:
            self._models.clear()
        self._models[id(task)] = (task, model)
        return model
