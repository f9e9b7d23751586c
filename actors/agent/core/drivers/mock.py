"""Nomad's mock driver, simplified and purely clock-driven: no process, no sleep, no thread.

Config (Nomad's names): `run_for` (a Go duration or seconds; absent: run until stopped),
`exit_code` (0: complete, otherwise failed) and `start_error` (fail to start with this
message). Tasks end exactly when the caller's clock passes `start + run_for`, so simulated
fleets and tests are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from actors.agent.core.drivers.base import (
    RUNNING,
    DriverError,
    TaskHandle,
    TaskState,
    TaskStatus,
    exit_status,
)
from actors.agent.core.duration import duration_seconds
from contracts import Task

_KEYS = frozenset({"run_for", "exit_code", "start_error"})


@dataclass(slots=True)
class MockHandle(TaskHandle):
    deadline: float = math.inf
    exit_code: int = 0
    stopped: bool = False


class MockDriver:
    """Tasks that "run" for `run_for` seconds of the caller's clock."""

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
        return errors

    def start(self, alloc_id: str, task: Task, env: Mapping[str, str], now: float) -> MockHandle:
        config = task.config
        if config.get("start_error"):
            raise DriverError(str(config["start_error"]))
        run_for = config.get("run_for")
        deadline = math.inf if run_for is None else now + duration_seconds(run_for)
        return MockHandle(
            alloc_id=alloc_id,
            task_name=task.name,
            driver=self.name,
            started_at=now,
            wake_at=deadline,
            deadline=deadline,
            exit_code=int(config.get("exit_code", 0)),
        )

    def poll(self, handle: TaskHandle, now: float) -> TaskStatus:
        assert isinstance(handle, MockHandle)
        if handle.stopped:
            return TaskStatus(TaskState.COMPLETE, None, "stopped")
        if now >= handle.deadline:
            return exit_status(handle.exit_code)
        return RUNNING

    def stop(self, handle: TaskHandle, now: float) -> None:
        assert isinstance(handle, MockHandle)
        handle.stopped = True
        handle.wake_at = now
