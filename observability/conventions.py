"""Span names, attribute keys and event names drover emits, and builders for their attributes.

Everything that writes a span or an event, and everything that reads spans back (the conflict
report, the waterfall), goes through these names; nothing else spells them. The builders take
plain values (no actor import) and leave out what is `None`, so a call site passes what it has.

Messaging spans follow the OpenTelemetry messaging semantic conventions: name
`"{operation type} {destination}"` (`send drover:plans`, `process drover:evals`), kind PRODUCER
for send and CONSUMER for receive/process, and the `messaging.*` attributes below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

Attributes = dict[str, AttributeValue]

# -- span names -------------------------------------------------------------------------------
# One trace per evaluation: enqueue -> delivery -> schedule (reconcile, feasibility, ranking)
# -> plan submit -> plan apply -> allocation start. Retries are further plan.submit/plan.apply
# spans (attempt 2, 3, ...) under the same eval.schedule span.

SPAN_EVAL_ENQUEUE: Final = "eval.enqueue"
"""Where an evaluation is created (job register, node update, ...): the root of its trace."""
SPAN_EVAL_SCHEDULE: Final = "eval.schedule"
"""Worker: one scheduling pass over a delivered eval, through retries, until ack or nack. Its
end is the eval's completion for the conflict report's latency cost."""
SPAN_RECONCILE: Final = "schedule.reconcile"
SPAN_FEASIBILITY: Final = "schedule.feasibility"
SPAN_RANKING: Final = "schedule.ranking"
# Before submitting, a plan moved onto the fresher state the worker's replica reached
# (actors/worker/core/scheduler/rebase.py): nodes moved, full ones taken back, placements redone.
SPAN_REBASE: Final = "schedule.rebase"
SPAN_PLAN_SUBMIT: Final = "plan.submit"
"""Worker: one plan attempt, from send to the leader's result. Its start is the submission."""
SPAN_PLAN_APPLY: Final = "plan.apply"
"""Leader: the re-check and commit of one plan; carries the node-rejected events."""
SPAN_PLAN_APPLY_BATCH: Final = "plan.apply_batch"
"""Leader: a batch of plans applied together; linked (not parented) to each plan's context."""
SPAN_EVAL_ACK: Final = "eval.ack"
SPAN_EVAL_NACK: Final = "eval.nack"
SPAN_ALLOC_START: Final = "alloc.start"
"""Client agent: an allocation's task(s) started by a driver."""

# -- messaging semantic conventions ------------------------------------------------------------

MESSAGING_SYSTEM: Final = "messaging.system"
MESSAGING_DESTINATION: Final = "messaging.destination.name"
MESSAGING_OPERATION_TYPE: Final = "messaging.operation.type"
MESSAGING_OPERATION_NAME: Final = "messaging.operation.name"
MESSAGING_CONSUMER_GROUP: Final = "messaging.consumer.group.name"
MESSAGING_MESSAGE_ID: Final = "messaging.message.id"
MESSAGING_BATCH_COUNT: Final = "messaging.batch.message_count"

MESSAGING_SYSTEM_REDIS: Final = "redis"
"""No well-known value exists for Redis streams; the conventions allow a custom one."""

OP_SEND: Final = "send"
OP_RECEIVE: Final = "receive"
OP_PROCESS: Final = "process"
OP_SETTLE: Final = "settle"
OP_CREATE: Final = "create"

# -- drover attributes ------------------------------------------------------------------------

EVAL_ID: Final = "drover.eval.id"
EVAL_TRIGGER: Final = "drover.eval.trigger"
EVAL_TYPE: Final = "drover.eval.type"
"""Scheduler type: service, batch, system."""
EVAL_PRIORITY: Final = "drover.eval.priority"
EVAL_OUTCOME: Final = "drover.eval.outcome"
"""complete, failed, blocked, nacked, cancelled."""
EVAL_DELIVERY: Final = "drover.eval.delivery"
"""The broker's delivery count for this eval (1 on first delivery)."""
JOB_ID: Final = "drover.job.id"
NAMESPACE: Final = "drover.namespace"
TASK_GROUP: Final = "drover.task_group"

PLAN_ID: Final = "drover.plan.id"
PLAN_ATTEMPT: Final = "drover.plan.attempt"
"""1 for an eval's first plan, 2 after the first partial commit, ..."""
PLAN_SNAPSHOT_INDEX: Final = "drover.plan.snapshot_index"
PLAN_PLACEMENTS: Final = "drover.plan.placements"
PLAN_STOPS: Final = "drover.plan.stops"
PLAN_COMMITTED: Final = "drover.plan.committed"
"""Placements the leader committed."""
PLAN_REJECTED_NODES: Final = "drover.plan.rejected_nodes"
PLAN_REFRESH_INDEX: Final = "drover.plan.refresh_index"
PLAN_COMMIT_INDEX: Final = "drover.plan.commit_index"
PLAN_OUTCOME: Final = "drover.plan.outcome"
"""committed, partial, rejected, no_op."""
PLAN_BATCH_SIZE: Final = "drover.plan.batch_size"

