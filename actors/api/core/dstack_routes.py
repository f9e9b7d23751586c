"""Fleets and runs (drover's own endpoints, in dstack's terms).

GET    /v1/fleets             every fleet: instances, blocks busy / total
POST   /v1/fleets             {"Fleet": {...fleet file's keys...}}: declare or redeclare
GET    /v1/fleet/:name        one fleet, with each instance's `k/T busy`
DELETE /v1/fleet/:name        delete it: its instances drain, each removed once drained
                              (?deadline=SECONDS, default 1h; ?force=true: at once)
GET    /v1/runs               every run (a job made from a task file), with its ranks
POST   /v1/runs               {"Run": {...task file's keys...}, "WorkingDir": "..."}
GET    /v1/run/:name          one run
POST   /v1/run/:name/stop     stop it (its job), as `drover stop RUN`
"""

from __future__ import annotations

from typing import Any

from actors.agent.core import FleetSpec
from actors.api.core.call import Call, PendingWrite
from actors.api.core.errors import ApiError, bad_request
from actors.api.core.fleets import fleet_to_json, parse_fleet
from actors.api.core.http_types import ApiResponse
from actors.api.core.runs import ended, run_job, run_to_json, submitted_version
from actors.state import StateReader
from contracts import Node, NodeStatus
from contracts.dstack.task import parse_task
from contracts.errors import ValidationError
from contracts.messages import LeaderResponse, RequestKind
from contracts.share import FLEET_ATTRIBUTE, is_run, node_block_ids

RUN_TABLES = ("jobs", "allocs", "evals", "nodes")


# -- fleets ---------------------------------------------------------------------------------------


def _instance(state: StateReader, node: Node) -> dict[str, Any]:
    blocks = node_block_ids(node)
    in_use = state.node_usage(node.id).device_ids
    total, busy = len(blocks), sum(1 for block in blocks if block in in_use)
    return {
        "Name": node.name,
        "NodeID": node.id,
        "Status": node.status.value,
        "Eligibility": node.scheduling_eligibility.value,
        "StatusDescription": node.status_description,
        "TotalBlocks": total,
        "BusyBlocks": busy,
        "Busy": f"{busy}/{total} busy" if total else "cannot be split",
        "Address": node.attributes.get("unique.network.ip-address", ""),
    }


def _fleet_json(state: StateReader, spec: FleetSpec) -> dict[str, Any]:
    name = spec.name
    instances = [
        _instance(state, n)
        for n in sorted(state.nodes(), key=lambda n: n.name)
        if n.attributes.get(FLEET_ATTRIBUTE) == name
    ]
    total = sum(i["TotalBlocks"] for i in instances)
    busy = sum(i["BusyBlocks"] for i in instances)
    ready = [i for i in instances if i["Status"] == NodeStatus.READY.value]
    return {
        **fleet_to_json(spec),
        "Status": "deleting" if spec.deleting else "active",
        "Ready": len(ready),
        "Down": len(instances) - len(ready),
        "Ineligible": sum(1 for i in instances if i["Eligibility"] == "ineligible"),
        "Allocs": sum(
            1 for i in instances for a in state.allocs_by_node(i["NodeID"]) if not a.terminal()
        ),
        "TotalBlocks": total,
        "BusyBlocks": busy,
        "Busy": f"{busy}/{total} busy",
        "Instances": instances,
    }


def list_fleets(call: Call) -> ApiResponse:
    specs = sorted(call.backend.fleets(), key=lambda spec: spec.name)
    return call.read(("nodes", "allocs"), lambda s: [_fleet_json(s, spec) for spec in specs])


def get_fleet(call: Call) -> ApiResponse:
    name = call.params["name"]
    spec = next((spec for spec in call.backend.fleets() if spec.name == name), None)
    if spec is None:
        raise ApiError(404, f'fleet "{name}" not found')
    return call.read(("nodes", "allocs"), lambda s: _fleet_json(s, spec))


def apply_fleet(call: Call) -> ApiResponse:
    body = call.json()
    raw = body.get("Fleet")
    if not isinstance(raw, dict):
        raise bad_request("Fleet: expected a fleet object in the request body")
    try:
        spec = parse_fleet(raw)
    except ValidationError as exc:
        raise bad_request("; ".join(exc.problems)) from None
    try:
        registered = call.backend.apply_fleet(spec)
    except ValueError as exc:  # e.g. a ray fleet where no Ray node is joined
        raise bad_request(f"Fleet: {exc}") from None
    return ApiResponse(200, {"Name": spec.name, "Nodes": registered})


