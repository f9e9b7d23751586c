"""How records are stamped with the index that commits them (the store's write rules).

A record committed at index i gets modify_index = i (and create_index = i when new); an
allocation keeps its creation and, unless the plan sets them itself, the client-owned fields.
"""

from __future__ import annotations

from contracts.allocation import Allocation, ClientStatus
from contracts.copying import replacer
from contracts.evaluation import Evaluation
from contracts.job import Job
from contracts.node import Node

# A plan may set these client statuses itself (Nomad's upsertAllocsImpl).
SERVER_SET_CLIENT_STATUS = frozenset({ClientStatus.LOST, ClientStatus.UNKNOWN})

_new_alloc = replacer(Allocation, "create_index", "modify_index", "alloc_modify_index")
_updated_alloc = replacer(
    Allocation, "create_index", "create_time", "modify_index", "alloc_modify_index"
)
_updated_alloc_keep_client = replacer(
    Allocation,
    "client_status",
    "client_description",
    "create_index",
    "create_time",
    "modify_index",
    "alloc_modify_index",
)
client_updated = replacer(
    Allocation, "client_status", "client_description", "modify_index", "modify_time"
)
stamped_eval = replacer(Evaluation, "create_index", "modify_index")
# A registration's evals carry the job's modify index (the registration's own, or the kept
# version's): every store applies them, so these copies are generated, not
# `dataclasses.replace` (which walks the fields by name on each call: ~4x the time).
stamped_job_eval = replacer(Evaluation, "create_index", "modify_index", "job_modify_index")
registered_job = replacer(
    Job, "status", "version", "create_index", "modify_index", "job_modify_index"
)
job_with_status = replacer(Job, "status", "modify_index")

stamped_node = replacer(Node, "create_index", "modify_index")


def stamped_alloc(alloc: Allocation, old: Allocation | None, index: int) -> Allocation:
    """The record a plan's `alloc` becomes at `index` over `old`: indexes stamped, creation
    kept, and the client-owned fields kept unless the plan sets them itself. A record that
    already is that (stamped by the leader before it wrote the entry) is returned as is."""
    if old is None:
        if alloc.create_index == alloc.modify_index == alloc.alloc_modify_index == index:
            return alloc
        return _new_alloc(alloc, index, index, index)
    if (
        alloc.modify_index == index
        and alloc.alloc_modify_index == index
        and alloc.create_index == old.create_index
        and alloc.create_time == old.create_time
        and (
            alloc.client_status in SERVER_SET_CLIENT_STATUS
            or (
                alloc.client_status is old.client_status
                and alloc.client_description == old.client_description
            )
        )
    ):
        return alloc
    if alloc.client_status in SERVER_SET_CLIENT_STATUS:
        return _updated_alloc(alloc, old.create_index, old.create_time, index, index)
    return _updated_alloc_keep_client(
        alloc,
        old.client_status,
        old.client_description,
        old.create_index,
        old.create_time,
        index,
        index,
    )