NODES_TOTAL: Final = "drover.nodes.total"
"""Nodes a scheduling step started from."""
NODES_FEASIBLE: Final = "drover.nodes.feasible"
NODES_FILTERED: Final = "drover.nodes.filtered"
NODES_EXHAUSTED: Final = "drover.nodes.exhausted"
NODES_RANKED: Final = "drover.nodes.ranked"
PLACEMENTS_WANTED: Final = "drover.placements.wanted"
PLACEMENTS_FAILED: Final = "drover.placements.failed"

NODE_ID: Final = "drover.node.id"
ALLOC_ID: Final = "drover.alloc.id"
ALLOC_CLIENT_STATUS: Final = "drover.alloc.client_status"
ALLOC_DRIVER: Final = "drover.alloc.driver"

# -- the plan-conflict event ----------------------------------------------------------------------

EVENT_NODE_REJECTED: Final = "plan.node_rejected"
"""Added to the plan.apply span (or plan.apply_batch) once per node the leader rejected."""

REJECT_REASON: Final = "drover.reject.reason"
"""The leader's reason verbatim: "cpu exhausted", "node does not exist", ..."""
REJECT_DIMENSION: Final = "drover.reject.dimension"
"""cpu, memory, disk, devices, node or other; see `reject_dimension`."""
ASK_PREFIX: Final = "drover.ask."
FREE_PREFIX: Final = "drover.free."
RESOURCE_KEYS: Final = ("cpu", "memory_mb", "disk_mb", "gpus")

CONFLICT_EVAL_ID: Final = "drover.conflict.eval.id"
"""The eval of the committed plan that took the capacity since the worker's snapshot."""
CONFLICT_JOB_ID: Final = "drover.conflict.job.id"
CONFLICT_PLAN_ID: Final = "drover.conflict.plan.id"
CONFLICT_COMMIT_INDEX: Final = "drover.conflict.commit_index"

DIMENSIONS: Final = ("cpu", "memory", "disk", "devices", "node", "other")


def reject_dimension(reason: str) -> str:
    """The dimension a leader's rejection reason is about.

    >>> reject_dimension("cpu exhausted"), reject_dimension("node is not ready for placements")
    ('cpu', 'node')
    """
    text = reason.lower()
    if "cpu" in text:
        return "cpu"
    if "memory" in text:
        return "memory"
    if "disk" in text:
        return "disk"
    if "device" in text or "gpu" in text:
        return "devices"
    if "node" in text:
        return "node"
    return "other"


def plan_id(eval_id: str, attempt: int) -> str:
    """The id of an eval's n-th plan: plans carry no id of their own, and an eval's attempts
    are numbered from 1, so `"{eval_id}#{attempt}"` names each plan uniquely."""
    return f"{eval_id}#{attempt}"


def span_name(operation_type: str, destination: str) -> str:
    """Messaging span name: `"{operation} {destination}"`, e.g. `process drover:evals`."""
    return f"{operation_type} {destination}"


def _without_none(values: Mapping[str, AttributeValue | None]) -> Attributes:
    return {key: value for key, value in values.items() if value is not None}


def messaging_attributes(
    destination: str,
    operation_type: str,
    *,
    operation_name: str | None = None,
    consumer_group: str | None = None,
    message_id: str | None = None,
    batch_count: int | None = None,
) -> Attributes:
    """`messaging.*` attributes for a span over a Redis stream (`destination` = stream key)."""
    return _without_none(
        {
            MESSAGING_SYSTEM: MESSAGING_SYSTEM_REDIS,
            MESSAGING_DESTINATION: destination,
            MESSAGING_OPERATION_TYPE: operation_type,
            MESSAGING_OPERATION_NAME: operation_name,
            MESSAGING_CONSUMER_GROUP: consumer_group,
            MESSAGING_MESSAGE_ID: message_id,
            MESSAGING_BATCH_COUNT: batch_count,
        }
    )


def eval_attributes(
    eval_id: str,
    *,
    job_id: str | None = None,
    namespace: str | None = None,
    trigger: str | None = None,
    scheduler_type: str | None = None,
    priority: int | None = None,
    delivery: int | None = None,
) -> Attributes:
    return _without_none(
        {
            EVAL_ID: eval_id,
            JOB_ID: job_id,
            NAMESPACE: namespace,
            EVAL_TRIGGER: trigger,
            EVAL_TYPE: scheduler_type,
            EVAL_PRIORITY: priority,
            EVAL_DELIVERY: delivery,
        }
    )


def plan_attributes(
    eval_id: str,
    attempt: int,
    *,
    job_id: str | None = None,
    namespace: str | None = None,
    placements: int | None = None,
    stops: int | None = None,
    snapshot_index: int | None = None,
) -> Attributes:
    """For plan.submit and plan.apply; sets `drover.plan.id` to `plan_id(eval_id, attempt)`."""
    return _without_none(
        {
            EVAL_ID: eval_id,
            PLAN_ID: plan_id(eval_id, attempt),
            PLAN_ATTEMPT: attempt,
            JOB_ID: job_id,
            NAMESPACE: namespace,
            PLAN_PLACEMENTS: placements,
            PLAN_STOPS: stops,
            PLAN_SNAPSHOT_INDEX: snapshot_index,
        }
    )