DEFAULT_DELETE_DEADLINE_S = 3600.0  # Nomad's default drain deadline


def delete_fleet(call: Call) -> ApiResponse:
    name = call.params["name"]
    raw = call.query("deadline")
    try:
        deadline = float(raw) if raw else DEFAULT_DELETE_DEADLINE_S
    except ValueError:
        raise bad_request(f"deadline: expected seconds, got {raw!r}") from None
    if not 0 < deadline < float("inf"):
        raise bad_request(f"deadline: expected seconds above 0, got {raw!r} (or use force=true)")
    if call.flag("force"):
        deadline = -1.0
    try:
        draining = call.backend.delete_fleet(name, deadline)
    except KeyError:
        raise ApiError(404, f'fleet "{name}" not found') from None
    return ApiResponse(200, {"Name": name, "Draining": draining, "DeadlineSeconds": deadline})


# -- runs -----------------------------------------------------------------------------------------


def _run(call: Call, state: StateReader, name: str) -> dict[str, Any]:
    job = state.job(call.namespace, name)
    if job is None or not is_run(job):
        raise ApiError(404, f'run "{name}" not found')
    return run_to_json(
        job,
        state.allocs_by_job(job.namespace, job.id),
        state.evals_by_job(job.namespace, job.id),
        state.node,
        submitted_version(state.job_versions(job.namespace, job.id)),
    )


def list_runs(call: Call) -> ApiResponse:
    def render(state: StateReader) -> list[dict[str, Any]]:
        runs = sorted((j for j in state.jobs() if is_run(j)), key=lambda j: j.submit_time)
        return [_run(call, state, job.id) for job in runs if job.namespace == call.namespace]

    return call.read(RUN_TABLES, render)


def get_run(call: Call) -> ApiResponse:
    return call.read(RUN_TABLES, lambda s: _run(call, s, call.params["name"]))


def submit_run(call: Call) -> PendingWrite:
    body = call.json()
    raw = body.get("Run")
    if not isinstance(raw, dict):
        raise bad_request("Run: expected a task object in the request body")
    working_dir = body.get("WorkingDir", "")
    if not isinstance(working_dir, str):
        raise bad_request(f"WorkingDir: expected a path, got {working_dir!r}")
    try:
        config = parse_task({"type": "task", **raw})
    except ValidationError as exc:
        raise bad_request("; ".join(exc.problems)) from None
    for name in config.fleets:
        if "/" in name:
            raise bad_request(f"fleets: {name!r}: drover has no projects; name the fleet alone")
    # No retry on no-capacity (`retry: false`, or events without it): dstack's fail-fast.
    fail_fast = raw.get("retry") is False or (
        config.retry is not None and "no-capacity" not in config.retry.on_events
    )
    # Retry on no-capacity: wait that long at most (dstack's retry.duration).
    waits = config.retry is not None and "no-capacity" in config.retry.on_events
    job = run_job(
        config,
        fail_without_capacity=fail_fast,
        wait_limit_s=float(config.retry.duration_s) if waits and config.retry else None,
        working_dir=working_dir,
        priority_given="priority" in raw,
    )
    state = call.backend.snapshot()
    existing = state.job(job.namespace, job.id)
    if existing is not None and not is_run(existing):
        raise ApiError(409, f'"{job.id}" is a job that is not a run: choose another run name')
    if existing is not None and not ended(_run(call, state, job.id)["Status"]):
        raise ApiError(409, f'run "{job.id}" is active: `drover stop {job.id}` first')
    job = call.backend.package_job(job)
    name = job.id

    def submitted(response: LeaderResponse) -> ApiResponse:
        return ApiResponse(
            200, {"Name": name, "EvalID": response.eval_id, "JobModifyIndex": response.index}
        )

    return call.write_then(RequestKind.REGISTER_JOB, submitted, job=job, namespace=job.namespace)


def stop_run(call: Call) -> PendingWrite:
    name = call.params["name"]
    job = call.backend.snapshot().job(call.namespace, name)
    if job is None or not is_run(job):
        raise ApiError(404, f'run "{name}" not found')
    return call.write_then(
        RequestKind.STOP_JOB,
        lambda response: ApiResponse(200, {"Name": name, "EvalID": response.eval_id}),
        job_id=name,
    )
