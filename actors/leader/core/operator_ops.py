"""Operator writes on nodes and allocations: drain, eligibility, stopping one allocation,
re-evaluating a job (Nomad's Node.UpdateDrain, Node.UpdateEligibility, Alloc.Stop and
Job.Evaluate). Each returns the changes to commit and the evals it created.

Draining makes the node ineligible and marks its live service and system allocations for
migration (`DesiredTransition.Migrate`, as Nomad's drainer does); the reconciler then stops
each marked allocation and places its replacement elsewhere. Batch allocations (runs' ranks
among them) are left to finish, as Nomad does, until the drain's deadline: then whatever is
left is forced off (`force_drain`, called by the leader's timer; a `-force` drain does it at
once). The drain completes (its strategy is cleared, the node stays ineligible) once no live
allocation is left on the node: see `completed_drains`. Unlike Nomad's drainer, migrations are
not paced by `migrate.max_parallel`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from actors.state import StateReader
from contracts import (
    Allocation,
    DesiredTransition,
    DrainStrategy,
    Evaluation,
    JobType,
    Node,
    NodeEligibility,
    TriggeredBy,
)
from contracts.errors import NotFoundError, ValidationError
from contracts.share import is_run
from contracts.state_log import StateChange, UpsertAllocs, UpsertEvals, UpsertNodes

EvalFactory = Callable[..., Evaluation]  # (namespace, job_id, job_type, trigger, node_id=)
NodeEvals = Callable[..., list[Evaluation]]  # (node_id, include_system=)


@dataclass(slots=True)
class OperatorWrite:
    changes: list[StateChange] = field(default_factory=list)
    eval_ids: tuple[str, ...] = ()


def _require_node(state: StateReader, node_id: str) -> Node:
    node = state.node(node_id)
    if node is None:
        raise NotFoundError(f'node "{node_id}" not found')
    return node


def drain_node(
    state: StateReader,
    node_id: str,
    drain: DrainStrategy | None,
    *,
    mark_eligible: bool,
    now_ns: int,
    new_eval: EvalFactory,
    node_evals: NodeEvals,
) -> OperatorWrite:
    """Start (drain set) or cancel (None) a drain; cancelling with mark_eligible makes the
    node eligible again, which re-evaluates the system jobs and blocked work."""
    node = _require_node(state, node_id)
    if drain is not None:
        strategy = dataclasses.replace(drain, started_at=drain.started_at or now_ns)
        drained = dataclasses.replace(
            node,
            drain_strategy=strategy,
            scheduling_eligibility=NodeEligibility.INELIGIBLE,
            status_updated_at=now_ns,
        )
        marked, evals, staying = _migrations(
            state, node_id, strategy, force=strategy.forced, now_ns=now_ns, new_eval=new_eval
        )
        if not marked and not staying:
            # Nothing to migrate: the drain is complete at once (the node stays ineligible).
            drained = dataclasses.replace(drained, drain_strategy=None)
        changes: list[StateChange] = [UpsertNodes((drained,))]
        if marked or evals:
            changes.append(UpsertAllocs(tuple(marked), tuple(evals)))
        return OperatorWrite(changes, tuple(e.id for e in evals))
    eligibility = NodeEligibility.ELIGIBLE if mark_eligible else node.scheduling_eligibility
    undrained = dataclasses.replace(
        node, drain_strategy=None, scheduling_eligibility=eligibility, status_updated_at=now_ns
    )
    return _with_node_evals(undrained, node, node_evals)


def force_drain(
    state: StateReader, node_id: str, started_at: int, *, now_ns: int, new_eval: EvalFactory
) -> OperatorWrite:
    """The drain's deadline passed: every allocation still on the node migrates now, batch
    included. Nothing if the drain that set the deadline was cancelled or replaced (another
    `started_at`) or has completed."""
    node = state.node(node_id)
    strategy = node.drain_strategy if node is not None else None
    if strategy is None or strategy.started_at != started_at:
        return OperatorWrite()
    marked, evals, _ = _migrations(
        state, node_id, strategy, force=True, now_ns=now_ns, new_eval=new_eval
    )
    if not marked and not evals:
        return OperatorWrite()
    return OperatorWrite([UpsertAllocs(tuple(marked), tuple(evals))], tuple(e.id for e in evals))


def _migrations(
    state: StateReader,
    node_id: str,
    drain: DrainStrategy,
    *,
    force: bool,
    now_ns: int,
    new_eval: EvalFactory,
) -> tuple[list[Allocation], list[Evaluation], int]:
    """The node's live allocations to mark for migration now, one node-drain eval per job
    they belong to, and how many live allocations stay for now (batch work before the
    deadline). Runs' ranks are never marked: a rank cannot be placed again on its own, so the
    leader ends the run instead when the drain is forced (see runs.py)."""
    marked: list[Allocation] = []
    evals: dict[tuple[str, str], Evaluation] = {}
    staying = 0
    for alloc in state.allocs_by_node(node_id):
        if alloc.terminal() or alloc.desired_transition.migrate:
            continue
        job = state.job(alloc.namespace, alloc.job_id)
        if job is None:
            continue
        if drain.ignore_system_jobs and job.type in (JobType.SYSTEM, JobType.SYSBATCH):
            continue
        if is_run(job) or (job.type == JobType.BATCH and not force):
            staying += 1
            continue
        marked.append(
            dataclasses.replace(
                alloc, desired_transition=DesiredTransition(migrate=True), modify_time=now_ns
            )
        )
        key = (job.namespace, job.id)
        if key not in evals:
            evals[key] = new_eval(
                job.namespace, job.id, job.type, TriggeredBy.NODE_DRAIN, node_id=node_id
            )
    return marked, list(evals.values()), staying


def set_eligibility(
    state: StateReader, node_id: str, eligible: bool, *, now_ns: int, node_evals: NodeEvals
) -> OperatorWrite:
    node = _require_node(state, node_id)
    if eligible and node.drain:
        raise ValidationError(
            "can not set node's scheduling eligibility to eligible while it is draining"
        )
    wanted = NodeEligibility.ELIGIBLE if eligible else NodeEligibility.INELIGIBLE
    if node.scheduling_eligibility is wanted:
        return OperatorWrite()
    updated = dataclasses.replace(node, scheduling_eligibility=wanted, status_updated_at=now_ns)
    return _with_node_evals(updated, node, node_evals)


def _with_node_evals(updated: Node, previous: Node, node_evals: NodeEvals) -> OperatorWrite:
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
    _require_node(state, node_id)
    evals = node_evals(node_id, include_system=True)
    changes: list[StateChange] = [UpsertEvals(tuple(evals))] if evals else []
    return OperatorWrite(changes, tuple(e.id for e in evals))


def completed_drains(
    state: StateReader, finished: Iterable[Allocation], *, now_ns: int
) -> list[Node]:
    """Draining nodes left with no live allocation once `finished` are terminal: their drain
    is complete (strategy cleared; the node stays ineligible, as in Nomad)."""
    done_ids = {a.id for a in finished}
    done: list[Node] = []
    for node_id in {a.node_id for a in finished}:
        node = state.node(node_id)
        if node is None or not node.drain:
            continue
        if all(a.terminal() or a.id in done_ids for a in state.allocs_by_node(node_id)):
            done.append(dataclasses.replace(node, drain_strategy=None, status_updated_at=now_ns))
    return done
