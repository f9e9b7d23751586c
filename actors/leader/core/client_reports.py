"""What client reports decide (Nomad's Node.UpdateAlloc): the reports are recorded; a
failed allocation (or a service that exited) gets an eval so the scheduler replaces it; a
failed rank ends its run; the drainer hears of what finished on draining nodes and of
draining jobs' allocations that came up (drainer.py); a replacement that came up lets a
rolling update without a deployment go on; and the deployment watcher hears of every
allocation of an active deployment (deployment_watcher.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from actors.leader.core.job_lifecycle import stop_job
from actors.leader.core.runs import ends_run
from contracts import CLIENT_TERMINAL, ClientStatus, Evaluation, Job, JobType, TriggeredBy
from contracts.state_log import (
    AllocClientUpdate,
    StateChange,
    UpdateAllocsClientStatus,
    UpsertEvals,
)

if TYPE_CHECKING:
    from actors.leader.core.leader import LeaderCore


def client_updates(core: LeaderCore, updates: Iterable[AllocClientUpdate]) -> list[StateChange]:
    """Record what clients report; failures (and services that exited) get an eval so the
    scheduler can replace them."""
    kept = []
    evals: dict[tuple[str, str], Evaluation] = {}
    # Jobs whose running reports need no eval (no job, stopped, no rollout pending):
    # decided once per batch, not per report (a batch holds thousands of one job's).
    quiet: set[tuple[str, str]] = set()
    ending: dict[tuple[str, str], StateChange | None] = {}
    for update in updates:
        alloc = core.state.alloc(update.alloc_id)
        if alloc is None or alloc.client_status is update.client_status:
            continue  # unknown or already recorded: reports are idempotent
        kept.append(update)
        key = (alloc.namespace, alloc.job_id)
        if key in evals or key in ending or alloc.server_terminal():
            continue
        running = update.client_status is ClientStatus.RUNNING
        if running and key in quiet:
            continue
        job = core.state.job(alloc.namespace, alloc.job_id)
        if job is None or job.stop:
            quiet.add(key)
            continue
        if ends_run(job, alloc, update.client_status):
            # A failed rank (or a finished master, with master-done) ends the run: the
            # job stops, and with it the other ranks.
            ending[key] = stop_job(
                core.state, job.namespace, job.id, now_ns=core.now_ns(), new_id=core.new_id
            ).change
            quiet.add(key)
            continue
        failed = update.client_status is ClientStatus.FAILED
        exited = update.client_status is ClientStatus.COMPLETE and job.type in (
            JobType.SERVICE,
            JobType.SYSTEM,
        )
        if failed or exited:
            evals[key] = core.eval_for(job.namespace, job.id, job.type, TriggeredBy.ALLOC_FAILURE)
        elif running:
            if _rollout_pending(core, job):
                # A replacement came up while older allocations remain: the next batch of
                # a rolling update (max_parallel) may go (Nomad's deployment watcher).
                evals[key] = core.eval_for(
                    job.namespace, job.id, job.type, TriggeredBy.ROLLING_UPDATE
                )
            else:
                quiet.add(key)
    changes: list[StateChange] = []
    if kept:
        changes.append(UpdateAllocsClientStatus(tuple(kept)))
        finished = [
            alloc
            for update in kept
            if update.client_status in CLIENT_TERMINAL
            and (alloc := core.state.alloc(update.alloc_id)) is not None
        ]
        changes += core.drainer.on_finished(finished)
        core.drainer.on_client_updates(core.deadlines, kept)
    if evals:
        changes.append(UpsertEvals(tuple(evals.values())))
    changes += [change for change in ending.values() if change is not None]
    if kept:
        watched = core.deployment_pending()
        core.watcher.on_client_updates(core.deadlines, kept, watched)
        changes += watched.changes(after=changes)
    return changes


def _rollout_pending(core: LeaderCore, job: Job) -> bool:
    """Older allocations remain under an update block with no active deployment to drive
    the rollout (a batch job's, or one whose deployment ended)."""
    if not any(tg.update is not None for tg in job.task_groups):
        return False
    deployment = core.state.latest_deployment(job.namespace, job.id)
    if deployment is not None and deployment.active:
        return False
    return any(
        not a.server_terminal() and a.job_modify_index != job.job_modify_index
        for a in core.state.allocs_by_job(job.namespace, job.id)
    )
