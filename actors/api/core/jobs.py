"""`/v1/jobs`, `/v1/job/:id/...` and `/v1/scaling/...` handlers."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from actors.api.core import shapes
from actors.api.core.call import Call, PendingWrite
from actors.api.core.deployment_shapes import deployment_lookup
from actors.api.core.dry_run import plan_job
from actors.api.core.errors import bad_request, not_found
from actors.api.core.http_types import ApiResponse
from actors.api.core.task_states import job_lookup
from actors.state import StateReader
from contracts import ClientStatus, Job, ValidationError, to_wire
from contracts.jobspec import parse_hcl_with_warnings, parse_json_with_warnings
from contracts.jobspec.limits import size_problem
from contracts.messages import LeaderResponse, RequestKind

ENFORCE_INDEX_PREFIX = "Enforcing job modify index"  # Nomad's RegisterEnforceIndexErrPrefix

JOB_TABLES = ("jobs",)


def _require_job(state: StateReader, call: Call) -> Job:
    job = state.job(call.namespace, call.params["id"])
    if job is None:
        raise not_found(f'job "{call.params["id"]}" not found')
    return job


def _parse_job(body: dict[str, Any], call: Call) -> tuple[Job, list[str]]:
    raw = body.get("Job")
    if not isinstance(raw, dict):
        raise bad_request("Job: expected a job object in the request body")
    limits = call.backend.job_limits
    too_big = size_problem(len(call.request.body or b""), limits)
    if too_big is not None:
        raise bad_request(too_big)
    try:
        job, warnings = parse_json_with_warnings({"Job": raw}, limits)
    except ValidationError as exc:
        raise bad_request("; ".join(exc.problems)) from None
    if "namespace" in call.request.query and job.namespace != call.namespace:
        job = job.replace(namespace=call.namespace)
    path_id = call.params.get("id")
    if path_id is not None and job.id != path_id:
        raise bad_request(f"Job ID does not match request path: {job.id!r} != {path_id!r}")
    return job, warnings


def _check_node_pool(state: Callable[[], StateReader], call: Call, job: Job) -> None:
    """Nomad's jobNodePoolValidatingHook: the job's pool must exist. drover keeps no pool
    records: a pool exists once a node (or a declared fleet) is in it; `default` and `all`
    always do. `state` is called only for another pool: most jobs are in the default one,
    and a registration need not pay for a snapshot of the API's replica."""
    pool = job.node_pool or "default"
    if pool in ("default", "all"):
        return
    if any(n.node_pool == pool for n in state().nodes()):
        return
    if any(f.node_pool == pool for f in call.backend.fleets()):
        return
    raise bad_request(f'job "{job.id}" is in nonexistent node pool "{pool}"')


def _eval_priority(value: Any, name: str) -> int | None:
    """Nomad's eval priority override: absent or 0 means the job's priority."""
    if value is None or value == 0:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100:
        raise bad_request(f"{name}: eval priority must be between 1 and 100, got {value!r}")
    return value


