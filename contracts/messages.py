"""Messages the actors exchange over Redis streams (besides the state log, state_log.py).

Every stream entry is an `Envelope`: the message type, its JSON body (PascalCase, via the
codec) and the W3C trace context of the span that sent it, so a trace follows an evaluation
across every hop without any record carrying tracing fields.

Streams (names in `actors/streams/names.py`):
    state log        leader -> everyone       LogEntry (committed changes, in index order)
    deliveries       broker -> workers        EvalDelivery (consumer group "workers")
    eval acks        workers -> broker        EvalAck
    plans            workers -> leader        PlanSubmission (consumer group "leader")
    plan results     leader -> one worker     PlanResponse (one stream per worker)
    requests         API/agents -> leader     LeaderRequest (jobs, nodes, evals, client updates)
    agent commands   leader -> agents         nothing: agents tail the state log for their nodes
    node commands    API -> one node's agent  NodeCommand (signal, client GC), one stream per
                                              node; replies on a list per command
                                              (contracts/node_commands.py)
    dead letters     anyone                   DeadLetter (undecodable or unknown messages)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from contracts.evaluation import Evaluation
from contracts.fast_init import install_fast_inits
from contracts.job import Job
from contracts.node import DrainStrategy, Node
from contracts.plan import Plan, PlanResult
from contracts.scheduler_config import SchedulerConfiguration
from contracts.state_log import AllocClientUpdate


@dataclass(frozen=True, slots=True)
class Envelope:
    """What a stream entry carries. `body` is the encoded message, `trace` its context."""

    type: str
    body: bytes
    trace: dict[str, str] = field(default_factory=dict)


# -- broker <-> workers ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvalDelivery:
    """An evaluation handed to one worker. `token` fences everything the worker does with it:
    the leader refuses plans whose token is no longer the eval's outstanding one."""

    eval: Evaluation
    token: str
    wait_index: int


class AckOutcome(StrEnum):
    ACK = "ack"
    NACK = "nack"


@dataclass(frozen=True, slots=True)
class EvalAck:
    eval_id: str
    token: str
    outcome: AckOutcome
    worker: str = ""
    reason: str = ""


# -- workers <-> leader ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanSubmission:
    """A plan and where to answer. `attempt` numbers a worker's retries of one eval."""

    plan: Plan
    reply_to: str
    attempt: int = 1
    # Evaluations the scheduler wants written with the plan (blocked / follow-up evals),
    # committed atomically with the allocations.
    evals: tuple[Evaluation, ...] = ()
    # The eval's final status should this plan commit in full (the usual case): written in
    # the same entry, it spares the worker a request, the leader a commit and every follower
    # an entry. A partial commit leaves it out (the scheduler retries).
    completes: Evaluation | None = None


@dataclass(frozen=True, slots=True)
class PlanResponse:
    """The leader's verdict. Lean (the usual case): `result` carries only the rejected nodes
    and indexes, because what committed is exactly the plan minus those nodes (nothing, for
    an all-at-once plan with a rejection); `committed(plan)` rebuilds the full result, so
    a worker never decodes its own allocations back."""

    eval_id: str
    attempt: int
    result: PlanResult
    error: str = ""
    lean: bool = False
    completed: bool = False  # the submission's `completes` eval was committed with the plan
    # The leader's broker took that commit as the delivery's ack: the worker sends none.
    acked: bool = False

    def committed(self, plan: Plan) -> PlanResult:
        if not self.lean:
            return self.result
        rejected = {r.node_id for r in self.result.rejected_nodes}
        if plan.all_at_once and rejected:
            return self.result
        return PlanResult(
            node_update={n: a for n, a in plan.node_update.items() if n not in rejected},
            node_allocation={n: a for n, a in plan.node_allocation.items() if n not in rejected},
            rejected_nodes=self.result.rejected_nodes,
            refresh_index=self.result.refresh_index,
            alloc_index=self.result.alloc_index,
        )


# -- requests to the leader --------------------------------------------------------------------


