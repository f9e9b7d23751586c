"""The answer to a request the leader applied before (delivered again, or re-read from the
stream by a leader that took over before it was answered): what its entry left in the store,
so that `job run` gets the eval it created, and a dispatch the child it made, as the first
time."""

from __future__ import annotations

import dataclasses

from actors.leader.core.launches import Children, launched_at
from actors.state import StateReader
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind


def repeated_answer(
    state: StateReader, children: Children, request: LeaderRequest, index: int
) -> LeaderResponse:
    response = LeaderResponse(request.request_id, ok=True, index=index)
    job_id = request.job.id if request.job is not None else request.job_id
    if not job_id:
        return response
    namespace = request.job.namespace if request.job is not None else request.namespace
    if request.kind in (RequestKind.DISPATCH_JOB, RequestKind.FORCE_PERIODIC):
        child = launched_at(state, children, namespace, job_id, index)
        if child is None:
            return response
        job_id = child.id
        response = dataclasses.replace(response, dispatched_job_id=job_id)
    created = tuple(e.id for e in state.evals_by_job(namespace, job_id) if e.create_index == index)
    versions = state.job_versions(namespace, job_id)
    if any(v.job_modify_index == index for v in versions):
        job_modify_index = index  # the write made a version
    else:
        job = state.job(namespace, job_id)
        job_modify_index = job.job_modify_index if job is not None else 0
    return dataclasses.replace(
        response,
        eval_id=created[0] if created else "",
        eval_ids=created if len(created) > 1 else (),
        job_modify_index=job_modify_index,
    )
