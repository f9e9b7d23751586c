"""Spans around stream send and receive, with the messaging conventions filled in.

For the stream transport (the one place that sends and receives):

    with send_span(telemetry.tracer, stream) as (span, trace):
        entry_id = xadd(stream, encode_message(type_name, message, trace))
        span.set_attribute(conventions.MESSAGING_MESSAGE_ID, entry_id)

    with process_span(telemetry.tracer, stream, envelope.trace, group=group,
                      message_id=entry_id) as span:
        handle(message)

`process_span` continues the sender's trace (the sender's span is its parent), which keeps an
eval's chain one readable trace; with `link_only=True` it starts a new trace linked to the
sender instead (the conventions' batch form). `batch_span` is a span over several messages,
linked to each message's context.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from opentelemetry.trace import INVALID_SPAN, Link, NoOpTracer, Span, SpanKind, Tracer

from observability import conventions as c
from observability.propagation import extract, inject, link_to
from observability.records import AttrValue


@contextmanager
def send_span(
    tracer: Tracer,
    destination: str,
    *,
    operation_name: str = "xadd",
    attributes: Mapping[str, AttrValue] | None = None,
) -> Iterator[tuple[Span, dict[str, str]]]:
    """A PRODUCER span `send <stream>`, and the trace carrier to put in the envelope."""
    if isinstance(tracer, NoOpTracer):  # tracing off: nothing to build
        yield INVALID_SPAN, {}
        return
    attrs = c.messaging_attributes(destination, c.OP_SEND, operation_name=operation_name)
    attrs.update(attributes or {})
    with tracer.start_as_current_span(
        c.span_name(c.OP_SEND, destination), kind=SpanKind.PRODUCER, attributes=attrs
    ) as span:
        yield span, inject(span)


@contextmanager
def process_span(
    tracer: Tracer,
    destination: str,
    carrier: Mapping[str, str] | None,
    *,
    group: str | None = None,
    message_id: str | None = None,
    operation_name: str = "xreadgroup",
    link_only: bool = False,
    attributes: Mapping[str, AttrValue] | None = None,
) -> Iterator[Span]:
    """A CONSUMER span `process <stream>` for one message, parented to (or, with `link_only`,
    linked to) the context in `carrier` (the envelope's trace dict)."""
    if isinstance(tracer, NoOpTracer):
        yield INVALID_SPAN
        return
    attrs = c.messaging_attributes(
        destination,
        c.OP_PROCESS,
        operation_name=operation_name,
        consumer_group=group,
        message_id=message_id,
    )
    attrs.update(attributes or {})
    link = link_to(carrier) if link_only else None
    with tracer.start_as_current_span(
        c.span_name(c.OP_PROCESS, destination),
        context=extract(None if link_only else carrier),
        kind=SpanKind.CONSUMER,
        attributes=attrs,
        links=[link] if link is not None else None,
    ) as span:
        yield span


@contextmanager
def batch_span(
    tracer: Tracer,
    name: str,
    carriers: Iterable[Mapping[str, str] | None],
    *,
    kind: SpanKind = SpanKind.CONSUMER,
    attributes: Mapping[str, AttrValue] | None = None,
) -> Iterator[Span]:
    """A new-trace span over a batch of messages, linked to each message's context (e.g. the
    leader's `plan.apply_batch`); `messaging.batch.message_count` is set."""
    carriers = list(carriers)
    links: list[Link] = [link for link in map(link_to, carriers) if link is not None]
    attrs: dict[str, AttrValue] = dict(attributes or {})
    attrs[c.MESSAGING_BATCH_COUNT] = len(carriers)
    with tracer.start_as_current_span(
        name, context=extract(None), kind=kind, attributes=attrs, links=links
    ) as span:
        yield span
