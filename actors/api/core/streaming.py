"""Responses of unknown length, and query strings with repeated parameters: what the HTTP
server (actors/api/server.py) needs from the core to serve a stream such as
`/v1/event/stream`.

A handler answers `ApiResponse(200, body)` with a `StreamBody`; the server then sends the
body's chunks as they come (chunked transfer encoding) until the body ends, the client leaves
or the server stops. `read` never blocks: the server calls it again when the state changes
and at every heartbeat, and sends `heartbeat()` each `heartbeat_s`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable


class StreamBody(ABC):
    content_type = "application/json"
    heartbeat_s = 10.0

    @abstractmethod
    def read(self) -> list[bytes] | None:
        """What is ready to send now ([] for nothing yet); None once the stream has ended."""

    @abstractmethod
    def heartbeat(self) -> bytes:
        """What keeps an idle stream's connection alive."""

    @abstractmethod
    def close(self) -> None:
        """The stream is over (ended, the client left, the server stopped): free its
        resources. Called once, whatever ended it."""


class MultiQuery(dict[str, str]):
    """A query string as a mapping (a repeated parameter's last value, as before) that still
    holds every value of a repeated parameter (`?topic=Job&topic=Node`)."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self.pairs = list(pairs)
        super().__init__(self.pairs)

    def values_of(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name]

    def with_value(self, name: str, value: str) -> MultiQuery:
        """A copy with `name` set to `value` alone."""
        return MultiQuery([*((k, v) for k, v in self.pairs if k != name), (name, value)])


def values_of(query: object, name: str) -> list[str]:
    """Every value of a query parameter, from a MultiQuery or a plain mapping."""
    if isinstance(query, MultiQuery):
        return query.values_of(name)
    if isinstance(query, dict) and name in query:
        return [str(query[name])]
    return []