def _non_negative(value: Any, name: str) -> int:
    """A body field that must be an integer of at least 0 (an index, a version)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise bad_request(f"{name}: expected a non-negative integer, got {value!r}")
    return value


def _write_reply(response: LeaderResponse, warnings: list[str] | None = None) -> ApiResponse:
    body = {
        "EvalID": response.eval_id,
        "EvalCreateIndex": response.index if response.eval_id else 0,
        "JobModifyIndex": response.job_modify_index,
        "Warnings": "; ".join([*(warnings or ()), *response.warnings]),
        "Index": response.index,
        "LastContact": 0,
        "KnownLeader": True,
    }
    return ApiResponse(200, body, index=response.index)


# -- list, register, parse ---------------------------------------------------------------------


def list_jobs(call: Call) -> ApiResponse:
    prefix = call.query("prefix")
    namespace = call.query("namespace") or "default"

    def render(state: StateReader) -> Any:
        jobs = [
            j
            for j in state.jobs()
            if j.id.startswith(prefix) and (namespace == "*" or j.namespace == namespace)
        ]
        jobs.sort(key=lambda j: (j.namespace, j.id))
        children = shapes.children_summary(jobs, state.jobs())
        return [
            shapes.job_stub(
                j,
                shapes.job_summary(
                    j,
                    state.allocs_by_job(j.namespace, j.id),
                    state.evals_by_job(j.namespace, j.id),
                    children.get(f"{j.namespace}/{j.id}"),
                ),
            )
            for j in jobs
        ]

    return call.read(("jobs", "allocs"), render)


def register_job(call: Call) -> PendingWrite:
    body = call.json()
    job, warnings = _parse_job(body, call)
    enforce = body.get("EnforceIndex", False)
    modify_index = body.get("JobModifyIndex", 0)
    if not isinstance(enforce, bool):
        raise bad_request(f"EnforceIndex: expected a boolean, got {enforce!r}")
    modify_index = _non_negative(modify_index, "JobModifyIndex")
    preserve = body.get("PreserveCounts", False)
    if not isinstance(preserve, bool):
        raise bad_request(f"PreserveCounts: expected a boolean, got {preserve!r}")
    eval_priority = _eval_priority(body.get("EvalPriority"), "EvalPriority")
    _check_node_pool(call.backend.snapshot, call, job)
    job = call.backend.package_job(job)
    return call.write_then(
        RequestKind.REGISTER_JOB,
        lambda response: _write_reply(response, warnings),
        job=job,
        namespace=job.namespace,
        preserve_counts=preserve,
        enforce_index=modify_index if enforce else None,
        eval_priority=eval_priority,
    )


def parse_job(call: Call) -> ApiResponse:
    body = call.json()
    text = body.get("JobHCL")
    if not isinstance(text, str):
        raise bad_request("JobHCL: expected the job file's text as a string")
    try:
        job, _ = parse_hcl_with_warnings(text)
    except ValidationError as exc:
        raise bad_request("; ".join(exc.problems)) from None
    # Parsing always canonicalises here (drover's records carry Nomad's defaults).
    return ApiResponse(200, shapes.job_to_nomad(job))


# -- one job -------------------------------------------------------------------------------------


def get_job(call: Call) -> ApiResponse:
    return call.read(JOB_TABLES, lambda s: shapes.job_to_nomad(_require_job(s, call)))


def stop_job(call: Call) -> ApiResponse | PendingWrite:
    purge = call.flag("purge")
    raw_priority = call.query("eval_priority")
    try:
        priority = int(raw_priority) if raw_priority else None
    except ValueError:
        raise bad_request(f"eval_priority: expected an integer, got {raw_priority!r}") from None
    eval_priority = _eval_priority(priority, "eval_priority")
    state = call.backend.snapshot()
    if state.job(call.namespace, call.params["id"]) is None:
        # Nomad: deregistering a job that does not exist is not an error; nothing happens.
        index = state.latest_index()
        body = {"EvalID": "", "EvalCreateIndex": 0, "JobModifyIndex": 0, "Warnings": ""}
        body |= {"Index": index, "LastContact": 0, "KnownLeader": True}
        return ApiResponse(200, body, index=index)
    return call.write_then(
        RequestKind.STOP_JOB,
        _write_reply,
        job_id=call.params["id"],
        purge=purge,
        eval_priority=eval_priority,
    )


def job_versions(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        _require_job(state, call)
        versions = state.job_versions(call.namespace, call.params["id"])
        body: dict[str, Any] = {"Versions": [shapes.job_to_nomad(v) for v in versions]}
        body["Diffs"] = _version_diffs(versions) if call.flag("diffs") else None
        return body

    return call.read(("job_versions",), render)


def _version_diffs(versions: list[Job]) -> list[dict[str, Any]]:
    """Per version (newest first), what changed against the one before it: the groups whose
    count or tasks changed (a summary, not Nomad's field-level diff)."""
    diffs = []
    for newer, older in itertools.pairwise(versions):
        old_groups = {tg.name: tg for tg in older.task_groups}
        groups: list[dict[str, Any]] = []
        for tg in newer.task_groups:
            before = old_groups.pop(tg.name, None)
            if before is None:
                groups.append({"Name": tg.name, "Type": "Added"})
            elif before != tg:
                fields = [{"Name": "Count", "Old": str(before.count), "New": str(tg.count)}]
                groups.append(
                    {
                        "Name": tg.name,
                        "Type": "Edited",
                        "Fields": fields if before.count != tg.count else [],
                    }
                )
        groups += [{"Name": name, "Type": "Deleted"} for name in old_groups]
        changed = groups or newer.stop != older.stop
        diffs.append(
            {"Type": "Edited" if changed else "None", "ID": newer.id, "TaskGroups": groups}
        )
    return diffs


def job_allocations(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        _require_job(state, call)
        allocs = state.allocs_by_job(call.namespace, call.params["id"])
        job, dep = job_lookup(state), deployment_lookup(state)
        ordered = sorted(allocs, key=lambda a: a.create_index)
        return [shapes.alloc_stub(a, job=job(a), deployment=dep(a)) for a in ordered]

    return call.read(("allocs",), render)


def job_evaluations(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        _require_job(state, call)
        evals = state.evals_by_job(call.namespace, call.params["id"])
        return [shapes.evaluation(e) for e in sorted(evals, key=lambda e: e.create_index)]

    return call.read(("evals",), render)


def job_summary(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        job = _require_job(state, call)
        children = shapes.children_summary((job,), state.jobs())
        return shapes.job_summary(
            job,
            state.allocs_by_job(job.namespace, job.id),
            state.evals_by_job(job.namespace, job.id),
            children.get(f"{job.namespace}/{job.id}"),
        )

    return call.read(("jobs", "allocs"), render)


def evaluate_job(call: Call) -> PendingWrite:
    return call.write_then(RequestKind.EVALUATE_JOB, _write_reply, job_id=call.params["id"])


def plan(call: Call) -> ApiResponse:
    body = call.json()
    job, warnings = _parse_job(body, call)
    # As `run` would register it: local code as its URI (content-addressed), so the plan
    # shows no update where the code did not change.
    state = call.backend.snapshot()
    _check_node_pool(lambda: state, call, job)
    job = call.backend.package_job(job)
    preserve = bool(body.get("PreserveCounts", False))
    try:
        outcome = plan_job(state, job, preserve_counts=preserve)
    except ValidationError as exc:
        raise bad_request(str(exc)) from None
    return ApiResponse(
        200,
        {
            "Annotations": {
                "DesiredTGUpdates": {g: to_wire(u) for g, u in outcome.desired_updates.items()},
                "PreemptedAllocs": [shapes.alloc_stub(a) for a in outcome.preempted] or None,
            },
            "FailedTGAllocs": {g: to_wire(m) for g, m in outcome.failed_tg_allocs.items()} or None,
            "JobModifyIndex": outcome.job_modify_index,
            "CreatedEvals": [shapes.evaluation(e) for e in outcome.created_evals] or None,
            "Diff": {"Type": outcome.diff_type, "ID": job.id} if body.get("Diff") else None,
            "NextPeriodicLaunch": None,
            "Warnings": "; ".join([*warnings, *outcome.warnings]),
            "Index": state.latest_index(),
        },
        index=state.latest_index(),
    )


def revert(call: Call) -> PendingWrite:
    body = call.json()
    version = body.get("JobVersion")
    version = _non_negative(version, "JobVersion")
    prior = body.get("EnforcePriorVersion")
    if prior is not None and (not isinstance(prior, int) or isinstance(prior, bool)):
        raise bad_request(f"EnforcePriorVersion: expected an integer, got {prior!r}")
    return call.write_then(
        RequestKind.REVERT_JOB,
        _write_reply,
        job_id=call.params["id"],
        version=version,
        enforce_index=prior,
    )


def stable(call: Call) -> PendingWrite:
    body = call.json()
    version = body.get("JobVersion")
    version = _non_negative(version, "JobVersion")
    flag = body.get("Stable", True)
    if not isinstance(flag, bool):
        raise bad_request(f"Stable: expected a boolean, got {flag!r}")
    return call.write_then(
        RequestKind.SET_STABLE,
        _stable_reply,
        job_id=call.params["id"],
        version=version,
        stable=flag,
    )


def _stable_reply(response: LeaderResponse) -> ApiResponse:
    body = {"JobModifyIndex": response.job_modify_index, "Index": response.index}
    return ApiResponse(200, body, response.index)


# -- scaling --------------------------------------------------------------------------------------


def scale_status(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        job = _require_job(state, call)
        events = state.scaling_events(job.namespace, job.id)
        allocs = state.allocs_by_job(job.namespace, job.id)
        groups = {}
        for tg in job.task_groups:
            live = [a for a in allocs if a.task_group == tg.name and not a.terminal()]
            running = sum(1 for a in live if a.client_status is ClientStatus.RUNNING)
            groups[tg.name] = {
                "Desired": tg.count,
                "Placed": len(live),
                "Running": running,
                "Healthy": running,  # no health checks: a running allocation is healthy
                "Unhealthy": 0,
                "Events": [to_wire(e) for e in events.get(tg.name, ())],
            }
        return {
            "JobID": job.id,
            "Namespace": job.namespace,
            "JobStopped": job.stop,
            "JobCreateIndex": job.create_index,
            "JobModifyIndex": job.job_modify_index,
            "TaskGroups": groups,
        }

    return call.read(("jobs", "scaling_events", "allocs"), render)


def scale(call: Call) -> PendingWrite:
    body = call.json()
    target = body.get("Target")
    if not isinstance(target, dict) or not isinstance(target.get("Group"), str):
        raise bad_request('Target: expected {"Group": "<task group name>"}')
    count = body.get("Count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool)):
        raise bad_request(f"Count: expected an integer, got {count!r}")
    top = call.backend.job_limits.max_count
    if count is not None and not 0 <= count <= top:
        raise bad_request(f"Count: {count} is outside 0..{top} (the limit of a group)")
    message = body.get("Message", "")
    meta = body.get("Meta") or {}
    if not isinstance(message, str) or not isinstance(meta, dict):
        raise bad_request("Message: expected a string; Meta: expected an object")
    enforce = body.get("EnforceIndex", False)
    modify_index = body.get("JobModifyIndex") or 0
    if not isinstance(enforce, bool):
        raise bad_request(f"EnforceIndex: expected a boolean, got {enforce!r}")
    modify_index = _non_negative(modify_index, "JobModifyIndex")
    if count is not None and modify_index > 0:
        # Nomad's Job.Scale: a count change with a non-zero JobModifyIndex applies only to
        # that version of the job (EnforceIndex or not).
        enforce = True
        _check_scale_index(call, modify_index)
    return call.write_then(
        RequestKind.SCALE_JOB,
        _write_reply,
        job_id=call.params["id"],
        group=target["Group"],
        count=count,
        message=message,
        meta=meta,
        enforce_index=modify_index if enforce else None,
    )


def _check_scale_index(call: Call, modify_index: int) -> None:
    job = call.backend.snapshot().job(call.namespace, call.params["id"])
    if job is not None and job.job_modify_index != modify_index:
        raise bad_request(
            f"{ENFORCE_INDEX_PREFIX} {modify_index}: job exists with conflicting job modify"
            f" index: {job.job_modify_index}"
        )
