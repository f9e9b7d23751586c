"""The leader's tracing and metrics, kept out of its loop (an interceptor, as temporalio's).

- a request is processed in a span parented to the sender's context (the API, an agent);
- every evaluation it creates gets an `eval.enqueue` span, the root of that evaluation's own
  trace (linked to the span that created it); the log entry carries each root's context
  (`LogEntry.trace[eval_id]`), which is how the broker continues the trace;
- a plan is applied in a `plan.apply` span parented to the worker's `plan.submit`, with one
  `plan.node_rejected` event per rejected node: the reason, what was asked and free, and the
  committed plan that took the capacity since the worker's snapshot (`CapacityLedger`); the
  committed entry carries the apply's context (`LogEntry.trace[""]`) for the client agents.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanContext, SpanKind

from actors.leader.core.conflicts import CapacityLedger, CommittedPlan, Rejection, rejections
from actors.runtime.tracing import ActorTracing, evaluation_attributes
from actors.state import StateReader
from contracts import EvalStatus, Evaluation, PlanResult
from contracts.messages import LeaderRequest, PlanSubmission
from contracts.state_log import StateChange, UpsertAllocs, UpsertEvals, UpsertJob
from observability import PlanRef, ResourceAmounts, Telemetry, inject, record_node_rejected
from observability import conventions as c
from observability.propagation import extract

APPLIES_KEPT = 10_000


def _new_evals(changes: Sequence[StateChange], state: StateReader) -> list[Evaluation]:
    evals: list[Evaluation] = []
    for change in changes:
        if isinstance(change, UpsertJob | UpsertAllocs | UpsertEvals):
            evals += [
                e
                for e in change.evals
                if e.status in (EvalStatus.PENDING, EvalStatus.BLOCKED) and state.eval(e.id) is None
            ]
    return evals


class LeaderTracing(ActorTracing):
    def __init__(self, telemetry: Telemetry, requests_stream: str) -> None:
        super().__init__(telemetry, requests_stream)
        self.ledger = CapacityLedger()
        # plan id -> the span context of its plan.apply, so that a plan rejected because of
        # it links to it (conflicting plans are linked to each other); bounded FIFO.
        self._applies: OrderedDict[str, SpanContext] = OrderedDict()

    @contextmanager
    def request(self, request: LeaderRequest, carrier: Mapping[str, str]) -> Iterator[Span]:
        if not self.enabled:
            yield INVALID_SPAN
            return
        with self.tracer.start_as_current_span(
            f"leader.{request.kind.value}",
            context=extract(carrier),
            kind=SpanKind.CONSUMER,
            attributes=c.messaging_attributes(self.stream, c.OP_PROCESS),
        ) as span:
            yield span

    @contextmanager
    def plan(self, submission: PlanSubmission, carrier: Mapping[str, str]) -> Iterator[Span]:
        if not self.enabled:
            yield INVALID_SPAN
            return
        plan = submission.plan
        attributes = c.plan_attributes(
            plan.eval_id,
            submission.attempt,
            job_id=plan.job_id,
            namespace=plan.namespace,
            placements=sum(len(a) for a in plan.node_allocation.values()),
            stops=sum(len(a) for a in plan.node_update.values()),
            snapshot_index=plan.snapshot_index,
        )
        with self.tracer.start_as_current_span(
            c.SPAN_PLAN_APPLY,
            context=extract(carrier),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
        ) as span:
            yield span

    def entry_trace(
        self, span: Span, changes: Sequence[StateChange], state: StateReader
    ) -> dict[str, str]:
        """The contexts a commit's log entries carry: the committing span, and a fresh root
        span per evaluation the changes create."""
        if not self.enabled:
            return {}
        trace = inject(span)
        carried = {"": trace["traceparent"]} if "traceparent" in trace else {}
        link = Link(span.get_span_context()) if span.get_span_context().is_valid else None
        for ev in _new_evals(changes, state):
            if ev.status is EvalStatus.BLOCKED:
                self.metrics.record_blocked_eval(ev.triggered_by)
            root = self.tracer.start_span(
                c.SPAN_EVAL_ENQUEUE,
                context=extract({}),  # a new trace: one per evaluation
                kind=SpanKind.PRODUCER,
                attributes=evaluation_attributes(ev),
                links=[link] if link is not None else None,
            )
            root.end()
            root_trace = inject(root)
            if "traceparent" in root_trace:
                carried[ev.id] = root_trace["traceparent"]
        return carried

    def plan_applied(
        self,
        span: Span,
        submission: PlanSubmission,
        result: PlanResult,
        state: StateReader,
        started: float,
    ) -> None:
        """Record the verdict before the commit: rejection events (read against the state the
        plan was checked on) and the plan-apply metrics."""
        plan = submission.plan
        placements = sum(len(a) for a in plan.node_allocation.values())
        committed = sum(len(a) for a in result.node_allocation.values())
        outcome = c.plan_outcome(placements, committed, len(result.rejected_nodes))
        self.metrics.record_plan_apply(
            outcome, time.monotonic() - started, [r.reason for r in result.rejected_nodes]
        )
        if not self.enabled:
            return
        found: list[Rejection] = (
            rejections(state, plan, result, self.ledger) if result.rejected_nodes else []
        )
        span.set_attributes(
            c.plan_result_attributes(
                placements=placements,
                committed=committed,
                rejected_nodes=len(result.rejected_nodes),
                refresh_index=result.refresh_index or None,
            )
        )
        rejected = PlanRef(
            plan.eval_id,
            plan.job_id,
            c.plan_id(plan.eval_id, submission.attempt),
            attempt=submission.attempt,
        )
        linked: set[str] = set()
        for r in found:
            taken = r.taken_by
            if taken is not None:
                taker = c.plan_id(taken.eval_id, taken.attempt)
                context = self._applies.get(taker)
                if context is not None and taker not in linked:
                    linked.add(taker)
                    span.add_link(context, {c.CONFLICT_PLAN_ID: taker})
            record_node_rejected(
                span,
                node_id=r.node_id,
                reason=r.reason,
                rejected=rejected,
                asked=ResourceAmounts(
                    r.asked.cpu, r.asked.memory_mb, r.asked.disk_mb, r.asked.gpus
                ),
                free=ResourceAmounts(r.free.cpu, r.free.memory_mb, r.free.disk_mb, r.free.gpus),
                taken_by=(
                    PlanRef(
                        taken.eval_id,
                        taken.job_id,
                        c.plan_id(taken.eval_id, taken.attempt),
                        attempt=taken.attempt,
                        commit_index=taken.index,
                    )
                    if taken is not None
                    else None
                ),
            )

    def plan_committed(
        self, span: Span, submission: PlanSubmission, result: PlanResult, index: int, fresh: int
    ) -> None:
        self.metrics.record_placements(fresh)
        if not self.enabled:
            return
        plan = submission.plan
        self.ledger.record(
            result.node_allocation,
            CommittedPlan(index, plan.eval_id, plan.job_id, submission.attempt),
        )
        span.set_attribute(c.PLAN_COMMIT_INDEX, index)
        self._applies[c.plan_id(plan.eval_id, submission.attempt)] = span.get_span_context()
        if len(self._applies) > APPLIES_KEPT:
            self._applies.popitem(last=False)
