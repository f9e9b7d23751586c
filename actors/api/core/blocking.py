"""Nomad's blocking queries: `?index=N&wait=D` holds a read until the data's index passes N
or D elapses (default 5 minutes, at most 10), then answers with `X-Nomad-Index`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actors.api.core.backend import Backend
from actors.api.core.errors import bad_request
from actors.api.core.http_types import ApiResponse
from actors.state import StateReader
from contracts.jobspec.values import parse_go_duration

DEFAULT_WAIT_S = 300.0
MAX_WAIT_S = 600.0


def query_options(query: Mapping[str, str]) -> tuple[int, float]:
    """(min index, wait seconds) of a request; bad values are a 400 naming the parameter."""
    raw_index = query.get("index", "0") or "0"
    try:
        min_index = int(raw_index)
    except ValueError:
        raise bad_request(f"index: expected an integer, got {raw_index!r}") from None
    if min_index < 0:
        raise bad_request(f"index: must not be negative, got {min_index}")
    raw_wait = query.get("wait")
    if raw_wait is None:
        return min_index, DEFAULT_WAIT_S
    try:
        wait = parse_go_duration(raw_wait) if not raw_wait.isdigit() else float(raw_wait)
    except ValueError:
        raise bad_request(f"wait: expected a duration such as 5s or 1m, got {raw_wait!r}") from None
    return min_index, min(max(wait, 0.0), MAX_WAIT_S)


def blocking_read(
    backend: Backend,
    query: Mapping[str, str],
    tables: Sequence[str],
    render: Callable[[StateReader], Any],
) -> ApiResponse:
    min_index, wait_s = query_options(query)
    deadline = time.monotonic() + wait_s
    while True:
        state = backend.snapshot()
        index = max((state.table_index(t) for t in tables), default=0) or state.latest_index()
        remaining = deadline - time.monotonic()
        if min_index == 0 or index > min_index or remaining <= 0:
            return ApiResponse(200, render(state), index=max(index, 1))
        backend.wait_after(state.latest_index(), remaining)
