"""`GET /v1/event/stream`: Nomad's event stream (command/agent/event_endpoint.go).

`?topic=Topic:Key` (repeatable; none: every topic, which needs a management token),
`?namespace=` (default "default", "*" for all), `?index=N` (events from log index N on; the
oldest still held if N is no longer). The answer is a stream of newline-delimited JSON
objects, `{"Index": N, "Events": [...]}` per log index, `{}` every 10 seconds while idle
(event_broker.py). Bad parameters are a 400 naming them; a token that does not grant every
topic asked for is a 403, as Nomad answers.
"""

from __future__ import annotations

from collections.abc import Callable

from actors.api.core.call import Call
from actors.api.core.errors import ApiError
from actors.api.core.event_broker import EventBroker
from actors.api.core.event_topics import EventFilter, parse_index, parse_topics
from actors.api.core.http_types import ApiResponse
from actors.api.core.streaming import values_of


def _broker(call: Call) -> EventBroker:
    broker = getattr(call.backend, "events", None)
    if not isinstance(broker, EventBroker):
        raise ApiError(501, "this agent serves no event stream")
    return broker


def _permission(call: Call, what: EventFilter) -> Callable[[], bool] | None:
    """With ACLs on: 403 unless the token grants every topic; then how to ask again."""
    backend = call.backend
    if not backend.acl_enabled:
        return None
    token = call.request.token

    def allowed() -> bool:
        found = backend.acl.resolve(token)
        return found is not None and what.allowed(found[1])

    if not allowed():
        raise ApiError(403, "Permission denied")
    return allowed


def stream(call: Call) -> ApiResponse:
    topics = parse_topics(values_of(call.request.query, "topic"))
    index = parse_index(call.query("index"))
    what = EventFilter(topics, call.namespace)
    broker = _broker(call)
    allowed = _permission(call, what)
    return ApiResponse(200, broker.subscribe(what, index, allowed))


ROUTES = [("GET", "/v1/event/stream", stream)]
