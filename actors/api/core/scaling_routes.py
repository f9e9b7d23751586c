"""`/v1/scaling/...`: Nomad's scaling policy endpoints, and drover's decisions.

The job groups' scaling blocks are read from the API's replica as Nomad's server reads its
state (so they answer without an autoscaler running). Their IDs are the autoscaler's
(`group_policy_id`): UUID-shaped, stable per (namespace, job, group), where Nomad draws a
random one at registration. The policies of files (the policy dir's, and those applied
here) are the autoscaler's: listed when it answers, with their target's config as Target
(`{"Fleet": ..., "NodeSelectorStrategy": ...}` for a cluster policy), in every namespace.

    GET    /v1/scaling/policies?job=J&type=T&prefix=P  list stubs (ScalingPolicyListStub)
    GET    /v1/scaling/policy/:id                      Nomad's ScalingPolicy
    GET    /v1/scaling/policy/:id/decisions?limit=N    drover: the autoscaler's view of the
                                                       policy and its last N decisions
    POST   /v1/scaling/policies                        drover: apply a policy file, body
                                                       {"Name": "gpu.hcl", "Text": HCL}
    DELETE /v1/scaling/policy/:id                      drover: remove the applied file
                                                       holding the policy
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from actors.api.core.call import Call
from actors.api.core.errors import ApiError, bad_request, not_found
from actors.api.core.http_types import ApiResponse
from actors.autoscaler.core.applied import check_policy_file
from actors.autoscaler.core.decisions import DEFAULT_KEEP
from actors.autoscaler.core.registry import group_policy_id
from actors.state import StateReader
from contracts import Job, TaskGroup

TABLES = ("jobs",)
DEFAULT_DECISIONS = 10


def group_policies(state: StateReader, namespace: str) -> Iterator[tuple[str, Job, TaskGroup]]:
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


def _file_stub(view: dict[str, Any]) -> dict[str, Any]:
    """A stub of one of the autoscaler's file policies (its policy view)."""
    keys = ("ID", "Enabled", "Type", "Target", "CreateIndex", "ModifyIndex")
    return {k: view[k] for k in keys}


def _file_matches(view: dict[str, Any], namespace: str, job_id: str, kind: str) -> bool:
    target = view["Target"]
    return (
        (namespace == "*" or target.get("Namespace", namespace) == namespace)
        and (not job_id or target.get("Job") == job_id)
        and (not kind or view["Type"] == kind)
    )


def list_policies(call: Call) -> ApiResponse:
    job_id, kind, prefix = call.query("job"), call.query("type"), call.query("prefix")
    files = [
        _file_stub(view)
        for view in call.backend.scaling_file_policies()
        if view["ID"].startswith(prefix) and _file_matches(view, call.namespace, job_id, kind)
    ]

    def render(state: StateReader) -> Any:
        stubs = [
            _stub(policy_id, job, tg)
            for policy_id, job, tg in group_policies(state, call.namespace)
            if policy_id.startswith(prefix)
            and (not job_id or job.id == job_id)
            and (not kind or (tg.scaling is not None and tg.scaling.type == kind))
        ]
        return sorted(stubs + files, key=lambda s: str(s["ID"]))

    return call.read(TABLES, render)


def get_policy(call: Call) -> ApiResponse:
    wanted = call.params["id"]

    def render(state: StateReader) -> Any:
        for policy_id, job, tg in group_policies(state, "*"):  # an ID names one policy anywhere
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

    if not any(pid == wanted for pid, _, _ in group_policies(call.backend.snapshot(), "*")):
        for view in call.backend.scaling_file_policies():
            if view["ID"] == wanted:
                return ApiResponse(200, _file_policy(view))
    return call.read(TABLES, render)


def _file_policy(view: dict[str, Any]) -> dict[str, Any]:
    return {
        **_file_stub(view),
        "Namespace": view["Target"].get("Namespace", ""),
        "Policy": view["Policy"],
        "Min": view["Min"],
        "Max": view["Max"],
        "Path": view["Path"],  # drover's: the file it came from, and its scaling "name"
        "Name": view["Name"],
    }


def apply_policy_file(call: Call) -> ApiResponse:
    """Parsed here first (a bad file is a 400 naming the field and value), then handed to
    the autoscaler, which keeps it."""
    body = call.json()
    name, text = body.get("Name"), body.get("Text")
    if not isinstance(name, str):
        raise bad_request(f"Name: expected the file's name as a string, got {name!r}")
    if not isinstance(text, str):
        raise bad_request(f"Text: expected the file's HCL as a string, got {type(text).__name__}")
    check_policy_file(name, text)
    views = call.backend.apply_scaling_policy(name, text)
    return ApiResponse(200, {"Name": name, "Policies": [_file_stub(v) for v in views]})


def delete_policy(call: Call) -> ApiResponse:
    return ApiResponse(200, {"Removed": call.backend.delete_scaling_policy(call.params["id"])})


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
