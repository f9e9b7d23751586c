"""Every record, message type and codec drover's actors exchange.

Records are frozen dataclasses: a state snapshot can share them with the live store safely,
and a change is always a new record (`dataclasses.replace`).
"""

from contracts.allocation import (
    CLIENT_TERMINAL,
    Allocation,
    ClientStatus,
    DesiredStatus,
    DesiredTransition,
    RescheduleEvent,
    alloc_name,
)
from contracts.codec import CodecError, dumps, from_wire, json_name, loads, to_wire
from contracts.constraints import Affinity, Constraint, Spread, SpreadTarget
from contracts.errors import ConflictError, NotFoundError, ValidationError
from contracts.evaluation import (
    AllocMetric,
    DesiredUpdates,
    EvalStatus,
    Evaluation,
    PlanAnnotations,
    TriggeredBy,
)
from contracts.job import (
    Job,
    JobStatus,
    JobType,
    MigrateStrategy,
    ReschedulePolicy,
    Task,
    TaskGroup,
    UpdateStrategy,
)
from contracts.node import DrainStrategy, DriverInfo, Node, NodeEligibility, NodeStatus
from contracts.plan import Plan, PlanResult, RejectedNode
from contracts.resources import (
    AllocatedDevice,
    AllocatedResources,
    DeviceInstance,
    DeviceRequest,
    NodeDeviceResource,
    NodeResources,
    ReservedResources,
    Resources,
)
from contracts.scaling import ScalingEvent, ScalingPolicy

__all__ = [
    "CLIENT_TERMINAL",
    "Affinity",
    "AllocMetric",
    "AllocatedDevice",
    "AllocatedResources",
    "Allocation",
    "ClientStatus",
    "CodecError",
    "ConflictError",
    "Constraint",
    "DesiredStatus",
    "DesiredTransition",
    "DesiredUpdates",
    "DeviceInstance",
    "DeviceRequest",
    "DrainStrategy",
    "DriverInfo",
    "EvalStatus",
    "Evaluation",
    "Job",
    "JobStatus",
    "JobType",
    "MigrateStrategy",
    "Node",
    "NodeDeviceResource",
    "NodeEligibility",
    "NodeResources",
    "NodeStatus",
    "NotFoundError",
    "Plan",
    "PlanAnnotations",
    "PlanResult",
    "RejectedNode",
    "RescheduleEvent",
    "ReschedulePolicy",
    "ReservedResources",
    "Resources",
    "ScalingEvent",
    "ScalingPolicy",
    "Spread",
    "SpreadTarget",
    "Task",
    "TaskGroup",
    "TriggeredBy",
    "UpdateStrategy",
    "ValidationError",
    "alloc_name",
    "dumps",
    "from_wire",
    "json_name",
    "loads",
    "to_wire",
]
