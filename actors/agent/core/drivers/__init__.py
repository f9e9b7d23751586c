"""Task drivers: `mock` (clock-driven, for simulated fleets) and `raw_exec` (a subprocess).

Each also says what a running task uses (`usage`): raw_exec from the OS, mock from the load
model its task declares (load_model.py).

The `ray` driver (each task as a Ray task pinned to its node) plugs in here too, but it
needs Ray, so it lives in the agent's actor shell (`actors/agent/ray_driver.py`) and is
passed to `ClientCore` in the same `drivers` mapping; it implements the same `Driver`
protocol. It is the one driver whose tasks start pending: Ray queues them until the node
has their resources.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from actors.agent.core.drivers.base import (
    Driver,
    DriverError,
    TaskHandle,
    TaskState,
    TaskStatus,
    exit_status,
)
from actors.agent.core.drivers.mock import MockDriver, MockHandle
from actors.agent.core.drivers.raw_exec import DISABLED_ERROR, RawExecDriver, RawExecHandle

__all__ = [
    "DISABLED_ERROR",
    "Driver",
    "DriverError",
    "MockDriver",
    "MockHandle",
    "RawExecDriver",
    "RawExecHandle",
    "TaskHandle",
    "TaskState",
    "TaskStatus",
    "builtin_drivers",
    "enabled_drivers",
    "exit_status",
]


def builtin_drivers(
    *,
    data_dir: str | os.PathLike[str],
    raw_exec_enabled: bool = False,
    mhz_per_cpu: float = 1000,
    load_time_factor: float = 1.0,
) -> dict[str, Driver]:
    """The drivers every agent has, by name (the shell adds `ray` where Ray is available).
    `mhz_per_cpu`: what one busy core counts for in the usage raw_exec measures;
    `load_time_factor`: the shared clock factor of mock tasks' load models."""
    drivers: list[Driver] = [
        MockDriver(time_factor=load_time_factor),
        RawExecDriver(enabled=raw_exec_enabled, data_dir=data_dir, mhz_per_cpu=mhz_per_cpu),
    ]
    return {d.name: d for d in drivers}


def enabled_drivers(drivers: Mapping[str, Driver]) -> tuple[str, ...]:
    """The names of the drivers that can run tasks (raw_exec only where the operator enabled
    it): what a node lists in `Drivers` and advertises as `driver.<name>` attributes."""
    return tuple(name for name, driver in drivers.items() if getattr(driver, "enabled", True))
