"""The last decisions of each policy (what `scaling policy explain` shows), bounded.

A policy evaluated every second fills its log with decisions that changed nothing (a
cooldown, no action) within a minute, so the decisions that made a Scale call are also
kept apart (the last `keep_scales`): `last` merges both, newest first, and a scale-up from
ten minutes ago still shows under a screenful of cooldown decisions.

Each record is a policy evaluation (`Decision`) and, when it sent a Scale call, how that
call ended: pending until the leader answers, then "ok" (with the evaluation it created) or
"failed" (with the leader's reason). `to_json` gives the API's body, in the PascalCase the
rest of the API uses.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from contracts.autoscaling import CheckOutcome, Decision, MetricQuery, ScalingAction

DEFAULT_KEEP = 50
DEFAULT_KEEP_SCALES = 10


@dataclass(slots=True)
class ScaleCall:
    status: str = "pending"  # pending | ok | failed
    error: str = ""
    eval_id: str = ""
    index: int = 0


@dataclass(slots=True)
class DecisionRecord:
    decision: Decision
    scale: ScaleCall | None = None


class DecisionLog:
    def __init__(self, keep: int = DEFAULT_KEEP, keep_scales: int = DEFAULT_KEEP_SCALES) -> None:
        self.keep = keep
        self.keep_scales = keep_scales
        self._logs: dict[str, deque[DecisionRecord]] = {}
        self._scales: dict[str, deque[DecisionRecord]] = {}
        self._pending: dict[str, DecisionRecord] = {}  # decision id -> its record

    def add(self, decision: Decision) -> DecisionRecord:
        log = self._logs.get(decision.policy_id)
        if log is None:
            log = self._logs[decision.policy_id] = deque(maxlen=self.keep)
        record = DecisionRecord(decision, ScaleCall() if decision.scale_due else None)
        log.append(record)
        if record.scale is not None:
            scales = self._scales.get(decision.policy_id)
            if scales is None:
                scales = self._scales[decision.policy_id] = deque(maxlen=self.keep_scales)
            if len(scales) == scales.maxlen:
                self._pending.pop(scales[0].decision.decision_id, None)
            scales.append(record)
            self._pending[decision.decision_id] = record
        return record

    def settle(
        self, decision_id: str, ok: bool, *, error: str = "", eval_id: str = "", index: int = 0
    ) -> bool:
        """Record how a Scale call ended; False for a decision no longer kept."""
        record = self._pending.pop(decision_id, None)
        if record is None or record.scale is None:
            return False
        record.scale = ScaleCall("ok" if ok else "failed", error, eval_id, index)
        return True

    def last(self, policy_id: str, limit: int = DEFAULT_KEEP) -> list[DecisionRecord]:
        """Newest first: the last decisions, and the last Scale calls before them."""
        log = self._logs.get(policy_id)
        if not log or limit <= 0:
            return []
        records = {id(r): r for r in (*self._scales.get(policy_id, ()), *log)}
        ordered = sorted(records.values(), key=lambda r: r.decision.time_s, reverse=True)
        return ordered[:limit]

    def forget(self, policy_id: str) -> None:
        self._logs.pop(policy_id, None)
        for record in self._scales.pop(policy_id, ()):
            self._pending.pop(record.decision.decision_id, None)


# -- JSON ------------------------------------------------------------------------------------------


def to_json(record: DecisionRecord) -> dict[str, Any]:
    d = record.decision
    out: dict[str, Any] = {
        "ID": d.decision_id,
        "PolicyID": d.policy_id,
        "Time": d.time_s,
        "Outcome": d.outcome.value,
        "Reason": d.reason,
        "CurrentCount": d.current_count,
        "Starting": d.starting,
        "Checks": [_check(c) for c in d.checks],
        "Winner": d.winner,
        "Proposed": _action(d.proposed),
        "Adjustments": list(d.adjustments),
        "Action": _action(d.action),
        "Capped": d.capped,
        "State": d.state,
        "CooldownUntil": d.cooldown_until_s,
        "ScaleDue": d.scale_due,
        "Scale": None,
    }
    if record.scale is not None:
        s = record.scale
        out["Scale"] = {"Status": s.status, "Error": s.error, "EvalID": s.eval_id, "Index": s.index}
    return out


def _action(action: ScalingAction | None) -> dict[str, Any] | None:
    if action is None:
        return None
    return {
        "Count": action.count,
        "Direction": str(action.direction),
        "Reason": action.reason,
        "Error": action.error,
        "Meta": dict(action.meta),
    }


def _query(query: MetricQuery | None) -> dict[str, Any] | None:
    if query is None:
        return None
    return {
        "Source": query.source,
        "Query": query.query,
        "Start": query.start_s,
        "End": query.end_s,
        "Instant": query.instant,
    }


def _check(c: CheckOutcome) -> dict[str, Any]:
    return {
        "Name": c.name,
        "Group": c.group,
        "Strategy": c.strategy,
        "Query": _query(c.query),
        "PointsRead": c.points_read,
        "Value": c.latest_value,
        "Action": _action(c.action),
        "Error": c.error,
        "Ignored": c.ignored,
    }
