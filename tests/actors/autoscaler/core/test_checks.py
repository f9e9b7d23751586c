"""Running a policy's checks: query ranges, the shared query cache, and the error policy
(the cases of nomad-autoscaler's policy/check_test.go)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from actors.autoscaler.core.checks import NO_METRICS, evaluate_checks, query_for
from actors.autoscaler.core.combine import pick_winner
from contracts.autoscaling import (
    META_COUNT_CAPPED,
    META_POLICY_ID,
    Check,
    Direction,
    FixedValueConfig,
    MetricPoint,
    MetricQuery,
    MetricReadError,
    OnError,
    Policy,
    StrategyConfig,
    StrategySpec,
    TargetSpec,
    TargetValueConfig,
)

NOW = 1_000_000.0
TARGET_10 = TargetValueConfig(target=10)


class Reader:
    """Answers by query text; records every query it was asked."""

    def __init__(self, answers: dict[str, Sequence[MetricPoint] | Exception]) -> None:
        self.answers = answers
        self.calls: list[MetricQuery] = []

    def __call__(self, query: MetricQuery) -> Sequence[MetricPoint]:
        self.calls.append(query)
        answer = self.answers[query.query]
        if isinstance(answer, Exception):
            raise answer
        return answer


def check(
    name: str,
    query: str = "q",
    config: StrategyConfig = TARGET_10,
    on_error: OnError | None = None,
    group: str = "",
) -> Check:
    strategy = "fixed-value" if isinstance(config, FixedValueConfig) else "target-value"
    spec = StrategySpec(strategy, config)
    return Check(name, spec, query=query, on_error=on_error, group=group)


def policy(*checks: Check, on_check_error: OnError = OnError.IGNORE) -> Policy:
    return Policy(
        min=1,
        max=10,
        checks=checks,
        target=TargetSpec(kind="job-group"),
        on_check_error=on_check_error,
    )


def test_query_range_is_the_window_before_the_offset() -> None:
    base = Check("c", StrategySpec("target-value", TARGET_10), source="prometheus", query="up")
    assert query_for(base, NOW) == MetricQuery("prometheus", "up", NOW - 60, NOW)
    shifted = Check(
        "c",
        base.strategy,
        query="up",
        query_window_s=600,
        query_window_offset_s=120,
    )
    assert query_for(shifted, NOW) == MetricQuery("drover", "up", NOW - 720, NOW - 120)
    instant = Check("c", base.strategy, query="up", query_instant=True, query_window_offset_s=5)
    assert query_for(instant, NOW) == MetricQuery("drover", "up", NOW - 5, NOW - 5, True)


def test_identical_queries_are_read_once_per_evaluation() -> None:
    reader = Reader({"q": [(NOW - 10, 20.0), (NOW, 20.0)], "other": [(NOW, 5.0)]})
    results = evaluate_checks(
        policy(check("a"), check("b"), check("c", "other")), 2, NOW, reader, policy_id="p"
    )
    assert [q.query for q in reader.calls] == ["q", "other"]
    assert [o.action.count for o in results.outcomes if o.action] == [4, 4, 1]
    # the next evaluation asks again
    evaluate_checks(policy(check("a")), 2, NOW + 10, reader, policy_id="p")
    assert len(reader.calls) == 3


def test_a_failed_query_is_cached_too() -> None:
    reader = Reader({"q": MetricReadError("connection refused")})
    results = evaluate_checks(policy(check("a"), check("b")), 2, NOW, reader, policy_id="p")
    assert len(reader.calls) == 1
    assert [o.error for o in results.outcomes] == ["failed to query source: connection refused"] * 2


def test_points_are_sorted_by_time_before_the_strategy_sees_them() -> None:
    reader = Reader({"q": [(NOW, 40.0), (NOW - 30, 10.0)]})
    outcome = evaluate_checks(policy(check("a")), 2, NOW, reader, policy_id="p").outcomes[0]
    assert (outcome.points_read, outcome.latest_value) == (2, 40.0)
    assert outcome.action is not None and outcome.action.count == 8


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ([], NO_METRICS),
        (MetricReadError("bad query"), "failed to query source: bad query"),
        (RuntimeError("boom"), "failed to query source: RuntimeError: boom"),
        ([(NOW, float("inf"))], "failed to execute strategy: metric value inf is not a finite"),
    ],
)
def test_a_failing_check_names_its_error(answer: object, error: str) -> None:
    reader = Reader({"q": answer})  # type: ignore[dict-item]
    outcome = evaluate_checks(policy(check("a")), 2, NOW, reader, policy_id="p").outcomes[0]
    assert outcome.error.startswith(error)


def test_malformed_points_are_an_error_not_a_crash() -> None:
    reader = Reader({"q": [("yesterday",)]})  # type: ignore[list-item]
    outcome = evaluate_checks(policy(check("a")), 2, NOW, reader, policy_id="p").outcomes[0]
    assert "not (time, value) pairs" in outcome.error


@pytest.mark.parametrize(
    ("check_on_error", "policy_on_error", "aborts"),
    [
        (OnError.IGNORE, OnError.IGNORE, False),
        (None, OnError.IGNORE, False),
        (OnError.FAIL, OnError.IGNORE, True),
        (None, OnError.FAIL, True),
        # the check's own setting wins over the policy's
        (OnError.IGNORE, OnError.FAIL, False),
        (OnError.FAIL, OnError.FAIL, True),
    ],
)
def test_error_policy(
    check_on_error: OnError | None, policy_on_error: OnError, aborts: bool
) -> None:
    reader = Reader({"bad": MetricReadError("down"), "good": [(NOW, 30.0)]})
    checks = (check("broken", "bad", on_error=check_on_error), check("fine", "good"))
    results = evaluate_checks(
        policy(*checks, on_check_error=policy_on_error), 2, NOW, reader, policy_id="p"
    )
    if aborts:
        assert results.failure == 'check "broken": failed to query source: down'
        assert [o.name for o in results.outcomes] == ["broken"]  # nothing after it runs
        assert results.votes == ()
    else:
        assert results.failure == ""
        broken = results.outcomes[0]
        assert broken.ignored and broken.action is not None
        assert broken.action.direction is Direction.NONE and broken.action.count == 2
        assert [v.check for v in results.votes] == ["broken", "fine"]


def test_an_ignored_check_holds_back_a_scale_in_but_not_a_scale_out() -> None:
    reader = Reader({"bad": MetricReadError("down"), "low": [(NOW, 1.0)], "high": [(NOW, 50.0)]})
    scale_in = evaluate_checks(
        policy(check("broken", "bad"), check("low", "low")), 4, NOW, reader, policy_id="p"
    )
    assert (winner := pick_winner(scale_in.votes)) and winner.check == "broken"
    scale_out = evaluate_checks(
        policy(check("broken", "bad"), check("high", "high")), 4, NOW, reader, policy_id="p"
    )
    assert (winner := pick_winner(scale_out.votes)) and winner.check == "high"


def test_fixed_value_runs_no_query() -> None:
    reader = Reader({})
    results = evaluate_checks(
        policy(check("fixed", "", FixedValueConfig(7))), 5, NOW, reader, policy_id="p"
    )
    assert reader.calls == []
    outcome = results.outcomes[0]
    assert outcome.query is None and outcome.action is not None
    assert (outcome.action.count, outcome.action.direction) == (7, Direction.UP)


def test_actions_carry_the_policy_id_and_are_capped() -> None:
    reader = Reader({"q": [(NOW, 1000.0)]})
    outcome = evaluate_checks(policy(check("a")), 2, NOW, reader, policy_id="p-1").outcomes[0]
    assert outcome.action is not None
    assert outcome.action.count == 10
    assert outcome.action.meta[META_POLICY_ID] == "p-1"
    assert outcome.action.meta[META_COUNT_CAPPED] is True
