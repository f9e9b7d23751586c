"""Properties of combining and capping that hold for any input."""

from __future__ import annotations

import math
import random
from collections import deque

from hypothesis import given
from hypothesis import strategies as st

from actors.autoscaler.core.behavior import Recommendation, rate_limit, stabilize
from actors.autoscaler.core.combine import Vote, cap_count, pick_winner
from actors.autoscaler.core.strategies import StrategyError, run_strategy
from actors.autoscaler.core.strategies.common import direction_of
from contracts.autoscaling import (
    DRY_RUN_COUNT,
    META_COUNT_ORIGINAL,
    Behavior,
    Direction,
    DirectionBehavior,
    RateRule,
    ScalingAction,
    StrategySpec,
    TargetValueConfig,
    ThresholdConfig,
)

counts = st.integers(min_value=0, max_value=1000)
actions = st.builds(
    ScalingAction,
    count=counts,
    direction=st.sampled_from(list(Direction)),
)
votes = st.lists(
    st.builds(
        Vote,
        check=st.text(min_size=1, max_size=3),
        group=st.sampled_from(["", "a", "b"]),
        action=actions,
    ),
    max_size=8,
)


def outcome(vote: Vote | None) -> tuple[Direction, int] | None:
    """What a winner decides: the direction, and the count unless it is None."""
    if vote is None:
        return None
    direction = vote.action.direction
    return direction, vote.action.count if direction is not Direction.NONE else 0


@given(votes, st.randoms())
def test_the_winner_does_not_depend_on_the_order_of_the_checks(
    ballot: list[Vote], rng: random.Random
) -> None:
    shuffled = list(ballot)
    rng.shuffle(shuffled)
    assert outcome(pick_winner(ballot)) == outcome(pick_winner(shuffled))


@given(votes)
def test_an_up_vote_always_wins_over_the_others(ballot: list[Vote]) -> None:
    winner = pick_winner(ballot)
    ups = [v.action.count for v in ballot if v.action.direction is Direction.UP]
    if ups:
        assert winner is not None and winner.action.direction is Direction.UP
        assert winner.action.count == max(ups)


@given(st.integers(-5000, 5000), counts, counts)
def test_the_capped_count_is_within_min_and_max(count: int, a: int, b: int) -> None:
    low, high = min(a, b), max(a, b)
    action = ScalingAction(count=count, direction=Direction.UP, reason="r")
    capped = cap_count(action, low, high)
    if count == DRY_RUN_COUNT:  # the dry-run sentinel is no count: it is left alone
        assert capped == action
        return
    assert low <= capped.count <= high
    assert capped.capped == (capped.count != count)
    if capped.capped:
        assert capped.meta[META_COUNT_ORIGINAL] == count


@given(
    counts,
    st.floats(min_value=0, max_value=1e6),
    st.floats(min_value=0, max_value=1e4),
    st.floats(min_value=0, max_value=0.5),
)
def test_target_value_direction_matches_its_count(
    count: int, value: float, target: float, threshold: float
) -> None:
    spec = StrategySpec("target-value", TargetValueConfig(target, threshold))
    try:
        action = run_strategy(spec, count, [(0.0, value)])
    except StrategyError:  # only when the new count overflows a float
        assert not math.isfinite(max(count, 1) * value / target)
        return
    assert action.count >= 0
    assert action.direction is direction_of(count, action.count)


@given(counts, st.lists(st.floats(-100, 100), max_size=12), st.integers(-5, 5))
def test_threshold_never_proposes_a_negative_count(
    count: int, values: list[float], delta: int
) -> None:
    spec = StrategySpec("threshold", ThresholdConfig(lower_bound=-50, delta=delta))
    action = run_strategy(spec, count, list(enumerate(values)))
    assert action.count >= 0
    assert action.direction is direction_of(count, action.count)


@given(counts, counts, st.lists(st.tuples(st.floats(0, 600), counts), max_size=10))
def test_stabilization_stays_between_current_and_desired(
    current: int, desired: int, recorded: list[tuple[float, int]]
) -> None:
    behavior = Behavior(
        scale_up=DirectionBehavior(stabilization_window_s=120),
        scale_down=DirectionBehavior(stabilization_window_s=300),
    )
    history = [Recommendation(1000.0 - ago, c) for ago, c in recorded]
    result = stabilize(current, desired, history, 1000.0, behavior)
    assert min(current, desired) <= result <= max(current, desired)


@given(counts, counts, st.integers(1, 300), st.sampled_from(["pods", "percent"]))
def test_rate_limits_stay_between_current_and_desired(
    current: int, desired: int, value: int, kind: str
) -> None:
    rule = RateRule("pods" if kind == "pods" else "percent", value, 60.0)
    behavior = Behavior(
        scale_up=DirectionBehavior(rates=(rule,)), scale_down=DirectionBehavior(rates=(rule,))
    )
    result = rate_limit(current, desired, deque(), 0.0, behavior)
    assert min(current, desired) <= result <= max(current, desired)
