"""Jobs, task groups and tasks, with Nomad's field meanings and defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from contracts.constraints import Affinity, Constraint, Spread
from contracts.copying import replaced
from contracts.fast_init import install_fast_inits
from contracts.launch import DispatchPayloadConfig, ParameterizedConfig, PeriodicConfig
from contracts.resources import Resources
from contracts.scaling import ScalingPolicy
from contracts.share import ShareRequest

DEFAULT_NAMESPACE = "default"
DEFAULT_NODE_POOL = "default"
DEFAULT_PRIORITY = 50
MIN_PRIORITY = 1
MAX_PRIORITY = 100
# Nomad keeps this many versions of a job (JobDefaultTrackedVersions).
TRACKED_VERSIONS = 6
# A job file's group without `ephemeral_disk { size }` gets this (Nomad's DefaultEphemeralDisk);
# records built in code keep what they say (a dstack run's groups: 0).
DEFAULT_EPHEMERAL_DISK_MB = 300


class JobType(StrEnum):
    SERVICE = "service"
    BATCH = "batch"
    SYSTEM = "system"
    SYSBATCH = "sysbatch"


class JobStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class UpdateStrategy:
    """The `update` block: how a service job's new version rolls out (contracts/deployment.py).
    health_check: "task_states" or "checks" (drover's tasks have no service checks, so both
    mean every task running for min_healthy_time); "manual" leaves health to the API."""

    max_parallel: int = 1
    stagger_s: float = 30.0
    min_healthy_time_s: float = 10.0
    healthy_deadline_s: float = 300.0
    auto_revert: bool = False
    canary: int = 0
    auto_promote: bool = False
    progress_deadline_s: float = 600.0
    health_check: str = "checks"


MIGRATE_HEALTH_CHECKS = ("checks", "task_states")


@dataclass(frozen=True, slots=True)
class MigrateStrategy:
    """The `migrate` block: how a service group's allocations leave draining nodes (Nomad's
    MigrateStrategy, defaults as Nomad's; the leader's drainer, actors/leader/core/drainer.py).
    At most `max_parallel` of the group are migrating at once: another is marked only once
    the group's replacements are healthy, that is running for `min_healthy_time` (drover's
    tasks have no service checks, so "checks" and "task_states" both mean running), or past
    `healthy_deadline` without being so (then counted, as Nomad counts an unhealthy one)."""

    max_parallel: int = 1
    health_check: str = "checks"
    min_healthy_time_s: float = 10.0
    healthy_deadline_s: float = 300.0


# What a service group without a migrate block drains by (Nomad gives every service group
# this one when it canonicalizes the job; records built in code may have none).
DEFAULT_MIGRATE = MigrateStrategy()


@dataclass(frozen=True, slots=True)
class ReschedulePolicy:
    """When a failed allocation is replaced. unlimited: always (service default)."""

    attempts: int = 0
    interval_s: float = 0.0
    delay_s: float = 30.0
    unlimited: bool = True

    def allows_another(self, reschedule_times_ns: Iterable[int], now_ns: int) -> bool:
        """Whether an allocation rescheduled at these times may be rescheduled once more
        (Nomad's RescheduleEligible: fewer than `attempts` within the last `interval_s`)."""
        if self.unlimited:
            return True
        if self.attempts <= 0:
            return False
        window_start = now_ns - int(self.interval_s * 1e9)
        return sum(1 for t in reschedule_times_ns if t >= window_start) < self.attempts


DEFAULT_SERVICE_RESCHEDULE = ReschedulePolicy(
    attempts=0, interval_s=0.0, delay_s=30.0, unlimited=True
)
DEFAULT_BATCH_RESCHEDULE = ReschedulePolicy(
    attempts=1, interval_s=86400.0, delay_s=5.0, unlimited=False
)


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    driver: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)
    affinities: tuple[Affinity, ...] = field(default_factory=tuple)
    user: str = ""
    kill_timeout_s: float = 5.0
    # Where a dispatched job's payload is written (a parameterized job's tasks); None: nowhere.
    dispatch_payload: DispatchPayloadConfig | None = None


