"""When a dstack run ends early (`stop_criteria`, a failed rank), decided on client reports.

A run is a batch job whose group has a `share` (see contracts/share.py). Its ranks work
together, so one rank's failure fails the run: the leader stops the job, which stops the
other ranks, rather than waiting for them (dstack's behaviour; Nomad would let the rest
run). With `stop_criteria: master-done`, rank 0 finishing ends the run and stops the workers.
A rank whose node goes down or is removed is lost, and that ends its run too: ranks are never
placed again on their own (a replacement would not know its peers).
"""

from __future__ import annotations

from collections.abc import Iterable

from actors.state import StateReader
from contracts import Allocation, ClientStatus, Job
from contracts.share import MASTER_DONE, STOP_CRITERIA_META, is_run


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
