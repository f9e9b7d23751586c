"""`/v1/job/:id/dispatch` and `/v1/job/:id/periodic/force`: launching a template's child.

Dispatch takes Nomad's JobDispatchRequest body: `Payload` (base64), `Meta`, `IdPrefixTemplate`
and the idempotency token, which Nomad's Go client sends as the `idempotency_token` query
parameter and python-nomad in the body (as `idempotency_token`); all three spellings are read.
"""

from __future__ import annotations

from actors.api.core.call import Call, PendingWrite, typed_field
from actors.api.core.http_types import ApiResponse
from contracts.messages import LeaderResponse, RequestKind


def dispatch_job(call: Call) -> PendingWrite:
    body = call.json_or_empty()
    meta = typed_field(body, "Meta", dict[str, str], {})
    payload = typed_field(body, "Payload", str, "")
    template = typed_field(body, "IdPrefixTemplate", str, "")
    token = (
        typed_field(body, "IdempotencyToken", str, "")
        or typed_field(body, "idempotency_token", str, "")
        or call.query("idempotency_token")
    )
    return call.write_then(
        RequestKind.DISPATCH_JOB,
        _dispatch_reply,
        job_id=call.params["id"],
        meta=meta,
        payload=payload,
        idempotency_token=token,
        id_prefix_template=template,
    )


def _dispatch_reply(response: LeaderResponse) -> ApiResponse:
    created = response.job_create_index or response.index
    return ApiResponse(
        200,
        {
            "DispatchedJobID": response.dispatched_job_id,
            "EvalID": response.eval_id,
            "EvalCreateIndex": response.index if response.eval_id else 0,
            "JobCreateIndex": created,
            "Index": response.index,
            "LastContact": 0,
            "KnownLeader": True,
        },
        index=response.index,
    )


def force_periodic(call: Call) -> PendingWrite:
    return call.write_then(RequestKind.FORCE_PERIODIC, _force_reply, job_id=call.params["id"])


def _force_reply(response: LeaderResponse) -> ApiResponse:
    return ApiResponse(
        200,
        {
            "EvalID": response.eval_id,
            "EvalCreateIndex": response.index if response.eval_id else 0,
            "Index": response.index,
            "LastContact": 0,
            "KnownLeader": True,
        },
        index=response.index,
    )
