"""PlanResponse: a lean verdict rebuilds exactly what the leader committed."""

from __future__ import annotations

import dataclasses

from contracts import Allocation, Plan, PlanResult, RejectedNode
from contracts.messages import PlanResponse

A = Allocation(id="a", node_id="n1")
B = Allocation(id="b", node_id="n2")
STOP = Allocation(id="s", node_id="n2")
PLAN = Plan(eval_id="e", node_allocation={"n1": (A,), "n2": (B,)}, node_update={"n2": (STOP,)})


def lean(*rejected: str) -> PlanResponse:
    verdict = PlanResult(
        rejected_nodes=tuple(RejectedNode(n, "cpu exhausted") for n in rejected),
        refresh_index=9 if rejected else 0,
        alloc_index=8,
    )
    return PlanResponse("e", 1, verdict, lean=True)


def test_full_commit_is_the_whole_plan() -> None:
    result = lean().committed(PLAN)
    assert result.node_allocation == PLAN.node_allocation
    assert result.node_update == PLAN.node_update
    assert result.full_commit(PLAN)[0] and result.alloc_index == 8


def test_partial_commit_drops_exactly_the_rejected_nodes() -> None:
    result = lean("n2").committed(PLAN)
    assert result.node_allocation == {"n1": (A,)} and result.node_update == {}
    assert result.refresh_index == 9 and not result.full_commit(PLAN)[0]


def test_all_at_once_with_a_rejection_commits_nothing() -> None:
    plan = dataclasses.replace(PLAN, all_at_once=True)
    result = lean("n2").committed(plan)
    assert result.node_allocation == {} and result.node_update == {}


def test_full_responses_are_returned_as_they_are() -> None:
    full = PlanResult(node_allocation={"n1": (A,)}, alloc_index=3)
    assert PlanResponse("e", 1, full).committed(PLAN) is full


def test_plans_travel_in_the_compact_form_and_round_trip() -> None:
    import orjson
    import pytest

    from contracts import CodecError, dumps, loads, to_wire

    wire = orjson.loads(dumps(PLAN))
    assert isinstance(wire["NodeAllocation"], list) and "Shared" in wire["NodeAllocation"][0]
    assert loads(Plan, dumps(PLAN)) == PLAN
    plain = to_wire(dataclasses.replace(PLAN, node_update={}, node_allocation={}))
    plain["NodeAllocation"] = {"n1": [to_wire(A)]}
    assert loads(Plan, orjson.dumps(plain)).node_allocation == {"n1": (A,)}
    wire["NodeAllocation"][0]["Rows"][0][0] = 5
    with pytest.raises(CodecError, match=r"\$\.NodeAllocation\[0\]\.Rows\[0\]"):
        loads(Plan, orjson.dumps(wire))


def test_a_leader_response_carries_its_visible_index_and_refuses_a_bad_one() -> None:
    import orjson
    import pytest

    from contracts import CodecError, dumps, loads
    from contracts.messages import LeaderResponse

    answer = LeaderResponse("r1", ok=True, index=7, visible_index=9)
    assert loads(LeaderResponse, dumps(answer)) == answer
    wire = orjson.loads(dumps(answer))
    wire["VisibleIndex"] = "nine"
    with pytest.raises(CodecError, match=r"\$\.VisibleIndex"):
        loads(LeaderResponse, orjson.dumps(wire))
