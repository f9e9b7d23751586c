"""drover's damping beyond the Nomad Autoscaler, applied to a policy's winning action.

All three are off unless a policy's `behavior` block asks (contracts/autoscaling/
behavior_config.py), so a Nomad policy is evaluated exactly as by the Nomad Autoscaler.
They run in this order, after the checks are combined and capped:

1. Starting capacity (`count_starting`). Strategies see the target's count as Nomad's
   target plugin reports it (running allocations). A winning scale-up to n is held when
   n <= running + starting: the allocations already starting will provide it, and asking
   again would stack a second scale-up on a slow start (overshoot). Other actions pass.
2. Stabilization (the HPA's algorithm). Every evaluation records its recommendation (the
   winner's count, or the current count when the winner keeps it). The count used is the
   current count pulled up to the lowest recommendation of the scale-up window and down to
   the highest of the scale-down window, so a dip must last the whole down window before
   capacity is removed. The result always lies between the current and recommended count.
3. Rate rules (the HPA's behavior policies). For a rule over `period`, the count at the
   period's start is the current count minus what was added and plus what was removed in
   the period; `pods` allows start + value (start - value down), `percent` allows
   ceil(start * (1 + value/100)) up and floor(start * (1 - value/100)) down. `select_policy`
   "max" takes the rule allowing the largest change, "min" the smallest, "disabled" allows
   none. A limit never reverses the direction. Only this autoscaler's own scaling calls
   count as changes, and they are kept in memory: a restarted autoscaler starts afresh.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

from actors.autoscaler.core.strategies.common import direction_of
from contracts.autoscaling import Behavior, Direction, DirectionBehavior, ScalingAction

MAX_REMEMBERED = 10_000  # recommendations or scale events kept, whatever the windows say


@dataclass(frozen=True, slots=True)
class Recommendation:
    time_s: float
    count: int


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    time_s: float
    change: int  # allocations added (positive) or removed (negative)


def hold_if_starting(
    action: ScalingAction, running: int, starting: int
) -> tuple[ScalingAction, str]:
    if action.direction is not Direction.UP or starting <= 0:
        return action, ""
    if action.count > running + starting:
        return action, ""
    note = (
        f"scale-up to {action.count} held: {running} running and {starting} starting "
        "allocations already provide it"
    )
    return replace(action, count=running, direction=Direction.NONE, reason=note), note


def stabilize(
    current: int,
    desired: int,
    history: deque[Recommendation] | list[Recommendation],
    now: float,
    behavior: Behavior,
) -> int:
    up_cutoff = now - behavior.scale_up.stabilization_window_s
    down_cutoff = now - behavior.scale_down.stabilization_window_s
    lowest, highest = desired, desired
    for rec in history:
        if rec.time_s > up_cutoff:
            lowest = min(lowest, rec.count)
        if rec.time_s > down_cutoff:
            highest = max(highest, rec.count)
    return min(max(current, lowest), highest)


def _changes(events: deque[ScaleEvent], now: float, period_s: float) -> tuple[int, int]:
    added = removed = 0
    for event in events:
        if event.time_s > now - period_s:
            if event.change > 0:
                added += event.change
            else:
                removed -= event.change
    return added, removed


def _limit(
    current: int, events: deque[ScaleEvent], now: float, rules: DirectionBehavior, up: bool
) -> int | None:
    """The furthest count the rules allow in one direction; None when there is no rule."""
    if rules.select_policy == "disabled":
        return current
    if not rules.rates:
        return None
    proposals = []
    for rule in rules.rates:
        added, removed = _changes(events, now, rule.period_s)
        start = current - added + removed
        if rule.kind == "pods":
            proposals.append(start + rule.value if up else start - rule.value)
        elif up:
            proposals.append(math.ceil(start * (1 + rule.value / 100)))
        else:
            proposals.append(math.floor(start * (1 - rule.value / 100)))
    widest = max if (rules.select_policy == "max") == up else min
    limit = widest(proposals)
    return max(limit, current) if up else min(limit, current)


def rate_limit(
    current: int, desired: int, events: deque[ScaleEvent], now: float, behavior: Behavior
) -> int:
    if desired > current:
        limit = _limit(current, events, now, behavior.scale_up, up=True)
        return desired if limit is None else min(desired, limit)
    if desired < current:
        limit = _limit(current, events, now, behavior.scale_down, up=False)
        return desired if limit is None else max(desired, limit)
    return desired


class BehaviorState:
    """The memory the damping needs: recent recommendations and this autoscaler's scalings."""

    def __init__(self) -> None:
        self.recommendations: deque[Recommendation] = deque(maxlen=MAX_REMEMBERED)
        self.events: deque[ScaleEvent] = deque(maxlen=MAX_REMEMBERED)

    def record_scaling(self, now: float, previous: int, new: int) -> None:
        if new != previous:
            self.events.append(ScaleEvent(now, new - previous))

    def adjust(
        self,
        behavior: Behavior,
        action: ScalingAction,
        running: int,
        starting: int,
        now: float,
    ) -> tuple[ScalingAction, tuple[str, ...]]:
        """The action after the three steps, and a note for each step that changed it."""
        notes: list[str] = []
        if behavior.count_starting:
            action, note = hold_if_starting(action, running, starting)
            if note:
                notes.append(note)
        desired = action.count if action.direction is not Direction.NONE else running
        self._forget(now, behavior)
        count = stabilize(running, desired, self.recommendations, now, behavior)
        self.recommendations.append(Recommendation(now, desired))
        if count != desired:
            notes.append(f"stabilized from {desired} to {count}")
        limited = rate_limit(running, count, self.events, now, behavior)
        if limited != count:
            notes.append(f"rate limited from {count} to {limited}")
        if limited == desired:
            return action, tuple(notes)
        direction = direction_of(running, limited)
        reason = f"{action.reason}; {notes[-1]}" if action.reason else notes[-1]
        return replace(action, count=limited, direction=direction, reason=reason), tuple(notes)

    def _forget(self, now: float, behavior: Behavior) -> None:
        window = max(
            behavior.scale_up.stabilization_window_s, behavior.scale_down.stabilization_window_s
        )
        while self.recommendations and self.recommendations[0].time_s <= now - window:
            self.recommendations.popleft()
        periods = [r.period_s for d in (behavior.scale_up, behavior.scale_down) for r in d.rates]
        horizon = max(periods, default=0.0)
        while self.events and self.events[0].time_s <= now - horizon:
            self.events.popleft()