@dataclass(frozen=True, slots=True)
class TaskGroup:
    name: str
    count: int = 1
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)
    affinities: tuple[Affinity, ...] = field(default_factory=tuple)
    spreads: tuple[Spread, ...] = field(default_factory=tuple)
    scaling: ScalingPolicy | None = None
    tasks: tuple[Task, ...] = field(default_factory=tuple)
    meta: dict[str, str] = field(default_factory=dict)
    update: UpdateStrategy | None = None
    # A job file's service group always has one (Nomad's default unless it says otherwise);
    # only service groups may (see contracts/jobspec/validate.py).
    migrate: MigrateStrategy | None = None
    reschedule_policy: ReschedulePolicy | None = None
    ephemeral_disk_mb: int = 0
    # A dstack run's ranges, placed on instance blocks instead of the tasks' fixed asks.
    share: ShareRequest | None = None

    def combined_resources(self) -> Resources:
        """The sum of the tasks' asks plus the group's ephemeral disk."""
        cpu = sum(t.resources.cpu for t in self.tasks)
        mem = sum(t.resources.memory_mb for t in self.tasks)
        disk = sum(t.resources.disk_mb for t in self.tasks) + self.ephemeral_disk_mb
        devices = tuple(d for t in self.tasks for d in t.resources.devices)
        return Resources(cpu=cpu, memory_mb=mem, disk_mb=disk, devices=devices)


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    name: str = ""
    namespace: str = DEFAULT_NAMESPACE
    type: JobType = JobType.SERVICE
    priority: int = DEFAULT_PRIORITY
    all_at_once: bool = False
    datacenters: tuple[str, ...] = ("*",)
    node_pool: str = DEFAULT_NODE_POOL
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)
    affinities: tuple[Affinity, ...] = field(default_factory=tuple)
    spreads: tuple[Spread, ...] = field(default_factory=tuple)
    task_groups: tuple[TaskGroup, ...] = field(default_factory=tuple)
    update: UpdateStrategy | None = None
    meta: dict[str, str] = field(default_factory=dict)
    # A template the leader launches children from (contracts/launch.py), never scheduled.
    periodic: PeriodicConfig | None = None
    parameterized: ParameterizedConfig | None = None
    # Set on a launched child: its template, and (dispatched) what the dispatch carried.
    parent_id: str = ""
    dispatched: bool = False
    payload: str = ""  # base64, as Nomad's JSON carries it
    dispatch_idempotency_token: str = ""
    # Lifecycle fields, owned by the state store.
    stop: bool = False
    status: JobStatus = JobStatus.PENDING
    status_description: str = ""
    version: int = 0
    stable: bool = False
    submit_time: int = 0
    create_index: int = 0
    modify_index: int = 0
    job_modify_index: int = 0

    def lookup_task_group(self, name: str) -> TaskGroup | None:
        for tg in self.task_groups:
            if tg.name == name:
                return tg
        return None

    @property
    def namespaced_id(self) -> tuple[str, str]:
        return (self.namespace, self.id)

    @property
    def is_periodic(self) -> bool:
        return self.periodic is not None

    @property
    def is_parameterized(self) -> bool:
        """A template for dispatches (a dispatched child keeps the block but is not one)."""
        return self.parameterized is not None and not self.dispatched

    @property
    def is_periodic_active(self) -> bool:
        """Nomad's IsPeriodicActive: the leader launches its children on schedule."""
        return (
            self.periodic is not None
            and self.periodic.enabled
            and not self.stop
            and not self.is_parameterized
        )

    @property
    def is_template(self) -> bool:
        """Periodic or parameterized: never scheduled itself, so no eval on register."""
        return self.is_periodic or self.is_parameterized

    def spec_changed(self, other: Job) -> bool:
        """Nomad's SpecChanged: compare ignoring the lifecycle fields the store owns."""
        return _spec(self) != _spec(other)

    def replace(self, **changes: Any) -> Job:
        return replaced(self, **changes)


def _spec(job: Job) -> Job:
    return dataclasses.replace(
        job,
        status=JobStatus.PENDING,
        status_description="",
        version=0,
        stable=False,
        submit_time=0,
        create_index=0,
        modify_index=0,
        job_modify_index=0,
    )


install_fast_inits(__name__)
