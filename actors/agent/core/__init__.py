"""The client agent's pure core (no Ray, no Redis): drivers, allocation runners, fingerprints."""

from actors.agent.core.client import ClientCore, JobLookup
from actors.agent.core.drivers import (
    DISABLED_ERROR,
    Driver,
    DriverError,
    MockDriver,
    RawExecDriver,
    TaskHandle,
    TaskState,
    TaskStatus,
    builtin_drivers,
    enabled_drivers,
)
from actors.agent.core.duration import duration_seconds, parse_duration
from actors.agent.core.env import task_env
from actors.agent.core.fingerprint import FleetSpec, node_id_for, nodes_from_ray, simulated_nodes
from actors.agent.core.runner import (
    COMPLETE_DESCRIPTION,
    RUNNING_DESCRIPTION,
    STOPPED_DESCRIPTION,
    AllocRunner,
)

__all__ = [
    "COMPLETE_DESCRIPTION",
    "DISABLED_ERROR",
    "RUNNING_DESCRIPTION",
    "STOPPED_DESCRIPTION",
    "AllocRunner",
    "ClientCore",
    "Driver",
    "DriverError",
    "FleetSpec",
    "JobLookup",
    "MockDriver",
    "RawExecDriver",
    "TaskHandle",
    "TaskState",
    "TaskStatus",
    "builtin_drivers",
    "duration_seconds",
    "enabled_drivers",
    "node_id_for",
    "nodes_from_ray",
    "parse_duration",
    "simulated_nodes",
    "task_env",
]
