"""Evaluations: the unit of scheduling work, and the metrics of failed placements."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from contracts.fast_init import install_fast_inits


class EvalStatus(StrEnum):
    PENDING = "pending"
    BLOCKED = "blocked"
    COMPLETE = "complete"
    FAILED = "failed"
    CANCELED = "canceled"


EVAL_TERMINAL = frozenset({EvalStatus.COMPLETE, EvalStatus.FAILED, EvalStatus.CANCELED})


class TriggeredBy(StrEnum):
    JOB_REGISTER = "job-register"
    JOB_DEREGISTER = "job-deregister"
    PERIODIC_JOB = "periodic-job"
    NODE_DRAIN = "node-drain"
    NODE_UPDATE = "node-update"
    ALLOC_STOP = "alloc-stop"
    SCHEDULED = "scheduled"
    ROLLING_UPDATE = "rolling-update"
    DEPLOYMENT_WATCHER = "deployment-watcher"
    FAILED_FOLLOW_UP = "failed-follow-up"
    MAX_PLAN_ATTEMPTS = "max-plan-attempts"
    ALLOC_FAILURE = "alloc-failure"
    QUEUED_ALLOCS = "queued-allocs"
    PREEMPTION = "preemption"
    JOB_SCALING = "job-scaling"
    RECONNECT = "reconnect"
    ALLOC_RESCHEDULE = "alloc-reschedule"


@dataclass(frozen=True, slots=True)
class AllocMetric:
    """Why a placement went where it did, or why it failed (Nomad's AllocMetric)."""

    nodes_evaluated: int = 0
    nodes_filtered: int = 0
    nodes_in_pool: int = 0
    nodes_available: dict[str, int] = field(default_factory=dict)
    class_filtered: dict[str, int] = field(default_factory=dict)
    constraint_filtered: dict[str, int] = field(default_factory=dict)
    nodes_exhausted: int = 0
    class_exhausted: dict[str, int] = field(default_factory=dict)
    dimension_exhausted: dict[str, int] = field(default_factory=dict)
    coalesced_failures: int = 0

    def reasons(self) -> list[str]:
        """Human-readable causes, per dimension: "cpu exhausted on 3 nodes", ..."""
        out = [f"{dim} exhausted on {n} node(s)" for dim, n in self.dimension_exhausted.items()]
        out += [f"{reason} filtered {n} node(s)" for reason, n in self.constraint_filtered.items()]
        if self.nodes_in_pool == 0:
            out.append("no nodes in the job's datacenters and node pool")
        return out


@dataclass(frozen=True, slots=True)
class DesiredUpdates:
    place: int = 0
    stop: int = 0
    migrate: int = 0
    in_place_update: int = 0
    destructive_update: int = 0
    ignore: int = 0
    canary: int = 0
    preemptions: int = 0


@dataclass(frozen=True, slots=True)
class PlanAnnotations:
    desired_tg_updates: dict[str, DesiredUpdates] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Evaluation:
    id: str
    namespace: str = "default"
    priority: int = 50
    type: str = "service"
    triggered_by: TriggeredBy = TriggeredBy.JOB_REGISTER
    job_id: str = ""
    job_modify_index: int = 0
    node_id: str = ""
    node_modify_index: int = 0
    status: EvalStatus = EvalStatus.PENDING
    status_description: str = ""
    wait_until: int = 0  # unix ns; 0 = now
    next_eval: str = ""
    previous_eval: str = ""
    blocked_eval: str = ""
    failed_tg_allocs: dict[str, AllocMetric] = field(default_factory=dict)
    class_eligibility: dict[str, bool] = field(default_factory=dict)
    escaped_computed_class: bool = False
    queued_allocations: dict[str, int] = field(default_factory=dict)
    plan_annotations: PlanAnnotations | None = None
    # A blocked gang's hold: instances single ranks must leave to it (see scheduler/share.py).
    reserved_nodes: tuple[str, ...] = field(default_factory=tuple)
    snapshot_index: int = 0
    create_index: int = 0
    modify_index: int = 0
    create_time: int = 0
    modify_time: int = 0

    def terminal(self) -> bool:
        return self.status in EVAL_TERMINAL


install_fast_inits(__name__)
