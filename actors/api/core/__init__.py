"""The HTTP API's pure core: routes, Nomad JSON shapes, blocking queries, ACL checks and
dry-run plans, over a `Backend` (state reads, leader writes). No Ray, Redis or sockets here:
`actors/api/service.py` supplies the backend and `actors/api/server.py` the HTTP server."""

from actors.api.core.api import Api
from actors.api.core.backend import Backend
from actors.api.core.errors import ApiError
from actors.api.core.http_types import ApiRequest, ApiResponse

__all__ = ["Api", "ApiError", "ApiRequest", "ApiResponse", "Backend"]
