"""When a dstack run ends early (`stop_criteria`, a failed rank), decided on client reports.

A run is a batch job whose group has a `share` (see contracts/share.py). Its ranks work
together, so one rank's failure fails the run: the leader stops the job, which stops the
other ranks, rather than waiting for them (dstack's behaviour; Nomad would let the rest
run). With `stop_criteria: master-done`, rank 0 finishing ends the run and stops the workers.
A rank whose node goes down or is removed is lost, and that ends its run too: ranks are never
placed again on their own (a replacement would not know its peers).

A run that may wait only so long for capacity (dstack's `retry.duration` with `no-capacity`;
job meta `drover.run.wait_s`) fails when that time has passed and none of its ranks was
placed: the leader stops the job and marks why (`drover.run.ended`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from actors.leader.core.job_lifecycle import NewId, stop_job
from actors.state import StateReader
from contracts import Allocation, ClientStatus, Job
from contracts.share import (
    ENDED_NO_CAPACITY,
    MASTER_DONE,
    RUN_ENDED_META,
    STOP_CRITERIA_META,
    WAIT_LIMIT_META,
    is_run,
)
from contracts.state_log import StateChange, UpsertJob


def ends_run(job: Job, alloc: Allocation, status: ClientStatus) -> bool:
    """Does this report of `alloc` end its run (so its other ranks must stop)?"""
    if job.stop or not is_run(job):
        return False
    if status is ClientStatus.FAILED:
        return True
    return (
        status is ClientStatus.COMPLETE
        and alloc.index == 0
        and job.meta.get(STOP_CRITERIA_META) == MASTER_DONE
    )


def runs_on_nodes(state: StateReader, node_ids: Iterable[str]) -> list[Job]:
    """The runs (not stopped) with a live rank on any of `node_ids`."""
    found: dict[tuple[str, str], Job] = {}
    for node_id in node_ids:
        for alloc in state.allocs_by_node(node_id):
            key = (alloc.namespace, alloc.job_id)
            if alloc.terminal() or key in found:
                continue
            job = state.job(*key)
            if job is not None and not job.stop and is_run(job):
                found[key] = job
    return list(found.values())


def wait_deadline(job: Job) -> int | None:
    """When a waiting run gives up (unix ns), if it has a wait limit and is not stopped."""
    raw = job.meta.get(WAIT_LIMIT_META)
    if raw is None or job.stop or not is_run(job):
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None  # the API writes only finite limits; anything else waits for good
    return job.submit_time + int(seconds * 1e9)


def end_waiting_run(
    state: StateReader, namespace: str, job_id: str, submit_time: int, *, now_ns: int, new_id: NewId
) -> list[StateChange]:
    """The run submitted at `submit_time` waited its limit: if it is still that submission,
    not stopped and none of its ranks was placed, it fails for want of capacity."""
    job = state.job(namespace, job_id)
    if job is None or job.stop or job.submit_time != submit_time or not is_run(job):
        return []
    if any(a.job_version >= job.version for a in state.allocs_by_job(namespace, job_id)):
        return []  # it started: the limit was on waiting
    write = stop_job(state, namespace, job_id, now_ns=now_ns, new_id=new_id)
    if not isinstance(write.change, UpsertJob):
        return []
    stopped = write.change.job
    meta = {**stopped.meta, RUN_ENDED_META: ENDED_NO_CAPACITY}
    return [dataclasses.replace(write.change, job=stopped.replace(meta=meta))]
