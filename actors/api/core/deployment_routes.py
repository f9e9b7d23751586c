"""`/v1/deployments`, `/v1/deployment/...` and `/v1/job/:id/deployment(s)` (Nomad's
Deployment endpoints): reads from the replica, writes through the leader's watcher."""

from __future__ import annotations

from typing import Any

from actors.api.core import shapes
from actors.api.core.call import Call, Handler, PendingWrite, typed_field
from actors.api.core.deployment_shapes import deployment_json, deployment_lookup
from actors.api.core.errors import bad_request, not_found
from actors.api.core.http_types import ApiResponse
from actors.api.core.task_states import job_lookup
from actors.state import StateReader
from contracts.deployment import Deployment
from contracts.messages import LeaderResponse, RequestKind

TABLES = ("deployment",)


def list_deployments(call: Call) -> ApiResponse:
    prefix = call.query("prefix")
    namespace = call.namespace

    def render(state: StateReader) -> Any:
        found = [
            d
            for d in state.deployments()
            if d.id.startswith(prefix) and (namespace == "*" or d.namespace == namespace)
        ]
        return [deployment_json(d) for d in _newest_first(found)]

    return call.read(TABLES, render)


def get_deployment(call: Call) -> ApiResponse:
    return call.read(TABLES, lambda state: deployment_json(_require(state, call)))


def deployment_allocations(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        deployment = _require(state, call)
        allocs = state.allocs_by_job(deployment.namespace, deployment.job_id)
        job, dep = job_lookup(state), deployment_lookup(state)
        return [
            shapes.alloc_stub(a, job=job(a), deployment=dep(a))
            for a in sorted(allocs, key=lambda a: a.create_index)
            if a.deployment_id == deployment.id
        ]

    return call.read((*TABLES, "allocs"), render)


def job_deployments(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        deployments = state.deployments_by_job(call.namespace, call.params["id"])
        return [deployment_json(d) for d in _newest_first(deployments)]

    return call.read(TABLES, render)


def job_latest_deployment(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        latest = state.latest_deployment(call.namespace, call.params["id"])
        return deployment_json(latest) if latest is not None else None

    return call.read(TABLES, render)


def fail_deployment(call: Call) -> PendingWrite:
    return _write(call, RequestKind.FAIL_DEPLOYMENT)


def pause_deployment(call: Call) -> PendingWrite:
    body = call.json_or_empty()
    pause = typed_field(body, "Pause", bool, False)
    return _write(call, RequestKind.PAUSE_DEPLOYMENT, pause=pause)


def promote_deployment(call: Call) -> PendingWrite:
    body = call.json_or_empty()
    groups = typed_field(body, "Groups", tuple[str, ...], ())
    if typed_field(body, "All", bool, False):
        groups = ()
    return _write(call, RequestKind.PROMOTE_DEPLOYMENT, groups=groups)


def set_alloc_health(call: Call) -> PendingWrite:
    body = call.json_or_empty()
    healthy = typed_field(body, "HealthyAllocationIDs", tuple[str, ...], ())
    unhealthy = typed_field(body, "UnhealthyAllocationIDs", tuple[str, ...], ())
    if not healthy and not unhealthy:
        raise bad_request("must specify at least one healthy/unhealthy allocation ID")
    return _write(
        call,
        RequestKind.SET_ALLOC_HEALTH,
        healthy_alloc_ids=healthy,
        unhealthy_alloc_ids=unhealthy,
    )


def _write(call: Call, kind: RequestKind, **fields: Any) -> PendingWrite:
    return call.write_then(kind, _reply, deployment_id=call.params["id"], **fields)


def _reply(response: LeaderResponse) -> ApiResponse:
    body = {
        "EvalID": response.eval_id,
        "EvalCreateIndex": response.index if response.eval_id else 0,
        "DeploymentModifyIndex": response.index,
        "Index": response.index,
        "LastContact": 0,
        "KnownLeader": True,
    }
    return ApiResponse(200, body, index=response.index)


def _require(state: StateReader, call: Call) -> Deployment:
    deployment = state.deployment(call.params["id"])
    if deployment is None:
        raise not_found(f'deployment "{call.params["id"]}" not found')
    return deployment


def _newest_first(deployments: list[Deployment]) -> list[Deployment]:
    return sorted(deployments, key=lambda d: d.create_index, reverse=True)


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/v1/deployments", list_deployments),
    ("GET", "/v1/deployment/allocations/:id", deployment_allocations),
    ("POST", "/v1/deployment/fail/:id", fail_deployment),
    ("PUT", "/v1/deployment/fail/:id", fail_deployment),
    ("POST", "/v1/deployment/pause/:id", pause_deployment),
    ("PUT", "/v1/deployment/pause/:id", pause_deployment),
    ("POST", "/v1/deployment/promote/:id", promote_deployment),
    ("PUT", "/v1/deployment/promote/:id", promote_deployment),
    ("POST", "/v1/deployment/allocation-health/:id", set_alloc_health),
    ("PUT", "/v1/deployment/allocation-health/:id", set_alloc_health),
    ("GET", "/v1/deployment/:id", get_deployment),
    ("GET", "/v1/job/:id/deployments", job_deployments),
    ("GET", "/v1/job/:id/deployment", job_latest_deployment),
]
