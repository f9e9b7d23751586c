"""The agent endpoints clients call, and job validation, in Nomad's shapes.

drover runs one server (the leader) behind every API; `/v1/agent/self`, `/members`,
`/servers` and `/health` describe that server as Nomad's agent describes itself, with the
fields python-nomad and the Nomad CLI read. `/v1/validate/job` answers 200 with the
problems listed, as Nomad does, rather than refusing the request.
"""

from __future__ import annotations

from typing import Any

from actors.api.core.call import Call
from actors.api.core.errors import ApiError
from actors.api.core.http_types import ApiResponse
from actors.api.core.streaming import values_of
from contracts import ValidationError
from contracts.jobspec import parse_json_with_warnings
from contracts.jobspec.limits import size_problem

VERSION = "1.9.0"  # the Nomad API version drover answers as
REGION, DATACENTER = "global", "dc1"
# Nomad's default `ports { serf }`: a member's gossip port. drover has no gossip pool; the
# member is described at the server's advertise host with Nomad's port, as a dev agent is.
SERF_PORT = 4648


def _rpc_address(call: Call) -> str:
    """The server's RPC address (Backend.leader_address), as /v1/status/leader gives it."""
    return call.backend.leader_address() or "127.0.0.1:4647"


def _member(call: Call) -> dict[str, Any]:
    host = _rpc_address(call).rpartition(":")[0] or "127.0.0.1"
    return {
        "Name": f"drover.{REGION}",
        "Addr": host,
        "Port": SERF_PORT,
        "Status": "alive",
        "Tags": {"region": REGION, "dc": DATACENTER, "role": "nomad", "build": VERSION},
        "ProtocolMin": 1,
        "ProtocolMax": 5,
        "ProtocolCur": 2,
        "DelegateMin": 2,
        "DelegateMax": 5,
        "DelegateCur": 4,
    }


def agent_self(call: Call) -> ApiResponse:
    member = _member(call)
    config = {
        "Region": REGION,
        "Datacenter": DATACENTER,
        "NodeName": member["Name"],
        "Version": {"Version": VERSION, "VersionPrerelease": "", "Revision": "drover"},
        "ACL": {"Enabled": call.backend.acl_enabled},
        "Server": {"Enabled": True},
        "Client": {"Enabled": True},
    }
    return ApiResponse(200, {"config": config, "member": member, "stats": {}})


def agent_members(call: Call) -> ApiResponse:
    member = _member(call)
    body = {
        "ServerName": member["Name"],
        "ServerRegion": REGION,
        "ServerDC": DATACENTER,
        "Members": [member],
    }
    return ApiResponse(200, body)


def agent_servers(call: Call) -> ApiResponse:
    """The servers a client knows, by RPC address (Nomad's client server list)."""
    return ApiResponse(200, [_rpc_address(call)])


def agent_join(call: Call) -> ApiResponse:
    """Nomad answers a join it could not make with 200, `num_joined` 0 and the error; drover
    runs one server and has no gossip pool another could join, so that is every join."""
    addresses = [a for a in values_of(call.request.query, "address") if a]
    if not addresses:
        raise ApiError(400, "missing address to join")
    listed = ", ".join(addresses)
    error = f"drover runs a single server with no gossip pool: cannot join {listed}"
    return ApiResponse(200, {"num_joined": 0, "error": error})


def agent_force_leave(call: Call) -> ApiResponse:
    """Nomad removes a failed member from the gossip pool and answers 200 whether or not
    one had that name; drover's pool is its one server, which has no failed member."""
    if not call.query("node"):
        raise ApiError(400, "missing node to force leave")
    call.flag("prune")  # checked as Nomad parses it; there is nothing to prune
    return ApiResponse(200, None)


def agent_health(call: Call) -> ApiResponse:
    ok = {"ok": True, "message": "ok"}
    return ApiResponse(200, {"client": ok, "server": ok})


def validate_job(call: Call) -> ApiResponse:
    body = call.json()
    raw = body.get("Job")
    if not isinstance(raw, dict):
        raise ApiError(400, "Job: expected a job object in the request body")
    problems: list[str] = []
    warnings: list[str] = []
    too_big = size_problem(len(call.request.body or b""), call.backend.job_limits)
    if too_big is not None:
        problems.append(too_big)
    else:
        try:
            _job, warnings = parse_json_with_warnings({"Job": raw}, call.backend.job_limits)
        except ValidationError as exc:
            problems = list(exc.problems)
    return ApiResponse(
        200,
        {
            "DriverConfigValidated": not problems,
            "ValidationErrors": problems or None,
            "Error": "; ".join(problems),
            "Warnings": "; ".join(warnings),
        },
    )


ROUTES = [
    ("GET", "/v1/agent/self", agent_self),
    ("GET", "/v1/agent/members", agent_members),
    ("GET", "/v1/agent/servers", agent_servers),
    ("GET", "/v1/agent/health", agent_health),
    ("PUT", "/v1/agent/join", agent_join),
    ("POST", "/v1/agent/join", agent_join),
    ("PUT", "/v1/agent/force-leave", agent_force_leave),
    ("POST", "/v1/agent/force-leave", agent_force_leave),
    ("POST", "/v1/validate/job", validate_job),
    ("PUT", "/v1/validate/job", validate_job),
]
