"""Combining the checks of a policy: capping, "safest wins", groups, dry-run.

Nomad Autoscaler's rules (sdk/strategy.go, policy/handler.go):
- every check's action is capped to [min, max] before the checks are compared; a capped
  action records the original count and pushes its previous reason into the meta;
- between two actions the safer wins: Up beats None beats Down, and for the same direction
  the higher count wins (it keeps the most capacity); on a tie the first one stays;
- checks sharing a `group` have correlated metrics (tiers of one threshold), so inside a
  group a None vote is ignored unless every member says None; the group winners (and the
  checks without a group, which all vote normally) are then compared as above;
- dry-run sends the count as the -1 sentinel with the wanted count in the meta.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from contracts.autoscaling import (
    DRY_RUN_COUNT,
    META_COUNT_CAPPED,
    META_COUNT_ORIGINAL,
    META_DRY_RUN,
    META_DRY_RUN_COUNT,
    META_REASON_HISTORY,
    Direction,
    ScalingAction,
)


def cap_count(action: ScalingAction, low: int, high: int) -> ScalingAction:
    if action.count == DRY_RUN_COUNT:
        return action
    capped = min(max(action.count, low), high)
    if capped == action.count:
        return action
    history = list(action.meta.get(META_REASON_HISTORY, []))
    if action.reason:
        history.append(action.reason)
    meta = {
        **action.meta,
        META_COUNT_CAPPED: True,
        META_COUNT_ORIGINAL: action.count,
        META_REASON_HISTORY: history,
    }
    reason = f"capped count from {action.count} to {capped} to stay within limits"
    return replace(action, count=capped, reason=reason, meta=meta)


def set_dry_run(action: ScalingAction) -> ScalingAction:
    meta = {**action.meta, META_DRY_RUN: True, META_DRY_RUN_COUNT: action.count}
    return replace(action, count=DRY_RUN_COUNT, direction=Direction.NONE, meta=meta)


def preempt(a: ScalingAction | None, b: ScalingAction | None) -> ScalingAction | None:
    """The action that takes precedence (Nomad's PreemptScalingAction)."""
    if a is None:
        return b
    if b is None:
        return a
    if b.direction > a.direction:
        return b
    if a.direction == b.direction and a.direction is not Direction.NONE and b.count > a.count:
        return b
    return a


@dataclass(frozen=True, slots=True)
class Vote:
    """One check's (capped) action in a policy evaluation."""

    check: str
    group: str
    action: ScalingAction


def _preempt_vote(a: Vote | None, b: Vote | None) -> Vote | None:
    if a is None or b is None:
        return a if b is None else b
    return b if preempt(a.action, b.action) is b.action else a


def pick_winner(votes: Sequence[Vote]) -> Vote | None:
    """The winning vote over all groups (Nomad's pickWinnerActionFromGroups); groups are
    visited in the order their first check appears."""
    groups: dict[str, list[Vote]] = {}
    for vote in votes:
        groups.setdefault(vote.group, []).append(vote)
    winner: Vote | None = None
    for group, members in groups.items():
        group_winner: Vote | None = None
        nones = 0
        for vote in members:
            if group and vote.action.direction is Direction.NONE:
                nones += 1
                continue
            group_winner = _preempt_vote(group_winner, vote)
        if nones and nones == len(members):
            group_winner = members[0]
        winner = _preempt_vote(winner, group_winner)
    return winner
