"""Operator writes on nodes and allocations: eligibility, stopping one allocation,
re-evaluating a job or a node (Nomad's Node.UpdateEligibility, Alloc.Stop, Job.Evaluate and
Node.Evaluate). Each returns the changes to commit and the evals it created. Drains
(Node.UpdateDrain) are the drainer's (drainer.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from actors.state import StateReader
from contracts import (
    DesiredTransition,
    Evaluation,
    JobType,
    Node,
    NodeEligibility,
    TriggeredBy,
)
from contracts.errors import NotFoundError, ValidationError
from contracts.state_log import StateChange, UpsertAllocs, UpsertEvals, UpsertNodes

EvalFactory = Callable[..., Evaluation]  # (namespace, job_id, job_type, trigger, node_id=)
NodeEvals = Callable[..., list[Evaluation]]  # (node_id, include_system=)


@dataclass(slots=True)
class OperatorWrite:
    changes: list[StateChange] = field(default_factory=list)
    eval_ids: tuple[str, ...] = ()


def require_node(state: StateReader, node_id: str) -> Node:
    node = state.node(node_id)
    if node is None:
        raise NotFoundError(f'node "{node_id}" not found')
    return node


def set_eligibility(
    state: StateReader, node_id: str, eligible: bool, *, now_ns: int, node_evals: NodeEvals
) -> OperatorWrite:
    node = require_node(state, node_id)
    if eligible and node.drain:
        raise ValidationError(
            "can not set node's scheduling eligibility to eligible while it is draining"
        )
    wanted = NodeEligibility.ELIGIBLE if eligible else NodeEligibility.INELIGIBLE
    if node.scheduling_eligibility is wanted:
        return OperatorWrite()
    updated = dataclasses.replace(node, scheduling_eligibility=wanted, status_updated_at=now_ns)
    return with_node_evals(updated, node, node_evals)


def with_node_evals(updated: Node, previous: Node, node_evals: NodeEvals) -> OperatorWrite:
    """A node that becomes eligible gets the system jobs and its own jobs re-evaluated."""
    changes: list[StateChange] = [UpsertNodes((updated,))]
    evals: list[Evaluation] = []
    if updated.ready() and not previous.ready():
        evals = node_evals(updated.id, include_system=True)
        if evals:
            changes.append(UpsertEvals(tuple(evals)))
    return OperatorWrite(changes, tuple(e.id for e in evals))


def stop_alloc(
    state: StateReader, alloc_id: str, *, now_ns: int, new_eval: EvalFactory
) -> OperatorWrite:
    """Nomad's Alloc.Stop: mark the allocation for migration and evaluate its job, so the
    scheduler stops it and places a replacement."""
    alloc = state.alloc(alloc_id)
    if alloc is None:
        raise NotFoundError(f'allocation "{alloc_id}" not found')
    job = state.job(alloc.namespace, alloc.job_id)
    job_type = job.type if job is not None else JobType.SERVICE
    ev = new_eval(alloc.namespace, alloc.job_id, job_type, TriggeredBy.ALLOC_STOP)
    marked = dataclasses.replace(
        alloc, desired_transition=DesiredTransition(migrate=True), modify_time=now_ns
    )
    return OperatorWrite([UpsertAllocs((marked,), (ev,))], (ev.id,))


def evaluate_job(
    state: StateReader, namespace: str, job_id: str, *, new_eval: EvalFactory
) -> OperatorWrite:
    """Nomad's Job.Evaluate: a fresh job-register eval for the job as it stands."""
    job = state.job(namespace, job_id)
    if job is None:
        raise NotFoundError(f'job "{job_id}" not found')
    if job.is_periodic:
        raise ValidationError("can't evaluate periodic job")
    if job.is_parameterized:
        raise ValidationError("can't evaluate parameterized job")
    ev = new_eval(namespace, job_id, job.type, TriggeredBy.JOB_REGISTER)
    return OperatorWrite([UpsertEvals((ev,))], (ev.id,))


def evaluate_node(state: StateReader, node_id: str, *, node_evals: NodeEvals) -> OperatorWrite:
    """Nomad's Node.Evaluate: a node-update eval for each job with allocations on the node
    and each system job (createNodeEvals)."""
    require_node(state, node_id)
    evals = node_evals(node_id, include_system=True)
    changes: list[StateChange] = [UpsertEvals(tuple(evals))] if evals else []
    return OperatorWrite(changes, tuple(e.id for e in evals))