class RequestKind(StrEnum):
    REGISTER_JOB = "register-job"
    STOP_JOB = "stop-job"
    REVERT_JOB = "revert-job"
    SCALE_JOB = "scale-job"
    UPSERT_NODES = "upsert-nodes"
    NODE_HEARTBEAT = "node-heartbeat"  # node_ids: still alive
    CLIENT_UPDATES = "client-updates"
    UPDATE_EVALS = "update-evals"
    SET_STABLE = "set-stable"  # version, stable
    EVALUATE_JOB = "evaluate-job"  # a fresh eval for the job as it is
    STOP_ALLOC = "stop-alloc"  # alloc_id: stop it and place a replacement
    DRAIN_NODE = "drain-node"  # node_ids[0], drain (None: stop draining), mark_eligible
    NODE_ELIGIBILITY = "node-eligibility"  # node_ids[0], eligible
    DELETE_NODES = "delete-nodes"  # node_ids: removed (a deleted fleet), their jobs re-evaluated
    NODE_EVALUATE = "node-evaluate"  # node_ids[0]: node-update evals for its jobs (Node.Evaluate)
    SYSTEM_GC = "system-gc"  # collect terminal evals/allocs and dead jobs (/v1/system/gc)
    # job_id (a parameterized template), meta, payload, idempotency_token, id_prefix_template
    DISPATCH_JOB = "dispatch-job"
    FORCE_PERIODIC = "force-periodic"  # job_id: launch the periodic job's child now
    # deployment_id, and: groups (none: all) / pause / healthy_ and unhealthy_alloc_ids
    PROMOTE_DEPLOYMENT = "promote-deployment"
    PAUSE_DEPLOYMENT = "pause-deployment"
    FAIL_DEPLOYMENT = "fail-deployment"
    SET_ALLOC_HEALTH = "set-alloc-health"
    # scheduler_config; enforce_index: set only if the current one is at that modify index
    SET_SCHEDULER_CONFIG = "set-scheduler-config"


@dataclass(frozen=True, slots=True)
class LeaderRequest:
    """A write asked of the leader. Only the fields of its kind are set."""

    kind: RequestKind
    request_id: str = ""
    reply_to: str = ""
    job: Job | None = None
    namespace: str = "default"
    job_id: str = ""
    version: int = 0
    group: str = ""
    count: int | None = None
    message: str = ""
    error: bool = False  # SCALE_JOB: the scaling event reports an error (Nomad's Error)
    purge: bool = False
    preserve_counts: bool = False
    enforce_index: int | None = None
    eval_priority: int | None = None  # REGISTER_JOB/STOP_JOB: the eval's priority (Nomad's)
    nodes: tuple[Node, ...] = ()
    node_ids: tuple[str, ...] = ()
    updates: tuple[AllocClientUpdate, ...] = ()
    evals: tuple[Evaluation, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    alloc_id: str = ""
    stable: bool = False
    drain: DrainStrategy | None = None
    mark_eligible: bool = False
    eligible: bool = True
    # Writes made on behalf of an evaluation commit only while its delivery token is current.
    payload: str = ""  # DISPATCH_JOB: base64, as Nomad's JSON carries it
    idempotency_token: str = ""  # DISPATCH_JOB
    id_prefix_template: str = ""  # DISPATCH_JOB
    deployment_id: str = ""  # the *_DEPLOYMENT kinds and SET_ALLOC_HEALTH
    groups: tuple[str, ...] = ()  # PROMOTE_DEPLOYMENT: none means every group
    pause: bool = False  # PAUSE_DEPLOYMENT: False resumes
    healthy_alloc_ids: tuple[str, ...] = ()  # SET_ALLOC_HEALTH
    unhealthy_alloc_ids: tuple[str, ...] = ()
    scheduler_config: SchedulerConfiguration | None = None  # SET_SCHEDULER_CONFIG
    fence_eval_id: str = ""
    fence_token: str = ""


@dataclass(frozen=True, slots=True)
class LeaderResponse:
    request_id: str
    ok: bool
    index: int = 0
    eval_id: str = ""
    job_modify_index: int = 0
    error: str = ""
    warnings: tuple[str, ...] = ()
    eval_ids: tuple[str, ...] = ()  # when a write creates several (node drain/eligibility)
    error_kind: str = ""  # "not-found", "invalid" or "conflict": what the API maps to a status
    # DISPATCH_JOB / FORCE_PERIODIC: the child's ID; an idempotent dispatch that found its
    # child gives that child's create index (0: the child is created at `index`).
    dispatched_job_id: str = ""
    job_create_index: int = 0
    updated: bool = False  # SET_SCHEDULER_CONFIG: False when its check-and-set failed
    # The leader's latest index as it answered (>= index): a registration of a small job is
    # answered once the leader has placed it (actors/leader/local_scheduling.py), so a
    # replica at this index shows the placement too. 0: as `index`.
    visible_index: int = 0


# -- failures ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message a consumer could not handle, kept with the reason instead of being lost."""

    stream: str
    message_id: str
    consumer: str
    reason: str
    fields: dict[str, str] = field(default_factory=dict)


install_fast_inits(__name__)
