"""Garbage collection forced by an operator (Nomad's `/v1/system/gc`: the core scheduler's
force-gc, every threshold at zero): terminal evaluations and their allocations, and dead jobs
with everything they left, are deleted for good.

Nomad's rules (`nomad/core_sched.go`), as drover's state holds them:

- an evaluation goes once it is terminal and every allocation it placed can go;
- an allocation can go once the client reported it terminal (complete, failed or lost: drover
  is stricter than Nomad here, which also takes allocations only the server stopped, because
  an agent may still be stopping those), unless it failed and may still be rescheduled
  (its job live, its group's reschedule policy allowing it, no replacement yet);
- a batch (or sysbatch) job's evaluations and current allocations go only with the job
  once it is dead (or when it is both stopped and dead): its terminal allocations from
  older versions may go before (Nomad's `olderVersionTerminalAllocs`), so the scheduler
  never runs a finished one again;
- a job that is stopped or dead goes (job, versions, scaling events) once all its
  evaluations and allocations can go.

Node GC (down nodes with nothing left on them) is not done: drover's agents re-register their
nodes, and a fleet's nodes leave when the fleet is deleted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from actors.state import StateReader
from contracts import Allocation, ClientStatus, Evaluation, Job, JobStatus, JobType
from contracts.state_log import DeleteEvals, PurgeJob, StateChange

_BATCH = (JobType.BATCH, JobType.SYSBATCH)
# IDs per DeleteEvals entry: one GC of a large cluster commits in several bounded entries.
BATCH = 4096


def collect_garbage(state: StateReader) -> list[StateChange]:
    """The changes that delete what can go now; empty when nothing can."""
    by_job: dict[tuple[str, str], list[Evaluation]] = {}
    for ev in state.evals():
        by_job.setdefault((ev.namespace, ev.job_id), []).append(ev)
    for alloc in state.allocs():  # jobs with allocations but no evaluation left
        by_job.setdefault((alloc.namespace, alloc.job_id), [])
    eval_ids: list[str] = []
    alloc_ids: list[str] = []
    purged: list[PurgeJob] = []
    for (namespace, job_id), evals in by_job.items():
        job = state.job(namespace, job_id)
        allocs = state.allocs_by_job(namespace, job_id)
        if job is not None and _job_collectable(job, evals, allocs):
            purged.append(PurgeJob(namespace, job_id))
            eval_ids += [e.id for e in evals]
            alloc_ids += [a.id for a in allocs]
            continue
        going, kept = _collectable_allocs(job, allocs)
        alloc_ids += [a.id for a in going]
        eval_ids += [e.id for e in _collectable_evals(job, evals, kept)]
    for job in state.jobs():  # a dead job with no evaluation or allocation at all
        if (job.namespace, job.id) not in by_job and _job_collectable(job, [], []):
            purged.append(PurgeJob(job.namespace, job.id))
    changes: list[StateChange] = [*purged]
    for evals_part, allocs_part in _batches(eval_ids, alloc_ids):
        changes.append(DeleteEvals(tuple(evals_part), tuple(allocs_part)))
    return changes


def _job_collectable(job: Job, evals: Sequence[Evaluation], allocs: Sequence[Allocation]) -> bool:
    if not (job.stop or job.status is JobStatus.DEAD):
        return False
    return all(e.terminal() for e in evals) and all(_alloc_collectable(job, a) for a in allocs)


def _collectable_allocs(
    job: Job | None, allocs: Sequence[Allocation]
) -> tuple[list[Allocation], list[Allocation]]:
    """(allocations that go now, those kept). A live batch job keeps every allocation of its
    current version: the scheduler counts finished ones as done."""
    going: list[Allocation] = []
    kept: list[Allocation] = []
    live_batch = _batch_kept(job)
    for alloc in allocs:
        current = job is not None and alloc.job_version >= job.version
        if _alloc_collectable(job, alloc) and not (live_batch and current):
            going.append(alloc)
        else:
            kept.append(alloc)
    return going, kept


def _collectable_evals(
    job: Job | None, evals: Sequence[Evaluation], kept: Sequence[Allocation]
) -> Iterator[Evaluation]:
    holding = {a.eval_id for a in kept}
    live_batch = _batch_kept(job)
    for ev in evals:
        if ev.terminal() and ev.id not in holding and not live_batch:
            yield ev


def _batch_kept(job: Job | None) -> bool:
    """A batch job not both stopped and dead keeps its current work and evaluations outside
    a job GC (Nomad's gcEval without allowBatch)."""
    if job is None or job.type not in _BATCH:
        return False
    return not (job.stop and job.status is JobStatus.DEAD)


def _live(job: Job) -> bool:
    return not job.stop and job.status is not JobStatus.DEAD


def _alloc_collectable(job: Job | None, alloc: Allocation) -> bool:
    """Nomad's allocGCEligible, with the client's word required (see the module's note)."""
    if not alloc.client_terminal():
        return False
    if job is None or not _live(job) or alloc.server_terminal():
        return True
    if alloc.client_status is not ClientStatus.FAILED or alloc.next_allocation:
        return True
    group = job.lookup_task_group(alloc.task_group)
    policy = group.reschedule_policy if group is not None else None
    # A failed allocation not yet replaced: it goes only where no reschedule can follow
    # (the attempts already used are not counted here, which keeps it, as Nomad would
    # before its interval has passed).
    return policy is not None and not policy.unlimited and policy.attempts == 0


def _batches(eval_ids: list[str], alloc_ids: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    for start in range(0, max(len(eval_ids), len(alloc_ids)), BATCH):
        yield eval_ids[start : start + BATCH], alloc_ids[start : start + BATCH]
