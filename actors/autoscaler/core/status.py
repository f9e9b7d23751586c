"""A job group as the autoscaler's target: Nomad's target plugin status, from the state.

As the Nomad target plugin reports it (plugins/builtin/target/nomad): `count` is the group's
running allocations, `ready` is false while the job is stopped, and the meta carries the
time of the group's latest scaling event, from which a restarted autoscaler resumes its
cooldown. drover adds `starting`: allocations placed but not running yet (still pending on
their client), which the policy's `count_starting` behaviour may count as capacity.
The autoscaler's own replica keeps no allocation records: it counts them in AllocCounts.
"""

from __future__ import annotations

from actors.autoscaler.core.alloc_counts import AllocCounts
from actors.state import StateReader
from contracts.allocation import ClientStatus
from contracts.autoscaling import TargetStatus

META_LAST_EVENT = "nomad_autoscaler.last_event"  # unix ns, as Nomad's target writes it
META_DESIRED = "drover.desired_count"


def group_status(
    state: StateReader,
    namespace: str,
    job_id: str,
    group: str,
    counts: AllocCounts | None = None,
) -> TargetStatus | None:
    """None when the job or its group does not exist (any more). The allocations are
    counted from `counts` where the reader keeps no allocation records (the autoscaler's
    replica), else from the state's."""
    job = state.job(namespace, job_id)
    if job is None:
        return None
    tg = job.lookup_task_group(group)
    if tg is None:
        return None
    if counts is not None:
        running, starting = counts.counts(namespace, job_id, group)
    else:
        running, starting = _count(state, namespace, job_id, group)
    meta = {META_DESIRED: str(tg.count)}
    events = state.scaling_events(namespace, job_id).get(group, ())
    last_ns = max((e.time for e in events), default=0)
    if last_ns:
        meta[META_LAST_EVENT] = str(last_ns)
    return TargetStatus(
        ready=not job.stop,
        count=running,
        starting=starting,
        last_event_s=last_ns / 1e9 if last_ns else None,
        meta=meta,
    )


def _count(state: StateReader, namespace: str, job_id: str, group: str) -> tuple[int, int]:
    """(running, starting): live allocations (desired to run, not finished) by whether
    their client runs them yet."""
    running = starting = 0
    for alloc in state.allocs_by_job(namespace, job_id):
        if alloc.task_group != group or alloc.terminal():
            continue
        if alloc.client_status is ClientStatus.RUNNING:
            running += 1
        else:
            starting += 1
    return running, starting
