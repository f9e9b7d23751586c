"""The broker's tracing and metrics, kept out of its loop.

The leader gives every new evaluation a root span and puts its context in the log entry
(`LogEntry.trace[eval_id]`); the broker remembers it while the eval waits, and each delivery
is sent in a `send <deliveries>` span parented to that root, so the worker continues the
eval's trace. Acks give the eval metrics: outcome by trigger, and latency from enqueue to ack.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from opentelemetry.trace import SpanKind

from actors.runtime.tracing import ActorTracing, evaluation_attributes
from actors.streams.bus import StreamBus
from contracts import Evaluation
from contracts.messages import EvalDelivery
from contracts.state_log import LogEntry
from observability import Telemetry, inject
from observability import conventions as c
from observability.propagation import extract


class BrokerTracing(ActorTracing):
    def __init__(self, telemetry: Telemetry, deliveries_stream: str) -> None:
        super().__init__(telemetry, deliveries_stream)
        # eval id -> (root traceparent, enqueued at, trigger); dropped when the eval is acked.
        self.evals: dict[str, tuple[str, float, str]] = {}
        self._unregister: Callable[[], None] | None = None

    def watch_backlog(self, bus: StreamBus, groups: list[tuple[str, str]]) -> None:
        """Report each consumer group's backlog (pending + undelivered) as a gauge."""

        def backlog() -> list[tuple[str, str, int]]:
            out = []
            for stream, group in groups:
                summary = bus.pending_summary(stream, group)
                if summary is not None:
                    out.append((stream, group, summary.pending + summary.undelivered))
            return out

        self._unregister = self.metrics.register_backlog(backlog)

    def on_entry(self, entry: LogEntry, evals: tuple[Evaluation, ...]) -> None:
        now = time.monotonic()
        for ev in evals:
            if ev.id not in self.evals:
                self.evals[ev.id] = (entry.trace.get(ev.id, ""), now, str(ev.triggered_by))

    def delivery_trace(self, delivery: EvalDelivery, deliveries: int) -> dict[str, str]:
        """The carrier for one delivery: a PRODUCER span in the eval's trace."""
        if not self.enabled:
            return {}
        ev = delivery.eval
        root = self.evals.get(ev.id, ("", 0.0, ""))[0]
        attributes = c.messaging_attributes(self.stream, c.OP_SEND, operation_name="xadd")
        attributes.update(evaluation_attributes(ev, delivery=deliveries))
        span = self.tracer.start_span(
            c.span_name(c.OP_SEND, self.stream),
            context=extract({"traceparent": root} if root else {}),
            kind=SpanKind.PRODUCER,
            attributes=attributes,
        )
        span.end()
        return inject(span)

    def settled(self, eval_id: str, acked: bool) -> None:
        known = self.evals.pop(eval_id, None) if acked else self.evals.get(eval_id)
        trigger = known[2] if known else ""
        latency = time.monotonic() - known[1] if known and acked else None
        self.metrics.record_eval(trigger, "acked" if acked else "nacked", latency)

    def shutdown(self) -> None:
        if self._unregister is not None:
            self._unregister()
