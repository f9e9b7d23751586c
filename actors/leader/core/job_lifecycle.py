"""Job lifecycle decisions (Nomad's Job.Register/Deregister/Revert/Stable/Scale endpoints).

Pure functions: each reads the current state, validates, and returns a `JobWrite` holding the
one change the leader must commit plus the reply fields. Time and ids are passed in, so the
same inputs always give the same change. The store does the rest when the change is applied
(version numbers, indexes, job status).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actors.state.reader import StateReader
from contracts.errors import ConflictError, NotFoundError, ValidationError
from contracts.evaluation import EvalStatus, Evaluation, TriggeredBy
from contracts.job import MAX_PRIORITY, MIN_PRIORITY, Job, JobStatus, JobType
from contracts.scaling import ScalingEvent
from contracts.state_log import (
    AppendScalingEvent,
    GroupScalingEvent,
    PurgeJob,
    StateChange,
    UpsertEvals,
    UpsertJob,
)

NewId = Callable[[], str]

# Nomad's job_max_count: the most allocations one job may ask for in total.
JOB_MAX_COUNT = 50_000
ENFORCE_INDEX_PREFIX = "Enforcing job modify index"


@dataclass(frozen=True, slots=True)
class JobWrite:
    """The change to commit (None: nothing to write) and what the API reply needs.

    eval: the evaluation as submitted; when it rides in an UpsertJob/PurgeJob the stored copy
    gets its job_modify_index (and create/modify indexes) stamped at commit, as Nomad's FSM.
    job_modify_index: the job's JobModifyIndex after the write when it is already known
    (no new version); None means it is the index the change is committed at.
    """

    change: StateChange | None
    eval: Evaluation | None = None
    job_modify_index: int | None = None
    warnings: tuple[str, ...] = ()

    @property
    def eval_id(self) -> str:
        return self.eval.id if self.eval is not None else ""

    def reply_job_modify_index(self, commit_index: int) -> int:
        return commit_index if self.job_modify_index is None else self.job_modify_index


def register_job(
    state: StateReader,
    job: Job,
    *,
    now_ns: int,
    new_id: NewId,
    preserve_counts: bool = False,
    enforce_index: int | None = None,
    eval_priority: int | None = None,
) -> JobWrite:
    """Register or update a job: a new version only if the spec changed; an eval unless the
    job is a periodic or parameterized template (never scheduled itself, as in Nomad)."""
    existing = state.job(job.namespace, job.id)
    _check_enforce_index(existing, enforce_index)
    _check_eval_priority(eval_priority)
    new = _fresh_version(job, now_ns)
    if existing is not None and preserve_counts:
        new = _preserve_counts(existing, new)
    if new.is_template:
        if existing is not None and not existing.spec_changed(new):
            return JobWrite(None, None, job_modify_index=existing.job_modify_index)
        return JobWrite(UpsertJob(new, ()), None)
    ev = _new_eval(new, TriggeredBy.JOB_REGISTER, now_ns, new_id, eval_priority)
    if existing is not None and not existing.spec_changed(new):
        # Re-running the same spec forces an evaluation without writing a version.
        ev = dataclasses.replace(ev, job_modify_index=existing.job_modify_index)
        return JobWrite(UpsertEvals((ev,)), ev, job_modify_index=existing.job_modify_index)
    return JobWrite(UpsertJob(new, (ev,)), ev)


def stop_job(
    state: StateReader,
    namespace: str,
    job_id: str,
    *,
    now_ns: int,
    new_id: NewId,
    purge: bool = False,
    eval_priority: int | None = None,
) -> JobWrite:
    """Deregister: a stopped copy as a new version, or (purge) delete the job and history.

    The job-deregister eval takes the job's type; Nomad always says "service" there, but our
    broker routes evals by type, and a system job's stop belongs to the system scheduler.
    """
    current = _require_job(state, namespace, job_id)
    _check_eval_priority(eval_priority)
    if current.is_template:
        # Nothing of a template's own runs (its children are jobs of their own): no eval.
        if purge:
            return JobWrite(PurgeJob(namespace, job_id, ()), None)
        return JobWrite(UpsertJob(current.replace(stop=True, stable=False), ()), None)
    ev = _new_eval(current, TriggeredBy.JOB_DEREGISTER, now_ns, new_id, eval_priority)
    if purge:
        return JobWrite(PurgeJob(namespace, job_id, (ev,)), ev)
    # A stopped version is never stable: auto-revert must not pick it.
    stopped = current.replace(stop=True, stable=False)
    return JobWrite(UpsertJob(stopped, (ev,)), ev)


def revert_job(
    state: StateReader,
    namespace: str,
    job_id: str,
    version: int,
    *,
    now_ns: int,
    new_id: NewId,
    enforce_prior_version: int | None = None,
) -> JobWrite:
    """Register an older version again (unstable, stopped only if it was)."""
    current = _require_job(state, namespace, job_id)
    if version == current.version:
        raise ValidationError("can't revert to current version")
    target = state.job_version(namespace, job_id, version)
    if target is None:
        raise NotFoundError(
            f'job "{job_id}" in namespace "{namespace}" at version {version} not found'
        )
    enforce_index = None
    if enforce_prior_version is not None:
        if current.version != enforce_prior_version:
            raise ConflictError(
                f"current job has version {current.version}; "
                f"enforcing version {enforce_prior_version}"
            )
        enforce_index = current.job_modify_index
    return register_job(
        state,
        target.replace(stable=False),
        now_ns=now_ns,
        new_id=new_id,
        enforce_index=enforce_index,
    )


def set_stable(
    state: StateReader, namespace: str, job_id: str, version: int, stable: bool
) -> JobWrite:
    """Mark a version (not necessarily the current one) stable or unstable, in place."""
    current = _require_job(state, namespace, job_id)
    row = state.job_version(namespace, job_id, version)
    if row is None:
        raise NotFoundError(f'job "{job_id}" at version {version} not found')
    if row.stable == stable:
        return JobWrite(None, job_modify_index=current.job_modify_index)
    change = UpsertJob(row.replace(stable=stable), keep_version=True)
    return JobWrite(change, job_modify_index=current.job_modify_index)


def scale_job(
    state: StateReader,
    namespace: str,
    job_id: str,
    group: str,
    count: int | None,
    *,
    message: str = "",
    error: bool = False,
    meta: Mapping[str, Any] | None = None,
    now_ns: int,
    new_id: NewId,
    enforce_index: int | None = None,
) -> JobWrite:
    """Job.Scale: with a count, a new version + job-scaling eval + event; else the event only."""
    if not group:
        raise ValidationError("missing task group name for scaling action")
    if count is not None:
        if count < 0:
            raise ValidationError("scaling action count can't be negative")
        if error:
            raise ValidationError("scaling action should not contain count if error is true")
    job = _require_job(state, namespace, job_id)
    if enforce_index is not None and enforce_index != job.job_modify_index:
        raise ConflictError(
            f"{ENFORCE_INDEX_PREFIX} {enforce_index}: job exists with conflicting job "
            f"modify index: {job.job_modify_index}"
        )
    tg = job.lookup_task_group(group)
    if tg is None:
        raise ValidationError(f'task group "{group}" specified for scaling does not exist in job')
    deployment = state.latest_deployment(namespace, job_id)
    if (
        count is not None
        and deployment is not None
        and deployment.active
        and deployment.job_create_index == job.create_index
    ):
        raise ValidationError("job scaling blocked due to active deployment")
    if job.stop and count is not None:
        # Nomad's server takes the count and writes a version that stays stopped; drover
        # refuses it, as the Nomad Autoscaler never scales a stopped job (its target is
        # not Ready). An event without a count is still recorded.
        raise ValidationError(f'job "{job_id}" is stopped: run it again before scaling it')
    event = ScalingEvent(
        time=now_ns,
        count=count,
        previous_count=tg.count,
        message=message,
        error=error,
        meta=dict(meta or {}),
    )
    if count is None:
        change = AppendScalingEvent(namespace, job_id, group, event)
        return JobWrite(change, job_modify_index=job.job_modify_index)
    _check_scale_bounds(job, group, count)
    groups = tuple(
        dataclasses.replace(g, count=count) if g.name == group else g for g in job.task_groups
    )
    scaled = job.replace(task_groups=groups, stable=False, submit_time=now_ns)
    ev = _new_eval(scaled, TriggeredBy.JOB_SCALING, now_ns, new_id, None)
    event = dataclasses.replace(event, eval_id=ev.id)
    return JobWrite(UpsertJob(scaled, (ev,), (GroupScalingEvent(group, event),)), ev)


# ---------------------------------------------------------------------------------------------


def _require_job(state: StateReader, namespace: str, job_id: str) -> Job:
    job = state.job(namespace, job_id)
    if job is None:
        raise NotFoundError(f'job "{job_id}" not found')
    return job


def _check_enforce_index(existing: Job | None, enforce_index: int | None) -> None:
    """Nomad's EnforceIndex check-and-set: 0 means "must not exist yet"."""
    if enforce_index is None:
        return
    if existing is not None:
        if enforce_index == 0:
            raise ConflictError(f"{ENFORCE_INDEX_PREFIX} 0: job already exists")
        if enforce_index != existing.job_modify_index:
            raise ConflictError(
                f"{ENFORCE_INDEX_PREFIX} {enforce_index}: job exists with conflicting job "
                f"modify index: {existing.job_modify_index}"
            )
    elif enforce_index != 0:
        raise ConflictError(f"{ENFORCE_INDEX_PREFIX} {enforce_index}: job does not exist")


