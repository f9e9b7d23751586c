"""The plan-conflict report: which plans collided at the leader, where, why, and the cost.

Pure: built from span records (`load_spans` of a telemetry directory, or
`SpanRecord.from_spans` of in-memory spans). What it reads:

- every `plan.node_rejected` event (on any span, normally `plan.apply`) is one conflict: the
  node, reason and dimension, the rejected plan (eval, job, plan id, attempt: from the event,
  else from the span carrying it) and the plan that took the capacity (`drover.conflict.*`);
- cost, once per rejected plan:
  * retries: 1 if the eval submitted another plan afterwards (a `plan.submit` or `plan.apply`
    span with the same `drover.eval.id`, another `drover.plan.id`, starting later), else 0, so
    a group's retries are the extra plan attempts its conflicts caused;
  * delay: from the plan's submission (start of its `plan.submit` span, else of the span
    carrying the event) to the eval's completion (end of its last `eval.schedule` span, else
    of the last span carrying its `drover.eval.id`).

Groups: by node, by pair of jobs (the rejected plan's job, the job that took the capacity)
and by reason; each row counts conflicts (rejected nodes), distinct rejected plans, their
retries and delay (total and max over distinct plans).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from observability import conventions as c
from observability.conventions import ResourceAmounts
from observability.records import EventRecord, SpanRecord
from observability.text import format_duration, table

UNKNOWN = "?"


@dataclass(frozen=True, slots=True)
class Conflict:
    """One node the leader rejected from one plan."""

    time_ns: int
    trace_id: str
    span_id: str
    node_id: str
    reason: str
    dimension: str
    eval_id: str
    job_id: str
    plan_id: str
    attempt: int | None
    asked: ResourceAmounts
    free: ResourceAmounts
    taken_by_eval_id: str | None
    taken_by_job_id: str | None
    taken_by_plan_id: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "time_ns": self.time_ns,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "node_id": self.node_id,
            "reason": self.reason,
            "dimension": self.dimension,
            "eval_id": self.eval_id,
            "job_id": self.job_id,
            "plan_id": self.plan_id,
            "attempt": self.attempt,
            "asked": _amounts_json(self.asked),
            "free": _amounts_json(self.free),
            "taken_by": {
                "eval_id": self.taken_by_eval_id,
                "job_id": self.taken_by_job_id,
                "plan_id": self.taken_by_plan_id,
            },
        }


@dataclass(frozen=True, slots=True)
class PlanCost:
    """What one rejected plan cost its eval."""

    plan_id: str
    eval_id: str
    job_id: str
    submitted_ns: int
    retries: int
    delay_ns: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "eval_id": self.eval_id,
            "job_id": self.job_id,
            "submitted_ns": self.submitted_ns,
            "retries": self.retries,
            "delay_ns": self.delay_ns,
        }


@dataclass(frozen=True, slots=True)
class GroupRow:
    key: tuple[str, ...]
    conflicts: int
    plans: int
    retries: int
    delay_total_ns: int
    delay_max_ns: int

    def to_json(self, key_names: Sequence[str]) -> dict[str, Any]:
        row: dict[str, Any] = dict(zip(key_names, self.key, strict=True))
        row.update(
            conflicts=self.conflicts,
            plans=self.plans,
            retries=self.retries,
            delay_total_ns=self.delay_total_ns,
            delay_max_ns=self.delay_max_ns,
        )
        return row


BY_NODE_KEYS = ("node_id",)
BY_JOB_PAIR_KEYS = ("job_id", "taken_by_job_id")
BY_REASON_KEYS = ("dimension", "reason")


@dataclass(frozen=True, slots=True)
class ConflictReport:
    since_ns: int | None
    conflicts: tuple[Conflict, ...]
    """Ordered by time."""
    plans: tuple[PlanCost, ...]
    """The distinct rejected plans, by submission."""
    by_node: tuple[GroupRow, ...]
    by_job_pair: tuple[GroupRow, ...]
    by_reason: tuple[GroupRow, ...]

    @property
    def retries(self) -> int:
        return sum(p.retries for p in self.plans)

    @property
    def delay_total_ns(self) -> int:
        return sum(p.delay_ns or 0 for p in self.plans)

    @property
    def evals(self) -> int:
        return len({p.eval_id for p in self.plans})

    def to_json(self) -> dict[str, Any]:
        return {
            "since_ns": self.since_ns,
            "totals": {
                "conflicts": len(self.conflicts),
                "plans": len(self.plans),
                "evals": self.evals,
                "retries": self.retries,
                "delay_total_ns": self.delay_total_ns,
            },
            "by_node": [row.to_json(BY_NODE_KEYS) for row in self.by_node],
            "by_job_pair": [row.to_json(BY_JOB_PAIR_KEYS) for row in self.by_job_pair],
            "by_reason": [row.to_json(BY_REASON_KEYS) for row in self.by_reason],
            "plans": [p.to_json() for p in self.plans],
            "conflicts": [x.to_json() for x in self.conflicts],
        }


def _amounts_json(amounts: ResourceAmounts) -> dict[str, int]:
    return {
        "cpu": amounts.cpu,
        "memory_mb": amounts.memory_mb,
        "disk_mb": amounts.disk_mb,
        "gpus": amounts.gpus,
    }


def _str(event: EventRecord, span: SpanRecord, key: str) -> str | None:
    value = event.attributes.get(key)
    if isinstance(value, str) and value:
        return value
    return span.str_attr(key) or None


def _int(event: EventRecord, span: SpanRecord, key: str) -> int | None:
    value = event.attributes.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return span.int_attr(key)


def conflicts_in(spans: Iterable[SpanRecord]) -> list[Conflict]:
    """Every `plan.node_rejected` event as a Conflict, ordered by time."""
    found: list[Conflict] = []
    for span in spans:
        for event in span.events:
            if event.name != c.EVENT_NODE_REJECTED:
                continue
            eval_id = _str(event, span, c.EVAL_ID) or UNKNOWN
            attempt = _int(event, span, c.PLAN_ATTEMPT)
            plan_id = _str(event, span, c.PLAN_ID) or (
                c.plan_id(eval_id, attempt) if attempt is not None else f"{eval_id}@{span.span_id}"
            )
            reason = _str(event, span, c.REJECT_REASON) or UNKNOWN
            found.append(
                Conflict(
                    time_ns=event.time_ns,
                    trace_id=span.trace_id,
                    span_id=span.span_id,
                    node_id=_str(event, span, c.NODE_ID) or UNKNOWN,
                    reason=reason,
                    dimension=_str(event, span, c.REJECT_DIMENSION) or c.reject_dimension(reason),
                    eval_id=eval_id,
                    job_id=_str(event, span, c.JOB_ID) or UNKNOWN,
                    plan_id=plan_id,
                    attempt=attempt,
                    asked=ResourceAmounts.from_attributes(event.attributes, c.ASK_PREFIX),
                    free=ResourceAmounts.from_attributes(event.attributes, c.FREE_PREFIX),
                    taken_by_eval_id=_str(event, span, c.CONFLICT_EVAL_ID),
                    taken_by_job_id=_str(event, span, c.CONFLICT_JOB_ID),
                    taken_by_plan_id=_str(event, span, c.CONFLICT_PLAN_ID),
                )
            )
    found.sort(key=lambda x: (x.time_ns, x.plan_id, x.node_id))
    return found


class _EvalIndex:
    """Per-eval facts the costs need, from every span (not just the filtered conflicts)."""

    def __init__(self, spans: Sequence[SpanRecord]) -> None:
        self.submit_start: dict[str, int] = {}
        self.plan_starts: dict[str, list[tuple[int, str]]] = {}
        self.schedule_end: dict[str, int] = {}
        self.any_end: dict[str, int] = {}
        for span in spans:
            eval_id = span.str_attr(c.EVAL_ID)
            if eval_id is None:
                continue
            self.any_end[eval_id] = max(self.any_end.get(eval_id, 0), span.end_ns)
            if span.name == c.SPAN_EVAL_SCHEDULE:
                self.schedule_end[eval_id] = max(self.schedule_end.get(eval_id, 0), span.end_ns)
            plan = span.str_attr(c.PLAN_ID)
            if plan is not None and span.name in (c.SPAN_PLAN_SUBMIT, c.SPAN_PLAN_APPLY):
                self.plan_starts.setdefault(eval_id, []).append((span.start_ns, plan))
                if span.name == c.SPAN_PLAN_SUBMIT:
                    previous = self.submit_start.get(plan)
                    if previous is None or span.start_ns < previous:
                        self.submit_start[plan] = span.start_ns

    def completion(self, eval_id: str) -> int | None:
        return self.schedule_end.get(eval_id, self.any_end.get(eval_id))

    def retried(self, eval_id: str, plan_id: str, submitted_ns: int) -> bool:
        return any(
            start > submitted_ns and other != plan_id
            for start, other in self.plan_starts.get(eval_id, ())
        )


def _plan_costs(
    conflicts: Sequence[Conflict], spans: Sequence[SpanRecord], index: _EvalIndex
) -> dict[str, PlanCost]:
    span_start = {span.span_id: span.start_ns for span in spans}
    costs: dict[str, PlanCost] = {}
    for conflict in conflicts:
        if conflict.plan_id in costs:
            continue
        submitted = index.submit_start.get(
            conflict.plan_id, span_start.get(conflict.span_id, conflict.time_ns)
        )
        completion = index.completion(conflict.eval_id)
        delay = completion - submitted if completion is not None else None
        costs[conflict.plan_id] = PlanCost(
            plan_id=conflict.plan_id,
            eval_id=conflict.eval_id,
            job_id=conflict.job_id,
            submitted_ns=submitted,
            retries=int(index.retried(conflict.eval_id, conflict.plan_id, submitted)),
            delay_ns=delay if delay is not None and delay >= 0 else None,
        )
    return costs


def _group(
    conflicts: Sequence[Conflict],
    costs: dict[str, PlanCost],
    key: Callable[[Conflict], tuple[str, ...]],
) -> tuple[GroupRow, ...]:
    counts: dict[tuple[str, ...], int] = {}
    plans: dict[tuple[str, ...], dict[str, None]] = {}
    for conflict in conflicts:
        k = key(conflict)
        counts[k] = counts.get(k, 0) + 1
        plans.setdefault(k, {})[conflict.plan_id] = None
    rows = []
    for k, count in counts.items():
        group_costs = [costs[p] for p in plans[k]]
        delays = [cost.delay_ns for cost in group_costs if cost.delay_ns is not None]
        rows.append(
            GroupRow(
                key=k,
                conflicts=count,
                plans=len(group_costs),
                retries=sum(cost.retries for cost in group_costs),
                delay_total_ns=sum(delays),
                delay_max_ns=max(delays, default=0),
            )
        )
    rows.sort(key=lambda r: (-r.conflicts, -r.plans, r.key))
    return tuple(rows)


def conflict_report(spans: Iterable[SpanRecord], since_ns: int | None = None) -> ConflictReport:
    """Conflicts at or after `since_ns` (epoch ns; None: all), grouped, with their cost."""
    all_spans = list(spans)
    conflicts = [x for x in conflicts_in(all_spans) if since_ns is None or x.time_ns >= since_ns]
    costs = _plan_costs(conflicts, all_spans, _EvalIndex(all_spans))
    return ConflictReport(
        since_ns=since_ns,
        conflicts=tuple(conflicts),
        plans=tuple(sorted(costs.values(), key=lambda p: (p.submitted_ns, p.plan_id))),
        by_node=_group(conflicts, costs, lambda x: (x.node_id,)),
        by_job_pair=_group(conflicts, costs, lambda x: (x.job_id, x.taken_by_job_id or UNKNOWN)),
        by_reason=_group(conflicts, costs, lambda x: (x.dimension, x.reason)),
    )


# -- rendering ------------------------------------------------------------------------------

_COST_HEADERS = ("CONFLICTS", "PLANS", "RETRIES", "DELAY TOTAL", "DELAY MAX")


def _section(title: str, key_headers: Sequence[str], rows: Sequence[GroupRow]) -> str:
    body = [
        [
            *row.key,
            str(row.conflicts),
            str(row.plans),
            str(row.retries),
            format_duration(row.delay_total_ns),
            format_duration(row.delay_max_ns),
        ]
        for row in rows
    ]
    numeric = [False] * len(key_headers) + [True] * len(_COST_HEADERS)
    return f"{title}\n{table([*key_headers, *_COST_HEADERS], body, numeric)}"


def _timestamp(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def render_text(report: ConflictReport) -> str:
    """Summary line, then aligned tables by node, by job pair and by reason."""
    since = f" since {_timestamp(report.since_ns)}" if report.since_ns is not None else ""
    if not report.conflicts:
        return f"No plan conflicts{since}.\n"
    jobs = len({x.job_id for x in report.conflicts})
    summary = (
        f"{len(report.conflicts)} rejected node(s) in {len(report.plans)} plan(s) of "
        f"{report.evals} eval(s) across {jobs} job(s){since}; cost: {report.retries} "
        f"retry(ies), {format_duration(report.delay_total_ns)} of eval delay"
    )
    sections = [
        summary,
        _section("By node", ["NODE"], report.by_node),
        _section(
            "By job pair (rejected job, job whose plan took the capacity)",
            ["REJECTED JOB", "TAKEN BY"],
            report.by_job_pair,
        ),
        _section("By reason", ["DIMENSION", "REASON"], report.by_reason),
    ]
    return "\n\n".join(sections) + "\n"


def render_json(report: ConflictReport) -> str:
    return json.dumps(report.to_json(), indent=2) + "\n"
