"""drover's OpenTelemetry layer: traces, metrics, export, and the views built on them.

Self-contained: nothing here imports the actors; the actors call into it from the few places
that are instrumented (stream send/receive, actor entry points, the leader's plan apply).

Set-up, once per actor instance
-------------------------------
    from observability import configure

    telemetry = configure("worker", "worker-3", data_dir)    # service.name = drover-worker
    tracer, metrics = telemetry.tracer, telemetry.metrics
    ...
    telemetry.shutdown()                                      # flushes spans; idempotent

`configure(role, instance_id, data_dir, *, span_exporter=None, metric_reader=None,
enabled=True, env=None, metric_interval_s=30.0, export_timeout_s=10.0)` builds the actor's own
TracerProvider and MeterProvider (never the global ones). Export goes to OTLP/HTTP when
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, per signal) is set, else to JSON lines in
`data_dir/telemetry/` (`spans-<role>-<instance>.jsonl`, `metrics-<role>-<instance>.jsonl`),
through a BatchSpanProcessor. Tests pass `span_exporter=InMemorySpanExporter()` (exported
synchronously) and `metric_reader=InMemoryMetricReader()`. Every exporter is wrapped in
`SafeSpanExporter` / `SafeMetricExporter`: an exporter that raises or hangs is counted and
logged once, never raised into the caller. `enabled=False`, `OTEL_SDK_DISABLED=true` or
`Telemetry.disabled()` give no-op tracer and meter (tracing off for benchmarks); check
`telemetry.enabled` to skip building attributes at all.

Trace context across streams (`propagation`, `messaging`)
---------------------------------------------------------
`inject(span_or_context=None) -> dict[str, str]` gives the envelope's `trace` dict
(`traceparent`, `tracestate` when set; `{}` when tracing is off); `extract(carrier) -> Context`
is its inverse (W3C TraceContext only). `link_to(carrier) -> Link | None` for batches.
`messaging.send_span(tracer, stream)` yields `(span, trace_dict)` for the envelope;
`messaging.process_span(tracer, stream, envelope.trace, group=..., message_id=...)` continues
the sender's trace (or, `link_only=True`, links to it); `messaging.batch_span(tracer, name,
carriers)` links a batch span to each message. Span names `"send <stream>"` /
`"process <stream>"`, kinds PRODUCER / CONSUMER, `messaging.*` semantic-convention attributes.

What the instrumentation must emit (`conventions`)
--------------------------------------------------
One trace per evaluation, spans named by `conventions.SPAN_*`:
`eval.enqueue` -> `process <evals stream>` -> `eval.schedule` (worker; children
`schedule.reconcile`, `schedule.feasibility`, `schedule.ranking` with
`node_count_attributes(...)`) -> `plan.submit` (one per attempt) -> `plan.apply` (leader, parent
= the submit's context) -> `eval.ack`/`eval.nack` -> `alloc.start` (client). Attribute builders:
`eval_attributes(eval_id, job_id=, namespace=, trigger=, scheduler_type=, priority=,
delivery=)`, `plan_attributes(eval_id, attempt, job_id=, ...)` (sets `drover.plan.id` =
`plan_id(eval_id, attempt)` = `"<eval_id>#<attempt>"`), `plan_result_attributes(placements=,
committed=, rejected_nodes=, ...)`, `messaging_attributes(stream, operation_type, ...)`.

The conflict event: for each node a plan apply rejects, `record_node_rejected(span,
node_id=, reason=, rejected=PlanRef(eval_id, job_id, plan_id, attempt=),
asked=ResourceAmounts(cpu, memory_mb, disk_mb, gpus), free=ResourceAmounts(...),
taken_by=PlanRef(...) | None)` adds event `plan.node_rejected` with `drover.node.id`,
`drover.reject.reason` (the leader's string), `drover.reject.dimension`
(cpu|memory|disk|devices|node|other), `drover.eval.id`/`drover.job.id`/`drover.plan.id`/
`drover.plan.attempt` of the rejected plan, `drover.ask.{cpu,memory_mb,disk_mb,gpus}`,
`drover.free.{...}` (ints) and `drover.conflict.{eval.id,job.id,plan.id,commit_index}` of the
committed plan that took the capacity.

Metrics (`telemetry.metrics`, a `DroverMetrics`)
-----------------------------------------------
`record_eval(trigger, outcome, latency_s=None)`, `record_retry(scheduler_type="")`,
`record_blocked_eval(trigger="")`, `record_placements(count, outcome="committed")`,
`record_plan_apply(outcome, latency_s, rejected_reasons=())`, `record_rejected_node(reason)`,
`record_alloc_status(client_status, count=1)`; gauges fed by callbacks:
`register_backlog(lambda: [(stream, group, pending), ...])`,
`register_alloc_counts(lambda: {status: count})` (each returns an unregister function).
Instrument names are `drover.*` (see `metrics`).

Reading it back
---------------
`load_spans(path) -> list[SpanRecord]` reads every span file of a telemetry (or data)
directory; `SpanRecord.from_spans(in_memory_exporter.get_finished_spans())` does the same for
tests. `conflicts.conflict_report(spans, since_ns=None)` -> `render_text` / `render_json`
backs `drover trace conflicts [-json] [-since D]` (`text.parse_duration("5m")` for `-since`);
`waterfall.find_trace_for_eval(spans, eval_id)`, `waterfall.linked_spans(spans, trace)` and
`waterfall.render_waterfall(trace, width=..., linked=...)` back `drover trace show EVAL_ID`.
"""

from __future__ import annotations

from observability.conventions import PlanRef, ResourceAmounts, record_node_rejected
from observability.jsonl import load_spans
from observability.metrics import DroverMetrics
from observability.propagation import extract, inject, link_to
from observability.records import SpanRecord
from observability.telemetry import Telemetry, configure

__all__ = [
    "DroverMetrics",
    "PlanRef",
    "ResourceAmounts",
    "SpanRecord",
    "Telemetry",
    "configure",
    "extract",
    "inject",
    "link_to",
    "load_spans",
    "record_node_rejected",
]
