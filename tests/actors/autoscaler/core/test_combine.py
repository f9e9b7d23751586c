"""Capping, "safest wins", groups and dry-run: the cases of nomad-autoscaler's
sdk/strategy_test.go (CapCount, PreemptAction, SetDryRun) and policy/handler_test.go
(pickWinnerActionFromGroups)."""

from __future__ import annotations

import pytest

from actors.autoscaler.core.combine import Vote, cap_count, pick_winner, preempt, set_dry_run
from contracts.autoscaling import (
    META_COUNT_CAPPED,
    META_COUNT_ORIGINAL,
    META_DRY_RUN,
    META_DRY_RUN_COUNT,
    META_REASON_HISTORY,
    Direction,
    ScalingAction,
)

UP, NONE, DOWN = Direction.UP, Direction.NONE, Direction.DOWN


@pytest.mark.parametrize(
    ("count", "reason", "expected_count", "history"),
    [
        (4, "", 5, []),
        (15, "", 10, []),
        (0, "scaled to 0", 5, ["scaled to 0"]),
    ],
)
def test_cap_count_records_what_it_changed(
    count: int, reason: str, expected_count: int, history: list[str]
) -> None:
    capped = cap_count(ScalingAction(count=count, reason=reason), 5, 10)
    assert capped.count == expected_count
    assert capped.reason == f"capped count from {count} to {expected_count} to stay within limits"
    assert capped.meta == {
        META_COUNT_CAPPED: True,
        META_COUNT_ORIGINAL: count,
        META_REASON_HISTORY: history,
    }
    assert capped.capped


def test_cap_count_leaves_a_count_within_limits_alone() -> None:
    action = ScalingAction(count=7, direction=UP, reason="r", meta={"k": "v"})
    assert cap_count(action, 5, 10) is action
    assert cap_count(ScalingAction(), 0, 0) == ScalingAction()


def test_cap_count_appends_to_an_existing_history_and_skips_dry_run() -> None:
    action = ScalingAction(count=1, reason="second", meta={META_REASON_HISTORY: ["first"]})
    assert cap_count(action, 3, 5).meta[META_REASON_HISTORY] == ["first", "second"]
    dry = set_dry_run(ScalingAction(count=20, direction=UP))
    assert cap_count(dry, 3, 5) is dry


def test_set_dry_run_sends_the_sentinel_and_keeps_the_count_in_meta() -> None:
    action = set_dry_run(ScalingAction(count=3, direction=UP, reason="r", meta={"a": 1}))
    assert action == ScalingAction(
        count=-1,
        direction=NONE,
        reason="r",
        meta={"a": 1, META_DRY_RUN: True, META_DRY_RUN_COUNT: 3},
    )
    assert action.dry_run


def act(direction: Direction, count: int = 0) -> ScalingAction:
    return ScalingAction(count=count, direction=direction)


@pytest.mark.parametrize(
    ("a", "b", "winner"),
    [
        (act(NONE), act(NONE), "a"),
        (act(NONE), act(DOWN), "a"),
        (act(NONE), act(UP), "b"),
        (act(DOWN), act(NONE), "b"),
        (act(DOWN, 1), act(DOWN, 2), "b"),
        (act(DOWN, 2), act(DOWN, 1), "a"),
        (act(DOWN, 2), act(DOWN, 2), "a"),
        (act(DOWN), act(UP), "b"),
        (act(UP), act(NONE), "a"),
        (act(UP), act(DOWN), "a"),
        (act(UP, 1), act(UP, 2), "b"),
        (act(UP, 2), act(UP, 1), "a"),
        (act(UP, 2), act(UP, 2), "a"),
    ],
)
def test_preempt(a: ScalingAction, b: ScalingAction, winner: str) -> None:
    assert preempt(a, b) is (a if winner == "a" else b)


def test_preempt_with_a_missing_side() -> None:
    a = act(UP, 3)
    assert preempt(None, a) is a and preempt(a, None) is a and preempt(None, None) is None


ACTION_NONE, ACTION_UP, ACTION_DOWN = act(NONE, 0), act(UP, 5), act(DOWN, 1)


@pytest.mark.parametrize(
    ("votes", "winner"),
    [
        # all_none_in_group: the first None of the group
        ([("A", "g1", ACTION_NONE), ("B", "g1", ACTION_NONE)], "A"),
        ([("A", "g1", ACTION_NONE), ("B", "g1", ACTION_UP)], "B"),
        # inside a group a None vote is ignored: down beats none
        ([("A", "g1", ACTION_NONE), ("B", "g1", ACTION_DOWN)], "B"),
        ([("A", "g1", ACTION_DOWN), ("B", "g1", ACTION_UP)], "B"),
        (
            [("A", "g1", ACTION_NONE), ("B", "g2", ACTION_UP), ("C", "g2", ACTION_DOWN)],
            "B",
        ),
        ([], None),
        # outside any group None votes count: a scale-in needs every check to agree
        ([("A", "", ACTION_NONE), ("B", "", ACTION_DOWN)], "A"),
        # a group that only scales in still loses to an ungrouped None
        ([("A", "", ACTION_NONE), ("B", "g1", ACTION_NONE), ("C", "g1", ACTION_DOWN)], "A"),
    ],
)
def test_pick_winner_from_groups(votes: list[tuple[str, str, ScalingAction]], winner: str) -> None:
    picked = pick_winner([Vote(*v) for v in votes])
    assert (picked.check if picked else None) == winner
