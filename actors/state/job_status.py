"""Nomad's getJobStatus, computed from per-job counters instead of scanning allocs and evals."""

from __future__ import annotations

from typing import NamedTuple

from contracts.job import Job, JobStatus, JobType


class JobActivity(NamedTuple):
    """What the status depends on: counts of the job's allocs and evals (exact job id).
    A named tuple: every store builds one per job an entry touched, and a tuple is built
    in a third of a frozen record's time."""

    live_allocs: int = 0
    total_allocs: int = 0
    live_evals: int = 0
    total_evals: int = 0


def compute_job_status(job: Job, activity: JobActivity, *, eval_delete: bool = False) -> JobStatus:
    """getJobStatus with the #24974 fix (a stopped job with nothing live is dead).

    - system jobs, and periodic and parameterized templates, are running until stopped (Nomad
      exempts only `system` of the types: a sysbatch job runs to completion like batch, so it
      goes dead once its work is done);
    - any non-terminal alloc: running;
    - any non-terminal eval: pending;
    - any (terminal) alloc or eval, a deleted eval, or job.stop: dead;
    - otherwise (nothing yet): pending.
    """
    decided = status_from_live(job, activity.live_allocs, activity.live_evals)
    if decided is not None:
        return decided
    if eval_delete or activity.total_allocs or activity.total_evals or job.stop:
        return JobStatus.DEAD
    return JobStatus.PENDING


def status_from_live(job: Job, live_allocs: int, live_evals: int) -> JobStatus | None:
    """The status where the job's type and its live counts decide it (most of the time: a
    job with anything live), None where the totals must (`compute_job_status`): a store
    then counts them only when they matter."""
    if job.type is JobType.SYSTEM or job.is_template:
        return JobStatus.DEAD if job.stop else JobStatus.RUNNING
    if live_allocs > 0:
        return JobStatus.RUNNING
    if live_evals > 0:
        return JobStatus.PENDING
    return None