def _check_eval_priority(priority: int | None) -> None:
    if priority is not None and not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValidationError(
            f"eval priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}, got {priority}"
        )


def _check_scale_bounds(job: Job, group: str, count: int) -> None:
    if job.type in (JobType.SYSTEM, JobType.SYSBATCH) and count > 1:
        raise ValidationError(
            f'group "{group}": jobs of type {job.type.value} can only be scaled between 0 and 1'
        )
    tg = job.lookup_task_group(group)
    policy = tg.scaling if tg is not None else None
    if policy is not None:
        if policy.min is not None and count < policy.min:
            raise ValidationError(
                f'group "{group}": count {count} is below scaling min {policy.min}'
            )
        if count > policy.max:
            raise ValidationError(
                f'group "{group}": count {count} is above scaling max {policy.max}'
            )
    total = count + sum(g.count for g in job.task_groups if g.name != group)
    if total > JOB_MAX_COUNT:
        raise ValidationError(
            f"job count {total} would exceed the maximum of {JOB_MAX_COUNT} allocations"
        )


def _fresh_version(job: Job, now_ns: int) -> Job:
    """Drop the lifecycle fields a client may have sent; the store assigns them."""
    return job.replace(
        status=JobStatus.PENDING,
        status_description="",
        version=0,
        stable=False,
        submit_time=now_ns,
        create_index=0,
        modify_index=0,
        job_modify_index=0,
    )


def _preserve_counts(existing: Job, new: Job) -> Job:
    """-preserve-counts: groups already in the current version keep their running count."""
    counts = {tg.name: tg.count for tg in existing.task_groups}
    groups = tuple(
        dataclasses.replace(tg, count=counts[tg.name]) if tg.name in counts else tg
        for tg in new.task_groups
    )
    return new.replace(task_groups=groups)


def _new_eval(
    job: Job, trigger: TriggeredBy, now_ns: int, new_id: NewId, priority: int | None
) -> Evaluation:
    return Evaluation(
        id=new_id(),
        namespace=job.namespace,
        priority=job.priority if priority is None else priority,
        type=job.type.value,
        triggered_by=trigger,
        job_id=job.id,
        status=EvalStatus.PENDING,
        create_time=now_ns,
        modify_time=now_ns,
    )
