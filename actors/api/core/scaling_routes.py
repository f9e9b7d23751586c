"""`/v1/scaling/...`: Nomad's scaling policy endpoints, and drover's decisions.

The policies are the job groups' scaling blocks, read from the API's replica as Nomad's
server reads its state (so they answer without an autoscaler running). Their IDs are the
autoscaler's (`group_policy_id`): UUID-shaped, stable per (namespace, job, group), where
Nomad draws a random one at registration.

    GET /v1/scaling/policies?job=J&type=T&prefix=P     list stubs (Nomad's ScalingPolicyListStub)
    GET /v1/scaling/policy/:id                         Nomad's ScalingPolicy
    GET /v1/scaling/policy/:id/decisions?limit=N       drover: the autoscaler's view of the
                                                       policy and its last N decisions
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from actors.api.core.call import Call
from actors.api.core.errors import ApiError, bad_request, not_found
from actors.api.core.http_types import ApiResponse
from actors.autoscaler.core.decisions import DEFAULT_KEEP
from actors.autoscaler.core.registry import group_policy_id
from actors.state import StateReader
from contracts import Job, TaskGroup

TABLES = ("jobs",)
DEFAULT_DECISIONS = 10


def _policies(state: StateReader, namespace: str) -> Iterator[tuple[str, Job, TaskGroup]]:
    """(ID, job, group) of every group with a scaling block in a namespace ("*": all)."""
    for job in state.jobs():
        if namespace != "*" and job.namespace != namespace:
            continue
        for tg in job.task_groups:
            if tg.scaling is not None:
                yield group_policy_id(job.namespace, job.id, tg.name), job, tg


def _stub(policy_id: str, job: Job, tg: TaskGroup) -> dict[str, Any]:
    assert tg.scaling is not None
    return {
        "ID": policy_id,
        "Enabled": tg.scaling.enabled,
        "Type": tg.scaling.type,
        "Target": {"Namespace": job.namespace, "Job": job.id, "Group": tg.name},
        "CreateIndex": job.create_index,
        "ModifyIndex": job.modify_index,
    }


def list_policies(call: Call) -> ApiResponse:
    job_id, kind, prefix = call.query("job"), call.query("type"), call.query("prefix")

    def render(state: StateReader) -> Any:
        stubs = [
            _stub(policy_id, job, tg)
            for policy_id, job, tg in _policies(state, call.namespace)
            if policy_id.startswith(prefix)
            and (not job_id or job.id == job_id)
            and (not kind or (tg.scaling is not None and tg.scaling.type == kind))
        ]
        return sorted(stubs, key=lambda s: str(s["ID"]))

    return call.read(TABLES, render)


def get_policy(call: Call) -> ApiResponse:
    wanted = call.params["id"]

    def render(state: StateReader) -> Any:
        for policy_id, job, tg in _policies(state, "*"):  # an ID names one policy anywhere
            if policy_id == wanted:
                assert tg.scaling is not None
                scaling = tg.scaling
                return {
                    **_stub(policy_id, job, tg),
                    "Namespace": job.namespace,
                    "Policy": scaling.policy,
                    "Min": tg.count if scaling.min is None else scaling.min,
                    "Max": scaling.max,
                }
        raise not_found("policy not found")

    return call.read(TABLES, render)


def policy_decisions(call: Call) -> ApiResponse:
    raw = call.query("limit", str(DEFAULT_DECISIONS))
    try:
        limit = int(raw)
    except ValueError:
        raise bad_request(f"limit: expected an integer, got {raw!r}") from None
    if not 1 <= limit <= DEFAULT_KEEP:
        raise bad_request(f"limit: expected 1 to {DEFAULT_KEEP}, got {limit}")
    explained = call.backend.scaling_explain(call.params["id"], limit)
    if explained is None:
        raise ApiError(404, f'policy "{call.params["id"]}" is not known to the autoscaler')
    return ApiResponse(200, {"ID": call.params["id"], **explained})
