"""`/v1/operator/scheduler/configuration` (Nomad's Operator.SchedulerGet/SetConfiguration):
the preemption switches per scheduler type and the placement algorithm."""

from __future__ import annotations

from typing import Any

from actors.api.core.call import Call, Handler, PendingWrite
from actors.api.core.errors import bad_request
from actors.api.core.http_types import ApiResponse
from actors.state import StateReader
from contracts.codec import CodecError, from_wire, to_wire
from contracts.messages import LeaderResponse, RequestKind
from contracts.scheduler_config import SchedulerConfiguration

TABLES = ("scheduler_config",)


def get_scheduler_config(call: Call) -> ApiResponse:
    def render(state: StateReader) -> Any:
        config = state.scheduler_config()
        return {
            "SchedulerConfig": to_wire(config),
            "Index": config.modify_index,
            "KnownLeader": True,
            "LastContact": 0,
        }

    return call.read(TABLES, render)


def set_scheduler_config(call: Call) -> PendingWrite:
    body = call.json()
    # The indexes are the server's; Nomad's clients send back what they read.
    fields = {k: v for k, v in body.items() if k not in ("CreateIndex", "ModifyIndex")}
    try:
        config = from_wire(SchedulerConfiguration, fields, "$")
    except CodecError as exc:
        raise bad_request(str(exc)) from None
    cas = call.query("cas")
    if cas and not cas.isdigit():
        raise bad_request(f"cas: expected an index, got {cas!r}")
    return call.write_then(
        RequestKind.SET_SCHEDULER_CONFIG,
        _config_reply,
        scheduler_config=config,
        enforce_index=int(cas) if cas else None,
    )


def _config_reply(response: LeaderResponse) -> ApiResponse:
    return ApiResponse(200, {"Updated": response.updated, "Index": response.index}, response.index)


ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/v1/operator/scheduler/configuration", get_scheduler_config),
    ("PUT", "/v1/operator/scheduler/configuration", set_scheduler_config),
    ("POST", "/v1/operator/scheduler/configuration", set_scheduler_config),
]
