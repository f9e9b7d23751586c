"""Allocations: one instance of a task group bound to a node."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from contracts.fast_init import install_fast_inits
from contracts.resources import AllocatedResources

if TYPE_CHECKING:
    from contracts.job import ReschedulePolicy


class DesiredStatus(StrEnum):
    RUN = "run"
    STOP = "stop"
    EVICT = "evict"


class ClientStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    LOST = "lost"
    UNKNOWN = "unknown"


CLIENT_TERMINAL = frozenset({ClientStatus.COMPLETE, ClientStatus.FAILED, ClientStatus.LOST})


@dataclass(frozen=True, slots=True)
class DesiredTransition:
    """Set by the drainer (migrate) or a user (reschedule) to ask the scheduler to act."""

    migrate: bool = False
    reschedule: bool = False


@dataclass(frozen=True, slots=True)
class RescheduleEvent:
    reschedule_time: int = 0
    prev_alloc_id: str = ""
    prev_node_id: str = ""


@dataclass(frozen=True, slots=True)
class Allocation:
    id: str
    namespace: str = "default"
    eval_id: str = ""
    name: str = ""  # job.group[index]
    node_id: str = ""
    node_name: str = ""
    job_id: str = ""
    job_version: int = 0
    job_modify_index: int = 0
    task_group: str = ""
    allocated_resources: AllocatedResources = field(default_factory=AllocatedResources)
    desired_status: DesiredStatus = DesiredStatus.RUN
    desired_description: str = ""
    desired_transition: DesiredTransition = field(default_factory=DesiredTransition)
    client_status: ClientStatus = ClientStatus.PENDING
    client_description: str = ""
    previous_allocation: str = ""
    next_allocation: str = ""
    reschedule_events: tuple[RescheduleEvent, ...] = field(default_factory=tuple)
    # The deployment that placed it ("" outside one); its health there is the deployment's.
    deployment_id: str = ""
    # Preemption: the allocations this one evicted, and the one that evicted this one.
    preempted_allocations: tuple[str, ...] = ()
    preempted_by_allocation: str = ""
    create_index: int = 0
    modify_index: int = 0
    alloc_modify_index: int = 0
    create_time: int = 0
    modify_time: int = 0

    @property
    def index(self) -> int:
        """The name index: `web.api[7]` -> 7."""
        start = self.name.rfind("[")
        if start < 0 or not self.name.endswith("]"):
            return -1
        try:
            return int(self.name[start + 1 : -1])
        except ValueError:
            return -1

    def server_terminal(self) -> bool:
        return self.desired_status is not DesiredStatus.RUN

    def client_terminal(self) -> bool:
        return self.client_status in CLIENT_TERMINAL

    def reschedule_eligible(self, policy: ReschedulePolicy, now_ns: int) -> bool:
        """Nomad's RescheduleEligible: whether `policy` allows this allocation one more
        reschedule, given the ones it already had."""
        return policy.allows_another((e.reschedule_time for e in self.reschedule_events), now_ns)

    def terminal(self) -> bool:
        """Terminal on either side: it no longer holds (or will soon release) its resources."""
        return self.desired_status is not DesiredStatus.RUN or self.client_status in CLIENT_TERMINAL


def alloc_name(job_id: str, group: str, index: int) -> str:
    return f"{job_id}.{group}[{index}]"


install_fast_inits(__name__)
