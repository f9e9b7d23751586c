"""Running a policy's checks once: query each source, run each strategy, cap each action.

As the Nomad Autoscaler does (policy/check.go):
- a check reads [now - offset - window, now - offset], or the single instant now - offset;
- identical queries (same source, query and range) are read once per evaluation, errors
  included; points are sorted by time; zero points is the error "no metrics available";
- fixed-value runs no query;
- a failing check (source error, no points, strategy error) follows its `on_error`; when
  unset, the policy's `on_check_error = "fail"` aborts the whole evaluation, and anything
  else skips the check. A skipped check casts a None vote, as Nomad's empty action does:
  it can hold back a scale-down of checks outside any group, never cause a scaling;
- every action carries the policy id in its meta and is capped to [min, max].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from actors.autoscaler.core.combine import Vote, cap_count
from actors.autoscaler.core.strategies import StrategyError, needs_metrics, run_strategy
from contracts.autoscaling import (
    META_POLICY_ID,
    Check,
    CheckOutcome,
    MetricPoint,
    MetricQuery,
    MetricReadError,
    OnError,
    Policy,
    ScalingAction,
)

MetricReader = Callable[[MetricQuery], Sequence[MetricPoint]]
NO_METRICS = "no metrics available"


@dataclass(frozen=True, slots=True)
class CheckResults:
    outcomes: tuple[CheckOutcome, ...]
    votes: tuple[Vote, ...]
    failure: str = ""  # set when a failing check aborted the evaluation


def query_for(check: Check, now: float) -> MetricQuery:
    end = now - check.query_window_offset_s
    start = end if check.query_instant else end - check.query_window_s
    return MetricQuery(check.source, check.query, start, end, check.query_instant)


class QueryCache:
    """One evaluation's reads: each distinct query reaches its source once."""

    def __init__(self, reader: MetricReader) -> None:
        self._reader = reader
        self._answers: dict[MetricQuery, list[MetricPoint] | str] = {}

    def read(self, query: MetricQuery) -> list[MetricPoint] | str:
        """The points, sorted by time, or the error text."""
        if query not in self._answers:
            self._answers[query] = self._ask(query)
        return self._answers[query]

    def _ask(self, query: MetricQuery) -> list[MetricPoint] | str:
        try:
            raw = self._reader(query)
        except MetricReadError as exc:
            return f"failed to query source: {exc}"
        except Exception as exc:  # a source's own failure must not stop the autoscaler
            return f"failed to query source: {type(exc).__name__}: {exc}"
        try:
            points = sorted((float(t), float(v)) for t, v in raw)
        except (TypeError, ValueError):
            return "failed to query source: it returned points that are not (time, value) pairs"
        return points or NO_METRICS


def evaluate_checks(
    policy: Policy, count: int, now: float, reader: MetricReader, *, policy_id: str
) -> CheckResults:
    cache = QueryCache(reader)
    outcomes: list[CheckOutcome] = []
    votes: list[Vote] = []
    for check in policy.checks:
        outcome = _run_check(check, policy, count, now, cache, policy_id)
        outcomes.append(outcome)
        if outcome.action is None:
            return CheckResults(
                tuple(outcomes), tuple(votes), f'check "{check.name}": {outcome.error}'
            )
        votes.append(Vote(check.name, check.group, outcome.action))
    return CheckResults(tuple(outcomes), tuple(votes))


def fails_policy(check: Check, policy: Policy) -> bool:
    """Whether a failing check aborts the evaluation: the check's on_error first."""
    if check.on_error is not None:
        return check.on_error is OnError.FAIL
    return policy.on_check_error is OnError.FAIL


def _run_check(
    check: Check, policy: Policy, count: int, now: float, cache: QueryCache, policy_id: str
) -> CheckOutcome:
    query: MetricQuery | None = None
    points: list[MetricPoint] = []
    error = ""
    if needs_metrics(check.strategy):
        query = query_for(check, now)
        answer = cache.read(query)
        if isinstance(answer, str):
            error = answer
        else:
            points = answer
    action: ScalingAction | None = None
    if not error:
        try:
            action = run_strategy(check.strategy, count, points)
        except StrategyError as exc:
            error = f"failed to execute strategy: {exc}"
    ignored = bool(error) and not fails_policy(check, policy)
    if ignored:
        action = ScalingAction(count=count)
    if action is not None:
        action = replace(action, meta={META_POLICY_ID: policy_id, **action.meta})
        action = cap_count(action, policy.min, policy.max)
    return CheckOutcome(
        name=check.name,
        group=check.group,
        strategy=check.strategy.name,
        query=query,
        points_read=len(points),
        latest_value=points[-1][1] if points else None,
        action=action,
        error=error,
        ignored=ignored,
    )
