"""The plan hold: a failpoint for tests that makes concurrent plans collide on every run.

`LeaderService.hold_plans(count, timeout_s, job_ids)` holds the next `count` plan submissions
(of `job_ids` only, if given) without applying them; the leader then applies them together in
plan-queue order. Each of them was thus computed on state that lacks the others' commits,
exactly as when workers plan concurrently: this is how tests force plans to collide, or keep
a plan in flight while its worker is killed. Nothing else waits: requests and other plans
flow on, and a worker whose plan is held waits for its answer as it would for a slow leader.
The hold ends when `count` plans are held, at `release()`, or `timeout_s` after it began, so
it never stalls a worker for long. Held plans live in the leader's process only: a leader
that dies holding them loses them (their workers time out and nack, as for any lost answer).
Not for production use.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import redis

from actors.leader.core.plan_queue import PlanQueue
from actors.leader.durable_log import NotLeaderError
from actors.leader.service_records import LeaderStats
from contracts import Plan
from contracts.messages import PlanResponse, PlanSubmission

log = logging.getLogger(__name__)

HeldPlan = tuple[PlanSubmission, Mapping[str, str]]  # the submission and its trace context


@dataclass
class _Hold:
    count: int
    deadline: float  # time.monotonic()
    job_ids: frozenset[str]
    held: list[HeldPlan] = field(default_factory=list)
    released: bool = False

    def takes(self, plan: Plan) -> bool:
        full = self.released or len(self.held) >= self.count
        return not full and (not self.job_ids or plan.job_id in self.job_ids)

    def due(self, now: float) -> bool:
        return self.released or len(self.held) >= self.count or now >= self.deadline


class PlanHold:
    """Thread-safe: tests call `start`, `release` and `held` from other threads while the
    leader's loop calls `take` and `due`."""

    def __init__(self) -> None:
        self._hold: _Hold | None = None
        self._lock = threading.Lock()

    def armed(self) -> bool:
        """A hold is started and not yet applied (plans must reach it, not bypass it)."""
        with self._lock:
            return self._hold is not None

    def start(self, count: int, timeout_s: float, job_ids: Collection[str] = ()) -> None:
        if count < 1 or timeout_s <= 0:
            raise ValueError("hold_plans needs count >= 1 and timeout_s > 0")
        with self._lock:
            if self._hold is not None:
                raise RuntimeError("plans are already held")
            self._hold = _Hold(count, time.monotonic() + timeout_s, frozenset(job_ids))

    def release(self) -> int:
        """End the hold now (the loop applies the held plans on its next turn); returns how
        many plans were held."""
        with self._lock:
            if self._hold is None:
                return 0
            self._hold.released = True
            return len(self._hold.held)

    def held(self) -> list[PlanSubmission]:
        """The plans held right now, in the order they came."""
        with self._lock:
            return [submission for submission, _ in self._hold.held] if self._hold else []

    def take(self, submission: PlanSubmission, trace: Mapping[str, str]) -> bool:
        """Hold `submission` if a hold wants it."""
        with self._lock:
            hold = self._hold
            if hold is None or not hold.takes(submission.plan):
                return False
            hold.held.append((submission, trace))
            return True

    def due(self) -> list[HeldPlan] | None:
        """The held plans in plan-queue order once the hold has ended (it is over then);
        None while it goes on, or when there is none."""
        with self._lock:
            hold = self._hold
            if hold is None or not hold.due(time.monotonic()):
                return None
            self._hold = None
        plans: PlanQueue[HeldPlan] = PlanQueue()
        for submission, trace in hold.held:
            plans.push(submission.plan, (submission, trace))
        ordered = []
        while (item := plans.pop()) is not None:
            ordered.append(item[1])
        return ordered


class PlanHoldMethods:
    """The leader service's side of the failpoint (a mixin of LeaderService): its loop
    holds plans in `_hold_plan` and applies them in `_apply_held_if_due`."""

    plan_hold: PlanHold
    stats: LeaderStats

    def _apply_plan(
        self, submission: PlanSubmission, trace: Mapping[str, str] | None = None
    ) -> PlanResponse:
        raise NotImplementedError

    def hold_plans(self, count: int, timeout_s: float, job_ids: Collection[str] = ()) -> None:
        """Hold the next `count` plans (of `job_ids`, if given), then apply them together in
        plan-queue order, so that they collide (see plan_hold.py). Not for production use."""
        self.plan_hold.start(count, timeout_s, job_ids)

    def release_plans(self) -> int:
        return self.plan_hold.release()

    def held_plans(self) -> list[PlanSubmission]:
        return self.plan_hold.held()

    def _hold_plan(self, submission: PlanSubmission, trace: Mapping[str, str]) -> bool:
        if not self.plan_hold.take(submission, trace):
            return False
        self.stats.held_plans += 1
        return True

    def _apply_held_if_due(self) -> int:
        held = self.plan_hold.due()
        if held is None:
            return 0
        for submission, trace in held:
            try:
                self._apply_plan(submission, trace)
            except (NotLeaderError, redis.ConnectionError):
                raise
            except Exception:  # as if its answer were lost: the worker times out and nacks
                log.exception("held plan of eval %s failed", submission.plan.eval_id)
        return len(held)
