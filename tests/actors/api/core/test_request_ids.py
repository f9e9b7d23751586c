"""The API's leader request ids: one process's prefix and a count; a request keeps its own."""

from __future__ import annotations

from actors.api.core.request_ids import RequestIds, with_request_id
from contracts.messages import LeaderRequest, RequestKind


def test_ids_are_a_prefix_and_a_count_and_a_reset_draws_a_new_prefix() -> None:
    ids = RequestIds()
    first, second = ids.next(), ids.next()
    prefix = first.rsplit("-", 1)[0]
    assert (first, second) == (f"{prefix}-1", f"{prefix}-2") and len(prefix) == 16
    ids.reset()
    assert ids.next().rsplit("-", 1)[0] != prefix


def test_a_request_without_an_id_gets_one_and_one_with_an_id_keeps_it() -> None:
    bare = LeaderRequest(RequestKind.NODE_HEARTBEAT, node_ids=("n1",))
    given = with_request_id(bare)
    assert given.request_id and given.node_ids == ("n1",) and bare.request_id == ""
    assert with_request_id(given) is given
    assert with_request_id(bare).request_id != given.request_id
