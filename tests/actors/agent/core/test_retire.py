"""Retirement (agent core): an instance is released only once the drain asked after it
began tracking is over; instances already draining are not asked again."""

from __future__ import annotations

import dataclasses

from actors.agent.core.retire import Retirement
from contracts import DrainStrategy, Node, NodeEligibility

INELIGIBLE = NodeEligibility.INELIGIBLE


def node(node_id: str, index: int, *, draining: bool = False, eligible: bool = True) -> Node:
    return Node(
        id=node_id,
        drain_strategy=DrainStrategy() if draining else None,
        scheduling_eligibility=NodeEligibility.ELIGIBLE if eligible else INELIGIBLE,
        modify_index=index,
    )


def test_an_instance_leaves_once_the_drain_it_asked_for_is_over() -> None:
    nodes = {"a": node("a", 5), "b": node("b", 6, draining=True, eligible=False)}
    retiring = Retirement()
    assert retiring.begin(["a", "b"], index=10, lookup=nodes.get) == ["a"]
    assert retiring.begin(["a"], index=11, lookup=nodes.get) == [], "tracked already"
    assert retiring.drained(nodes.get) == []
    # The drain is committed (index 12): still draining, so nothing leaves yet.
    nodes["a"] = node("a", 12, draining=True, eligible=False)
    assert retiring.drained(nodes.get) == []
    # a's drain completes; b's (begun before) too: both leave, each once.
    nodes["a"] = node("a", 14, eligible=False)
    nodes["b"] = node("b", 15, eligible=False)
    assert sorted(retiring.drained(nodes.get)) == ["a", "b"]
    assert len(retiring) == 0 and retiring.drained(nodes.get) == []


def test_a_stale_record_does_not_count_as_drained() -> None:
    """An instance made ineligible before the deletion looks drained, but its record is
    older than the ask: it waits for the drain's own record."""
    nodes = {"a": node("a", 3, eligible=False)}
    retiring = Retirement()
    assert retiring.begin(["a"], index=9, lookup=nodes.get) == ["a"]
    assert retiring.drained(nodes.get) == []
    nodes["a"] = dataclasses.replace(nodes["a"], modify_index=10)
    assert retiring.drained(nodes.get) == ["a"]


def test_gone_instances_leave_once_seen_and_forgotten_ones_are_not_tracked() -> None:
    nodes: dict[str, Node] = {"b": node("b", 1)}
    retiring = Retirement()
    assert retiring.begin(["a", "b"], index=2, lookup=nodes.get) == ["a", "b"]
    assert "a" in retiring and "b" in retiring
    assert retiring.drained(nodes.get) == [], "a is not shown yet: its registration is coming"
    nodes["a"] = node("a", 3, draining=True, eligible=False)
    assert retiring.drained(nodes.get) == []
    del nodes["a"]  # removed from the cluster once seen
    assert retiring.drained(nodes.get) == ["a"]
    retiring.forget(["b"])
    assert "b" not in retiring and len(retiring) == 0


def test_a_forced_deletion_asks_again_for_instances_already_draining() -> None:
    nodes = {"a": node("a", 5, draining=True, eligible=False), "b": node("b", 5)}
    retiring = Retirement()
    assert retiring.begin(["a", "b"], index=10, lookup=nodes.get) == ["b"]
    assert retiring.begin(["a", "b"], index=11, lookup=nodes.get) == []
    assert retiring.begin(["a", "b"], index=12, lookup=nodes.get, again=True) == ["a", "b"]
