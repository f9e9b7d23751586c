"""One API call being handled: the request, its path parameters and the backend, with the
parsing every handler shares (query flags, namespace, JSON body) and the write path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from actors.api.core.backend import Backend
from actors.api.core.blocking import blocking_read
from actors.api.core.errors import ApiError, bad_request
from actors.api.core.http_types import ApiRequest, ApiResponse
from actors.state import StateReader
from contracts.codec import CodecError, from_wire
from contracts.messages import LeaderRequest, LeaderResponse, RequestKind

T = TypeVar("T")

_ERROR_STATUS = {"not-found": 404, "invalid": 400, "conflict": 409}


def body_field(body: dict[str, Any], name: str) -> Any:
    """A request body's field as Go's encoding/json finds it: the exact key, else one equal
    to it ignoring case (python-nomad sends `UnHealthyAllocationIDs`, which Nomad reads as
    `UnhealthyAllocationIDs`). None when absent."""
    if name in body:
        return body[name]
    folded = name.casefold()
    return next((v for k, v in body.items() if k.casefold() == folded), None)


def typed_field(body: dict[str, Any], name: str, tp: type[T], default: T) -> T:
    """A body field (found as `body_field` finds it) decoded as `tp` by the records' codec:
    `default` when absent or null, a 400 naming the field and value when it is not a `tp`."""
    value = body_field(body, name)
    if value is None:
        return default
    try:
        return from_wire(tp, value, name)
    except CodecError as exc:
        raise bad_request(str(exc)) from None


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A handler's answer that is one leader write away: `request`, and how to answer once the
    leader has committed it. The HTTP server sends the request and waits for the leader on
    its event loop, not holding a handler thread (Api.begin / Api.finish); `Api.handle` sends
    it and waits in place."""

    request: LeaderRequest
    render: Callable[[LeaderResponse], ApiResponse]

    def answer(self, response: LeaderResponse) -> ApiResponse:
        return self.render(_succeeded(response))


def _succeeded(response: LeaderResponse) -> LeaderResponse:
    if not response.ok:
        raise ApiError(_ERROR_STATUS.get(response.error_kind, 500), response.error)
    return response


@dataclass(slots=True)
class Call:
    request: ApiRequest
    params: dict[str, str]
    backend: Backend

    # -- request parsing ------------------------------------------------------------------------

    def query(self, name: str, default: str = "") -> str:
        return self.request.query.get(name, default)

    def flag(self, name: str) -> bool:
        """A boolean query parameter as Nomad parses it (Go's strconv.ParseBool: 1, t, T,
        TRUE, true, True and their false forms; also yes/no); absent or empty: false."""
        raw = self.request.query.get(name, "")
        if raw in ("1", "t", "T", "TRUE", "true", "True") or raw.lower() == "yes":
            return True
        if raw in ("", "0", "f", "F", "FALSE", "false", "False") or raw.lower() == "no":
            return False
        raise bad_request(f"{name}: expected true or false, got {raw!r}")

    @property
    def namespace(self) -> str:
        return self.request.query.get("namespace") or "default"

    def json(self) -> dict[str, Any]:
        if not self.request.body:
            raise bad_request("request body: expected a JSON object, got nothing")
        try:
            body = orjson.loads(self.request.body)
        except orjson.JSONDecodeError as exc:
            raise bad_request(f"request body: invalid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise bad_request(f"request body: expected a JSON object, got {type(body).__name__}")
        return body

    def json_or_empty(self) -> dict[str, Any]:
        return self.json() if self.request.body.strip() else {}

    # -- reads and writes -------------------------------------------------------------------------

    def read(self, tables: Sequence[str], render: Callable[[StateReader], Any]) -> ApiResponse:
        return blocking_read(self.backend, self.request.query, tables, render)

    def write(self, kind: RequestKind, **fields: Any) -> LeaderResponse:
        """Send a write and wait for the leader's answer (an ApiError if it refused)."""
        return _succeeded(self.backend.write(self._request(kind, fields)))

    def write_then(
        self, kind: RequestKind, render: Callable[[LeaderResponse], ApiResponse], **fields: Any
    ) -> PendingWrite:
        """A write as a handler's last step: `render` makes the answer from the leader's
        (successful) response, wherever and whenever it arrives, so it must not read the
        call's backend."""
        return PendingWrite(self._request(kind, fields), render)

    def _request(self, kind: RequestKind, fields: dict[str, Any]) -> LeaderRequest:
        fields.setdefault("namespace", self.namespace)
        return LeaderRequest(kind, **fields)


# A route's handler: it answers, or returns the one leader write its answer waits for.
Handler = Callable[[Call], ApiResponse | PendingWrite]
