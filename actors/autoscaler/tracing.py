"""The autoscaler's tracing, kept out of its core: one span per policy evaluation.

`autoscaler.evaluate` carries the policy, the target, the count, each check (as an
`autoscaler.check` event: its query, the value it read, the count it proposed and why, or
its error), the winner, whether the count was capped, the handler's state (cooldown), and
the outcome. A Scale call is an `autoscaler.scale` span, child of the evaluation that
decided it; the leader request it sends carries that context, so the job-scaling
evaluation continues the same trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace as otel
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from actors.runtime.tracing import ActorTracing
from contracts.autoscaling import CheckOutcome, Decision
from observability import Telemetry
from observability.records import AttrValue

SPAN_EVALUATE = "autoscaler.evaluate"
SPAN_SCALE = "autoscaler.scale"
EVENT_CHECK = "autoscaler.check"
PREFIX = "drover.autoscaler."


class AutoscalerTracing(ActorTracing):
    def __init__(self, telemetry: Telemetry, stream: str) -> None:
        super().__init__(telemetry, stream)

    @contextmanager
    def evaluation(self, policy_id: str, target: str) -> Iterator[Span]:
        if not self.enabled:
            yield INVALID_SPAN
            return
        attributes = {PREFIX + "policy.id": policy_id, PREFIX + "target": target}
        with self.tracer.start_as_current_span(SPAN_EVALUATE, attributes=attributes) as span:
            yield span

    def record(self, span: Span, decision: Decision) -> None:
        if not span.is_recording():
            return
        attributes: dict[str, AttrValue] = {
            PREFIX + "outcome": decision.outcome.value,
            PREFIX + "reason": decision.reason,
            PREFIX + "state": decision.state,
            PREFIX + "capped": decision.capped,
            PREFIX + "scale_due": decision.scale_due,
            PREFIX + "starting": decision.starting,
        }
        if decision.current_count is not None:
            attributes[PREFIX + "count.current"] = decision.current_count
        if decision.winner is not None:
            attributes[PREFIX + "winner"] = decision.winner
        if decision.action is not None:
            attributes[PREFIX + "count.new"] = decision.action.count
            attributes[PREFIX + "direction"] = str(decision.action.direction)
        if decision.cooldown_until_s is not None:
            attributes[PREFIX + "cooldown_until_s"] = decision.cooldown_until_s
        if decision.adjustments:
            attributes[PREFIX + "adjustments"] = tuple(decision.adjustments)
        span.set_attributes(attributes)
        for check in decision.checks:
            span.add_event(EVENT_CHECK, _check_attributes(check))

    @contextmanager
    def scale_call(self, parent: Span, decision_id: str) -> Iterator[Span]:
        """Around one Scale call (on the calling thread): a child of the evaluation."""
        if not self.enabled or not parent.get_span_context().is_valid:
            yield INVALID_SPAN
            return
        context = otel.set_span_in_context(parent)
        with self.tracer.start_as_current_span(
            SPAN_SCALE,
            context=context,
            kind=SpanKind.CLIENT,
            attributes={PREFIX + "decision.id": decision_id},
        ) as span:
            yield span

    @staticmethod
    def scale_answer(span: Span, ok: bool, error: str, eval_id: str) -> None:
        if not span.is_recording():
            return
        span.set_attribute(PREFIX + "scale.ok", ok)
        if eval_id:
            span.set_attribute("drover.eval.id", eval_id)
        if not ok:
            span.set_status(Status(StatusCode.ERROR, error))


def _check_attributes(check: CheckOutcome) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {
        PREFIX + "check.name": check.name,
        PREFIX + "check.strategy": check.strategy,
        PREFIX + "check.points": check.points_read,
        PREFIX + "check.ignored": check.ignored,
    }
    if check.group:
        out[PREFIX + "check.group"] = check.group
    if check.query is not None:
        out[PREFIX + "check.query"] = check.query.query
        out[PREFIX + "check.source"] = check.query.source
    if check.latest_value is not None:
        out[PREFIX + "check.value"] = check.latest_value
    if check.action is not None:
        out[PREFIX + "check.count"] = check.action.count
        out[PREFIX + "check.direction"] = str(check.action.direction)
        out[PREFIX + "check.reason"] = check.action.reason
    if check.error:
        out[PREFIX + "check.error"] = check.error
    return out
