"""When a dstack run ends early (`stop_criteria`, a failed rank), decided on client reports.

A run is a batch job whose group has a `share` (see contracts/share.py). Its ranks work
together, so one rank's failure fails the run: the leader stops the job, which stops the
other ranks, rather than waiting for them (dstack's behaviour; Nomad would let the rest
run). With `stop_criteria: master-done`, rank 0 finishing ends the run and stops the workers.
"""

from __future__ import annotations

from contracts import Allocation, ClientStatus, Job
from contracts.share import MASTER_DONE, STOP_CRITERIA_META


def is_run(job: Job) -> bool:
    return any(tg.share is not None for tg in job.task_groups)


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
