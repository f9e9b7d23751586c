"""One policy's evaluation loop as a pure state machine (Nomad's policy handler).

The shell calls `tick(now, status, reader)` every evaluation interval and gets a Decision.
When `decision.scale_due`, it sends `decision.action` to the target once, then reports the
answer with `scale_succeeded` or `scale_failed` and that decision's id.

States (policy/handler.go): Idle -> Scaling (a Scale call is due and unanswered) ->
Cooldown -> Idle. A failed Scale call, or one the target skipped as a no-op (Nomad's
"scaling blocked due to active deployment"), returns to Idle without cooldown. The
cooldown after a scaling is `cooldown_on_scale_up` after an Up action, else `cooldown`.
During Cooldown and Scaling the checks still run and the decision records what would be
done, but no Scale call is due; the first tick after the cooldown ends acts again.

Each tick: no target -> nothing; target not ready (a stopped job) -> nothing; otherwise
run the checks (checks.py), pick the winner (combine.py), apply drover's behavior
(behavior.py), and scale unless the direction is None or the count would not change.

A restarted autoscaler resumes the cooldown from the target's last scaling event:
remaining = cooldown_on_scale_up - (now - last_event), Nomad's calculateRemainingCooldown
with the shorter cooldown, since the direction of an event it did not make is unknown. A
newer event seen later (someone ran `job scale` by hand) extends the cooldown the same way.
"""

from __future__ import annotations

import random
from dataclasses import replace
from enum import StrEnum

from actors.autoscaler.core.behavior import BehaviorState
from actors.autoscaler.core.checks import MetricReader, evaluate_checks
from actors.autoscaler.core.combine import pick_winner, set_dry_run
from contracts.autoscaling import (
    Decision,
    Direction,
    Outcome,
    Policy,
    ScalingAction,
    TargetStatus,
)

# A Scale call unanswered for this long is given up (Nomad's limiter times out a policy
# waiting for its turn after 2 minutes); the target's scaling events still put the policy
# in cooldown should it have been applied after all.
SCALE_ANSWER_TIMEOUT_S = 120.0
# The leader's and this process's clocks (one machine, or NTP): an event of our own scaling
# is stamped between sending the call and reading its answer, give or take this.
CLOCK_SKEW_S = 1.0
MAX_SPLAY_S = 0.3


class HandlerState(StrEnum):
    IDLE = "idle"
    SCALING = "scaling"
    COOLDOWN = "cooldown"


def remaining_cooldown(cooldown_s: float, now: float, last_event_s: float) -> float:
    """Negative when the cooldown is over (Nomad's calculateRemainingCooldown)."""
    return cooldown_s - (now - last_event_s)


def interval_splay_s(rng: random.Random) -> float:
    """0 to 290 ms in 10 ms steps, to spread the first evaluations of policies loaded
    together (Nomad sleeps rand.Intn(30) steps before restarting a changed ticker)."""
    return rng.randrange(30) * (MAX_SPLAY_S / 30)


