"""What each endpoint asks of a token, and the `/v1/acl/...` endpoints themselves.

With ACLs on, every route needs what Nomad's endpoint checks (`nomad/*_endpoint.go`): a
namespace capability (read-job, submit-job, scale-job, ...) in the request's namespace, a
node, agent or operator level, a management token, any valid token, or nothing. drover's
own routes follow the Nomad route nearest in kind (fleets are nodes, runs are jobs, policy
files are operator writes). A route missing from the table needs a management token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from actors.api.core.call import Call
from actors.api.core.errors import ApiError, bad_request
from actors.api.core.http_types import ApiRequest, ApiResponse
from contracts.acl import Acl, AclPolicy, AclToken


@dataclass(frozen=True, slots=True)
class Need:
    kind: str  # open, token, management, namespace, node, agent, operator
    capability: str = ""  # for namespace
    write: bool = False  # for node, agent, operator


OPEN, TOKEN, MANAGEMENT = Need("open"), Need("token"), Need("management")


def _ns(capability: str) -> Need:
    return Need("namespace", capability)


NODE_READ, NODE_WRITE = Need("node"), Need("node", write=True)
OPERATOR_WRITE = Need("operator", write=True)

_READ_JOB = _ns("read-job")
_SUBMIT = _ns("submit-job")
NEEDS: dict[tuple[str, str], Need] = {
    ("GET", "/v1/jobs"): _ns("list-jobs"),
    ("POST", "/v1/jobs"): _SUBMIT,
    ("PUT", "/v1/jobs"): _SUBMIT,
    ("POST", "/v1/jobs/parse"): _ns("parse-job"),
    ("GET", "/v1/job/:id"): _READ_JOB,
    ("POST", "/v1/job/:id"): _SUBMIT,
    ("PUT", "/v1/job/:id"): _SUBMIT,
    ("DELETE", "/v1/job/:id"): _SUBMIT,
    ("GET", "/v1/job/:id/versions"): _READ_JOB,
    ("GET", "/v1/job/:id/allocations"): _READ_JOB,
    ("GET", "/v1/job/:id/evaluations"): _READ_JOB,
    ("GET", "/v1/job/:id/summary"): _READ_JOB,
    ("POST", "/v1/job/:id/evaluate"): _SUBMIT,
    ("POST", "/v1/job/:id/dispatch"): _ns("dispatch-job"),
    ("PUT", "/v1/job/:id/dispatch"): _ns("dispatch-job"),
    ("POST", "/v1/job/:id/periodic/force"): _SUBMIT,
    ("PUT", "/v1/job/:id/periodic/force"): _SUBMIT,
    ("PUT", "/v1/job/:id/evaluate"): _SUBMIT,
    ("POST", "/v1/job/:id/plan"): _SUBMIT,
    ("PUT", "/v1/job/:id/plan"): _SUBMIT,
    ("POST", "/v1/job/:id/revert"): _SUBMIT,
    ("PUT", "/v1/job/:id/revert"): _SUBMIT,
    ("POST", "/v1/job/:id/stable"): _SUBMIT,
    ("PUT", "/v1/job/:id/stable"): _SUBMIT,
    ("GET", "/v1/job/:id/scale"): _ns("read-job-scaling"),
    ("POST", "/v1/job/:id/scale"): _ns("scale-job"),
    ("PUT", "/v1/job/:id/scale"): _ns("scale-job"),
    ("GET", "/v1/scaling/policies"): _ns("list-scaling-policies"),
    ("POST", "/v1/scaling/policies"): OPERATOR_WRITE,
    ("PUT", "/v1/scaling/policies"): OPERATOR_WRITE,
    ("GET", "/v1/scaling/policy/:id"): _ns("read-scaling-policy"),
    ("DELETE", "/v1/scaling/policy/:id"): OPERATOR_WRITE,
    ("GET", "/v1/scaling/policy/:id/decisions"): _ns("read-scaling-policy"),
    ("GET", "/v1/evaluations"): _READ_JOB,
    ("GET", "/v1/evaluation/:id"): _READ_JOB,
    ("GET", "/v1/evaluation/:id/allocations"): _READ_JOB,
    ("GET", "/v1/allocations"): _READ_JOB,
    ("GET", "/v1/allocation/:id"): _READ_JOB,
    ("POST", "/v1/allocation/:id/stop"): _ns("alloc-lifecycle"),
    ("PUT", "/v1/allocation/:id/stop"): _ns("alloc-lifecycle"),
    ("GET", "/v1/nodes"): NODE_READ,
    ("GET", "/v1/node/:id"): NODE_READ,
    ("GET", "/v1/node/:id/allocations"): NODE_READ,
    ("POST", "/v1/node/:id/drain"): NODE_WRITE,
    ("PUT", "/v1/node/:id/drain"): NODE_WRITE,
    ("POST", "/v1/node/:id/eligibility"): NODE_WRITE,
    ("PUT", "/v1/node/:id/eligibility"): NODE_WRITE,
    ("POST", "/v1/node/:id/evaluate"): NODE_WRITE,
    ("PUT", "/v1/node/:id/evaluate"): NODE_WRITE,
    ("POST", "/v1/system/gc"): MANAGEMENT,
    ("PUT", "/v1/system/gc"): MANAGEMENT,
    # Any valid token; the handler keeps to the contexts its policies may read (Nomad's).
    ("POST", "/v1/search"): TOKEN,
    ("PUT", "/v1/search"): TOKEN,
    ("POST", "/v1/search/fuzzy"): TOKEN,
    ("PUT", "/v1/search/fuzzy"): TOKEN,
    ("GET", "/v1/fleets"): NODE_READ,
    ("POST", "/v1/fleets"): NODE_WRITE,
    ("PUT", "/v1/fleets"): NODE_WRITE,
    ("GET", "/v1/fleet/:name"): NODE_READ,
    ("DELETE", "/v1/fleet/:name"): NODE_WRITE,
    ("GET", "/v1/runs"): _READ_JOB,
    ("POST", "/v1/runs"): _SUBMIT,
    ("PUT", "/v1/runs"): _SUBMIT,
    ("GET", "/v1/run/:name"): _READ_JOB,
    ("POST", "/v1/run/:name/stop"): _SUBMIT,
    ("PUT", "/v1/run/:name/stop"): _SUBMIT,
    ("GET", "/v1/agent/self"): Need("agent"),
    ("GET", "/v1/agent/members"): NODE_READ,
    ("GET", "/v1/agent/servers"): Need("agent"),
    ("PUT", "/v1/agent/join"): Need("agent", write=True),
    ("POST", "/v1/agent/join"): Need("agent", write=True),
    ("PUT", "/v1/agent/force-leave"): Need("agent", write=True),
    ("POST", "/v1/agent/force-leave"): Need("agent", write=True),
    ("GET", "/v1/client/stats"): NODE_READ,
    ("GET", "/v1/client/allocation/:id/stats"): _READ_JOB,
    # Any valid token: Nomad's client checks alloc-lifecycle (signal) and submit-job (GC) in
    # the allocation's own namespace, and so do the handlers (client_commands.py).
    ("POST", "/v1/client/allocation/:id/signal"): TOKEN,
    ("PUT", "/v1/client/allocation/:id/signal"): TOKEN,
    **{(m, "/v1/client/allocation/:id/gc"): TOKEN for m in ("GET", "PUT", "POST")},
    **{(m, "/v1/client/gc"): NODE_WRITE for m in ("GET", "PUT", "POST")},
    ("POST", "/v1/validate/job"): _ns("read-job"),
    ("PUT", "/v1/validate/job"): _ns("read-job"),
    # Nomad answers these without a token.
    ("GET", "/v1/agent/health"): OPEN,
    ("GET", "/v1/status/leader"): OPEN,
    ("GET", "/v1/status/peers"): OPEN,
    ("GET", "/v1/regions"): OPEN,
    ("GET", "/v1/metrics"): OPEN,
    ("POST", "/v1/acl/bootstrap"): OPEN,
    ("PUT", "/v1/acl/bootstrap"): OPEN,
    ("GET", "/v1/acl/token/self"): TOKEN,
    ("GET", "/v1/acl/policy/:name"): TOKEN,  # management, or a token holding the policy
    # Any valid token; the handler checks each topic asked for (event_topics.py).
    ("GET", "/v1/event/stream"): TOKEN,
    ("GET", "/v1/operator/scheduler/configuration"): Need("operator"),
    ("PUT", "/v1/operator/scheduler/configuration"): OPERATOR_WRITE,
    ("POST", "/v1/operator/scheduler/configuration"): OPERATOR_WRITE,
    # Deployments: reads need read-job, changes submit-job (Nomad's deployment_endpoint.go).
    ("GET", "/v1/deployments"): _READ_JOB,
    ("GET", "/v1/deployment/:id"): _READ_JOB,
    ("GET", "/v1/deployment/allocations/:id"): _READ_JOB,
    ("GET", "/v1/job/:id/deployments"): _READ_JOB,
    ("GET", "/v1/job/:id/deployment"): _READ_JOB,
    **{
        (method, f"/v1/deployment/{action}/:id"): _SUBMIT
        for method in ("POST", "PUT")
        for action in ("fail", "pause", "promote", "allocation-health")
    },
}

# Registrations name their namespace in the job, not in the query.
_BODY_NAMESPACE = frozenset(
    {("POST", "/v1/jobs"), ("PUT", "/v1/jobs"), ("POST", "/v1/job/:id"), ("PUT", "/v1/job/:id")}
)


def need_of(method: str, pattern: str) -> Need:
    return NEEDS.get((method, pattern), MANAGEMENT)


def request_namespace(request: ApiRequest, method: str, pattern: str) -> str:
    if (method, pattern) in _BODY_NAMESPACE and request.body:
        try:
            body = orjson.loads(request.body)
            job = body.get("Job") if isinstance(body, dict) else None
            namespace = job.get("Namespace") if isinstance(job, dict) else None
            if isinstance(namespace, str) and namespace:
                return namespace
        except orjson.JSONDecodeError:
            pass  # the handler names what is wrong with the body
    return request.query.get("namespace") or "default"


def permits(acl: Acl, need: Need, namespace: str) -> bool:
    if need.kind in ("open", "token"):
        return True
    if need.kind == "management":
        return acl.management
    if need.kind == "namespace":
        return acl.allows(namespace, need.capability)
    return acl.allows_level(need.kind, need.write)


# -- the endpoints --------------------------------------------------------------------------


def _enabled(call: Call) -> None:
    if not call.backend.acl_enabled:
        raise ApiError(400, "ACL support disabled")


def token_json(token: AclToken, secret_id: str = "") -> dict[str, Any]:
    """Nomad's token; the SecretID only when the token was just made (drover keeps its
    hash, never the secret)."""
    return {
        "AccessorID": token.accessor_id,
        "SecretID": secret_id,
        "Name": token.name,
        "Type": token.type,
        "Policies": list(token.policies) if token.policies else None,
        "Global": token.global_,
        "CreateTime": token.create_time,
        "CreateIndex": token.create_index,
        "ModifyIndex": token.modify_index,
    }


def policy_json(policy: AclPolicy, rules: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"Name": policy.name, "Description": policy.description}
    if rules:
        out["Rules"] = policy.rules
    return out | {"CreateIndex": policy.create_index, "ModifyIndex": policy.modify_index}


def bootstrap(call: Call) -> ApiResponse:
    _enabled(call)
    issued = call.backend.acl.bootstrap()
    return ApiResponse(200, token_json(issued.token, issued.secret_id))


def token_self(call: Call) -> ApiResponse:
    _enabled(call)
    found = call.backend.acl.resolve(call.request.token)
    if found is None:
        raise ApiError(403, "Permission denied")
    # The caller sent its secret: it is echoed, as Nomad answers (no stored secret needed).
    return ApiResponse(200, token_json(found[0], call.request.token))


def list_policies(call: Call) -> ApiResponse:
    _enabled(call)
    return ApiResponse(
        200, [policy_json(p, rules=False) for p in call.backend.acl.store.policies()]
    )


def get_policy(call: Call) -> ApiResponse:
    _enabled(call)
    name = call.params["name"]
    found = call.backend.acl.resolve(call.request.token)
    if found is None or not (found[1].management or name in found[0].policies):
        raise ApiError(403, "Permission denied")
    policy = call.backend.acl.store.policy(name)
    if policy is None:
        raise ApiError(404, f"ACL policy {name} not found")
    return ApiResponse(200, policy_json(policy))


def put_policy(call: Call) -> ApiResponse:
    _enabled(call)
    body = call.json()
    name = call.params["name"]
    if body.get("Name", name) != name:
        raise bad_request(f"Name: {body.get('Name')!r} differs from the path's {name!r}")
    description, rules = body.get("Description", ""), body.get("Rules", "")
    if not isinstance(description, str) or not isinstance(rules, str):
        raise bad_request("Description and Rules: expected strings")
    stored = call.backend.acl.put_policy(name, description, rules)
    return ApiResponse(200, None, index=stored.modify_index)


def delete_policy(call: Call) -> ApiResponse:
    _enabled(call)
    call.backend.acl.delete_policy(call.params["name"])
    return ApiResponse(200, None)


def list_tokens(call: Call) -> ApiResponse:
    _enabled(call)
    return ApiResponse(200, [token_json(t) for t in call.backend.acl.store.tokens()])


def _token_fields(body: dict[str, Any]) -> tuple[str, str, list[str], bool]:
    name, type_ = body.get("Name", ""), body.get("Type", "client")
    policies, global_ = body.get("Policies") or [], body.get("Global", False)
    if not isinstance(name, str) or not isinstance(type_, str):
        raise bad_request("Name and Type: expected strings")
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        raise bad_request(f"Policies: expected a list of policy names, got {policies!r}")
    if not isinstance(global_, bool):
        raise bad_request(f"Global: expected true or false, got {global_!r}")
    return name, type_, policies, global_


def create_token(call: Call) -> ApiResponse:
    _enabled(call)
    name, type_, policies, global_ = _token_fields(call.json())
    issued = call.backend.acl.create_token(name, type_, policies, global_)
    return ApiResponse(200, token_json(issued.token, issued.secret_id))


def get_token(call: Call) -> ApiResponse:
    _enabled(call)
    token = call.backend.acl.store.token(call.params["accessor"])
    if token is None:
        raise ApiError(404, f"ACL token {call.params['accessor']} not found")
    return ApiResponse(200, token_json(token))


def update_token(call: Call) -> ApiResponse:
    _enabled(call)
    body = call.json()
    accessor = call.params["accessor"]
    if body.get("AccessorID", accessor) != accessor:
        raise bad_request("AccessorID: differs from the path's")
    name, type_, policies, _global = _token_fields(body)
    return ApiResponse(
        200, token_json(call.backend.acl.update_token(accessor, name, type_, policies))
    )


def delete_token(call: Call) -> ApiResponse:
    _enabled(call)
    call.backend.acl.delete_token(call.params["accessor"])
    return ApiResponse(200, None)


ROUTES = [
    ("POST", "/v1/acl/bootstrap", bootstrap),
    ("PUT", "/v1/acl/bootstrap", bootstrap),
    ("GET", "/v1/acl/token/self", token_self),
    ("GET", "/v1/acl/policies", list_policies),
    ("GET", "/v1/acl/policy/:name", get_policy),
    ("POST", "/v1/acl/policy/:name", put_policy),
    ("PUT", "/v1/acl/policy/:name", put_policy),
    ("DELETE", "/v1/acl/policy/:name", delete_policy),
    ("GET", "/v1/acl/tokens", list_tokens),
    ("POST", "/v1/acl/token", create_token),
    ("PUT", "/v1/acl/token", create_token),
    ("GET", "/v1/acl/token/:accessor", get_token),
    ("POST", "/v1/acl/token/:accessor", update_token),
    ("PUT", "/v1/acl/token/:accessor", update_token),
    ("DELETE", "/v1/acl/token/:accessor", delete_token),
]
