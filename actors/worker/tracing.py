"""The worker's tracing, kept out of the scheduler (an interceptor around the delivery).

A delivery is processed in `process <deliveries>` (parented to the broker's send, so in the
eval's trace) and `eval.schedule` inside it, which covers every attempt until the ack. The
scheduler records its phases (`PhaseLog`) and they become the `schedule.reconcile`,
`schedule.feasibility` and `schedule.ranking` child spans with their node counts. Each plan
goes out in a `plan.submit` span whose context rides with the submission (the leader's
`plan.apply` is its child); the ack or nack goes out in an `eval.ack`/`eval.nack` span.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import trace as otel
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind

from actors.runtime.tracing import ActorTracing, evaluation_attributes
from actors.worker.core.scheduler.phases import PhaseLog
from contracts import Plan, PlanResult
from contracts.messages import AckOutcome, EvalDelivery
from observability import Telemetry, inject
from observability import conventions as c
from observability.messaging import process_span

_PHASE_SPANS = {
    "reconcile": c.SPAN_RECONCILE,
    "feasibility": c.SPAN_FEASIBILITY,
    "ranking": c.SPAN_RANKING,
    "rebase": c.SPAN_REBASE,
}


class WorkerTracing(ActorTracing):
    def __init__(self, telemetry: Telemetry, deliveries_stream: str, group: str) -> None:
        super().__init__(telemetry, deliveries_stream)
        self.group = group

    @contextmanager
    def evaluation(
        self, delivery: EvalDelivery, carrier: Mapping[str, str], message_id: str
    ) -> Iterator[Span]:
        if not self.enabled:
            yield INVALID_SPAN
            return
        ev = delivery.eval
        with (
            process_span(
                self.tracer, self.stream, carrier, group=self.group, message_id=message_id
            ),
            self.tracer.start_as_current_span(
                c.SPAN_EVAL_SCHEDULE,
                attributes=evaluation_attributes(ev),
            ) as span,
        ):
            yield span

    def phases(self) -> PhaseLog | None:
        return PhaseLog() if self.enabled else None

    def record_phases(self, span: Span, phases: PhaseLog | None) -> None:
        if phases is None or not span.get_span_context().is_valid:
            return
        context = otel.set_span_in_context(span)
        for phase in phases.phases:
            attributes = {f"drover.phase.{k}": v for k, v in phase.attributes.items()}
            if phase.name == "feasibility":
                attributes.update(
                    c.node_count_attributes(
                        total=int(phase.attributes["nodes"]),
                        feasible=int(phase.attributes["feasible"]),
                        task_group=str(phase.attributes["group"]),
                    )
                )
            elif phase.name == "ranking":
                attributes.update(
                    c.node_count_attributes(
                        ranked=int(phase.attributes["nodes_scored"]),
                        task_group=str(phase.attributes["group"]),
                    )
                )
            child = self.tracer.start_span(
                _PHASE_SPANS[phase.name],
                context=context,
                start_time=phase.start_ns,
                attributes=attributes,
            )
            child.end(end_time=max(phase.end_ns, phase.start_ns))

    @contextmanager
    def plan_submit(self, plan: Plan, attempt: int) -> Iterator[tuple[Span, dict[str, str]]]:
        if attempt > 1:
            self.metrics.record_retry()
        if not self.enabled:
            yield INVALID_SPAN, {}
            return
        with self.tracer.start_as_current_span(
            c.SPAN_PLAN_SUBMIT,
            kind=SpanKind.PRODUCER,
            attributes=c.plan_attributes(
                plan.eval_id,
                attempt,
                job_id=plan.job_id,
                namespace=plan.namespace,
                placements=sum(len(a) for a in plan.node_allocation.values()),
                stops=sum(len(a) for a in plan.node_update.values()),
                snapshot_index=plan.snapshot_index,
            ),
        ) as span:
            yield span, inject(span)

    def plan_result(self, span: Span, plan: Plan, result: PlanResult) -> None:
        if not self.enabled:
            return
        span.set_attributes(
            c.plan_result_attributes(
                placements=sum(len(a) for a in plan.node_allocation.values()),
                committed=sum(len(a) for a in result.node_allocation.values()),
                rejected_nodes=len(result.rejected_nodes),
                refresh_index=result.refresh_index or None,
            )
        )

    def ack_trace(self, span: Span, outcome: AckOutcome, reason: str) -> dict[str, str]:
        if not self.enabled or not span.get_span_context().is_valid:
            return {}
        name = c.SPAN_EVAL_ACK if outcome is AckOutcome.ACK else c.SPAN_EVAL_NACK
        ack = self.tracer.start_span(
            name,
            context=otel.set_span_in_context(span),
            kind=SpanKind.PRODUCER,
            attributes={c.EVAL_OUTCOME: outcome.value, "drover.eval.reason": reason},
        )
        ack.end()
        return inject(ack)
