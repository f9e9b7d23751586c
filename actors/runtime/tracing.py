"""What every actor's tracing interceptor starts from: its telemetry and the stream it traces,
and the attributes an evaluation's spans carry wherever the evaluation goes."""

from __future__ import annotations

from contracts import Evaluation
from observability import Telemetry
from observability import conventions as c


class ActorTracing:
    def __init__(self, telemetry: Telemetry, stream: str) -> None:
        self.telemetry = telemetry
        self.enabled = telemetry.enabled
        self.tracer = telemetry.tracer
        self.metrics = telemetry.metrics
        self.stream = stream


def evaluation_attributes(ev: Evaluation, delivery: int | None = None) -> c.Attributes:
    return c.eval_attributes(
        ev.id,
        job_id=ev.job_id,
        namespace=ev.namespace,
        trigger=str(ev.triggered_by),
        scheduler_type=ev.type,
        priority=ev.priority,
        delivery=delivery,
    )