def plan_outcome(placements: int, committed: int, rejected_nodes: int) -> str:
    """committed / partial / rejected / no_op, from a plan's counts."""
    if rejected_nodes == 0:
        return "committed" if placements or committed else "no_op"
    return "partial" if committed else "rejected"


def plan_result_attributes(
    *,
    placements: int,
    committed: int,
    rejected_nodes: int,
    refresh_index: int | None = None,
    commit_index: int | None = None,
) -> Attributes:
    """The leader's verdict on a plan, set on plan.apply (and plan.submit when it returns)."""
    return _without_none(
        {
            PLAN_COMMITTED: committed,
            PLAN_REJECTED_NODES: rejected_nodes,
            PLAN_OUTCOME: plan_outcome(placements, committed, rejected_nodes),
            PLAN_REFRESH_INDEX: refresh_index,
            PLAN_COMMIT_INDEX: commit_index,
        }
    )


def node_count_attributes(
    *,
    total: int | None = None,
    feasible: int | None = None,
    filtered: int | None = None,
    exhausted: int | None = None,
    ranked: int | None = None,
    task_group: str | None = None,
) -> Attributes:
    """For the schedule.feasibility / schedule.ranking spans."""
    return _without_none(
        {
            NODES_TOTAL: total,
            NODES_FEASIBLE: feasible,
            NODES_FILTERED: filtered,
            NODES_EXHAUSTED: exhausted,
            NODES_RANKED: ranked,
            TASK_GROUP: task_group,
        }
    )


@dataclass(frozen=True, slots=True)
class ResourceAmounts:
    """Resources on one node as plain ints: cpu in MHz, memory and disk in MB, GPU count."""

    cpu: int = 0
    memory_mb: int = 0
    disk_mb: int = 0
    gpus: int = 0

    def attributes(self, prefix: str) -> Attributes:
        return {
            f"{prefix}cpu": int(self.cpu),
            f"{prefix}memory_mb": int(self.memory_mb),
            f"{prefix}disk_mb": int(self.disk_mb),
            f"{prefix}gpus": int(self.gpus),
        }

    @classmethod
    def from_attributes(cls, attributes: Mapping[str, object], prefix: str) -> ResourceAmounts:
        def get(key: str) -> int:
            value = attributes.get(prefix + key)
            return int(value) if isinstance(value, int | float) else 0

        return cls(get("cpu"), get("memory_mb"), get("disk_mb"), get("gpus"))


@dataclass(frozen=True, slots=True)
class PlanRef:
    """Which plan: its eval, job and plan id (`plan_id(eval_id, attempt)`)."""

    eval_id: str
    job_id: str
    plan_id: str
    attempt: int | None = None
    namespace: str | None = None
    commit_index: int | None = None


def node_rejected_attributes(
    *,
    node_id: str,
    reason: str,
    rejected: PlanRef,
    asked: ResourceAmounts,
    free: ResourceAmounts,
    taken_by: PlanRef | None = None,
    dimension: str | None = None,
) -> Attributes:
    """Attributes of one `plan.node_rejected` event.

    `rejected` is the plan the leader turned down on this node (repeated on the event so an
    event on a batch span stands alone); `asked` what it wanted on the node, `free` what the
    node had left at apply time; `taken_by` the committed plan that took the capacity since
    the worker's snapshot, when the leader can tell.
    """
    attrs: Attributes = {
        NODE_ID: node_id,
        REJECT_REASON: reason,
        REJECT_DIMENSION: dimension or reject_dimension(reason),
        EVAL_ID: rejected.eval_id,
        JOB_ID: rejected.job_id,
        PLAN_ID: rejected.plan_id,
    }
    if rejected.attempt is not None:
        attrs[PLAN_ATTEMPT] = rejected.attempt
    if rejected.namespace is not None:
        attrs[NAMESPACE] = rejected.namespace
    attrs.update(asked.attributes(ASK_PREFIX))
    attrs.update(free.attributes(FREE_PREFIX))
    if taken_by is not None:
        attrs[CONFLICT_EVAL_ID] = taken_by.eval_id
        attrs[CONFLICT_JOB_ID] = taken_by.job_id
        attrs[CONFLICT_PLAN_ID] = taken_by.plan_id
        if taken_by.commit_index is not None:
            attrs[CONFLICT_COMMIT_INDEX] = taken_by.commit_index
    return attrs


def record_node_rejected(
    span: Span,
    *,
    node_id: str,
    reason: str,
    rejected: PlanRef,
    asked: ResourceAmounts,
    free: ResourceAmounts,
    taken_by: PlanRef | None = None,
    dimension: str | None = None,
    timestamp_ns: int | None = None,
) -> None:
    """Add one `plan.node_rejected` event to `span` (see `node_rejected_attributes`)."""
    span.add_event(
        EVENT_NODE_REJECTED,
        node_rejected_attributes(
            node_id=node_id,
            reason=reason,
            rejected=rejected,
            asked=asked,
            free=free,
            taken_by=taken_by,
            dimension=dimension,
        ),
        timestamp=timestamp_ns,
    )