class PolicyHandler:
    def __init__(self, policy_id: str, policy: Policy) -> None:
        self.policy_id = policy_id
        self.policy = policy
        self.state = HandlerState.IDLE
        self.cooldown_until_s: float | None = None
        self._behavior = BehaviorState()
        self._last_event_seen_s: float | None = None
        self._sequence = 0
        self._pending: tuple[str, ScalingAction, int, float] | None = None  # id, action, from, at
        self._own_event_window: tuple[float, float] | None = None

    def update_policy(self, policy: Policy) -> bool:
        """Take a changed policy, keeping the state; True when the interval changed (the
        shell then restarts its ticker after `interval_splay_s`)."""
        changed = policy.evaluation_interval_s != self.policy.evaluation_interval_s
        self.policy = policy
        return changed

    def tick(self, now: float, status: TargetStatus | None, reader: MetricReader) -> Decision:
        self._sequence += 1
        decision = Decision(
            policy_id=self.policy_id,
            decision_id=f"{self.policy_id}:{round(now * 1000)}:{self._sequence}",
            time_s=now,
            outcome=Outcome.NO_ACTION,
            reason="",
        )
        self._expire(now)
        if not self.policy.enabled:
            return self._finish(decision, Outcome.DISABLED, "the policy is disabled")
        if status is None:
            return self._finish(decision, Outcome.TARGET_MISSING, "the target does not exist")
        decision = replace(decision, current_count=status.count, starting=status.starting)
        if not status.ready:
            return self._finish(decision, Outcome.TARGET_NOT_READY, "the target is not ready")
        self._resume_cooldown(now, status.last_event_s)
        return self._evaluate(decision, now, status, reader)

    def scale_succeeded(self, decision_id: str, now: float) -> bool:
        """The target accepted the decision's action: cool down. False for an unknown id
        (already answered, or given up), which changes nothing."""
        if self._pending is None or self._pending[0] != decision_id:
            return False
        _, action, previous, sent_at = self._pending
        self._pending = None
        # The scaling event this call wrote is ours: its cooldown is the one set here, not
        # one resumed from the event (which would take the scale-up cooldown after a
        # scale-down). Its time is the leader's, between sending and this answer.
        self._own_event_window = (sent_at - CLOCK_SKEW_S, now + CLOCK_SKEW_S)
        up = action.direction is Direction.UP
        cooldown = self.policy.cooldown_on_scale_up_s if up else self.policy.cooldown_s
        self.state = HandlerState.COOLDOWN
        self.cooldown_until_s = now + cooldown
        if not self.policy.dry_run:
            self._behavior.record_scaling(now, previous, action.count)
        return True

    def scale_failed(self, decision_id: str) -> bool:
        """The Scale call failed or the target skipped it: back to Idle, no cooldown."""
        if self._pending is None or self._pending[0] != decision_id:
            return False
        self._pending = None
        self.state = HandlerState.IDLE
        return True

    def _expire(self, now: float) -> None:
        if self._pending is not None and now - self._pending[3] > SCALE_ANSWER_TIMEOUT_S:
            self._pending = None
            self.state = HandlerState.IDLE
        if (
            self.state is HandlerState.COOLDOWN
            and self.cooldown_until_s is not None
            and now > self.cooldown_until_s
        ):
            self.state = HandlerState.IDLE

    def _resume_cooldown(self, now: float, last_event_s: float | None) -> None:
        if last_event_s is None:
            return
        if self._last_event_seen_s is not None and last_event_s <= self._last_event_seen_s:
            return
        self._last_event_seen_s = last_event_s
        window = self._own_event_window
        if window is not None and window[0] <= last_event_s <= window[1]:
            return  # the event of our own last scaling: its cooldown is already set
        remaining = remaining_cooldown(self.policy.cooldown_on_scale_up_s, now, last_event_s)
        if remaining <= 0 or self.state is HandlerState.SCALING:
            return
        until = now + remaining
        if self.cooldown_until_s is None or until > self.cooldown_until_s:
            self.cooldown_until_s = until
        self.state = HandlerState.COOLDOWN

    def _evaluate(
        self, decision: Decision, now: float, status: TargetStatus, reader: MetricReader
    ) -> Decision:
        policy = self.policy
        results = evaluate_checks(policy, status.count, now, reader, policy_id=self.policy_id)
        decision = replace(decision, checks=results.outcomes)
        if results.failure:
            return self._finish(decision, Outcome.FAILED, f"evaluation failed: {results.failure}")
        winner = pick_winner(results.votes)
        if winner is None:
            return self._finish(decision, Outcome.NO_ACTION, "no check proposed an action")
        action = winner.action
        notes: tuple[str, ...] = ()
        if policy.behavior.active:
            action, notes = self._behavior.adjust(
                policy.behavior, action, status.count, status.starting, now
            )
        decision = replace(
            decision, winner=winner.check, proposed=winner.action, adjustments=notes, action=action
        )
        if action.direction is Direction.NONE:
            why = action.reason or f'check "{winner.check}" keeps the count'
            return self._finish(decision, Outcome.NO_ACTION, why)
        if action.count == status.count:
            return self._finish(decision, Outcome.NO_ACTION, f"the count stays {status.count}")
        if self.state is HandlerState.COOLDOWN:
            why = f"{action.reason}; not scaling while the policy cools down"
            return self._finish(decision, Outcome.COOLDOWN, why)
        if self.state is HandlerState.SCALING:
            why = f"{action.reason}; an earlier scaling call is still unanswered"
            return self._finish(decision, Outcome.IN_FLIGHT, why)
        self._pending = (decision.decision_id, action, status.count, now)
        self.state = HandlerState.SCALING
        sent = set_dry_run(action) if policy.dry_run else action
        decision = replace(decision, action=sent, scale_due=True)
        return self._finish(decision, Outcome.SCALE, action.reason)

    def _finish(self, decision: Decision, outcome: Outcome, reason: str) -> Decision:
        cooling = self.state is HandlerState.COOLDOWN
        return replace(
            decision,
            outcome=outcome,
            reason=reason,
            state=self.state.value,
            cooldown_until_s=self.cooldown_until_s if cooling else None,
        )
