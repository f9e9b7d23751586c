"""The request and response records between the HTTP server and the API core."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ApiRequest:
    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    token: str = ""  # X-Nomad-Token


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    body: Any  # JSON-able
    index: int | None = None  # X-Nomad-Index, for reads and writes that commit
    # Set for a body that is not JSON (the Prometheus text of /v1/metrics): `body` is then
    # the text, sent as is with this Content-Type.
    content_type: str = ""
