"""The ids of the API's leader requests: the leader applies each id at most once, and a write
that timed out is named by its id (the log's entries carry it), so it is given before the
request is sent and known to whoever answers the client."""

from __future__ import annotations

import itertools
import os
import uuid

from contracts.copying import replacer
from contracts.messages import LeaderRequest


class RequestIds:
    """A request id is this process's random prefix and a count: unique across processes and
    restarts as a uuid4 per request would be, without a getrandom call on every registration.
    A forked child draws a prefix of its own."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.prefix = uuid.uuid4().hex[:16]
        self.counter = itertools.count(1)  # next() is atomic under the GIL

    def next(self) -> str:
        return f"{self.prefix}-{next(self.counter)}"


_ids = RequestIds()
os.register_at_fork(after_in_child=_ids.reset)
_set_request_id = replacer(LeaderRequest, "request_id")


def with_request_id(request: LeaderRequest) -> LeaderRequest:
    """`request` with an id of this process's if it has none."""
    return request if request.request_id else _set_request_id(request, _ids.next())
