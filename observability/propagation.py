"""W3C trace context in and out of stream messages.

A stream envelope carries exactly `traceparent` and `tracestate` (actors/streams/envelope.py),
so only the W3C TraceContext propagator is used: never the global composite (which would add
baggage the envelope drops) and never global state.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()

TRACE_KEYS = ("traceparent", "tracestate")


def inject(span_or_context: Span | Context | None = None) -> dict[str, str]:
    """`{"traceparent": ..., "tracestate"?: ...}` for a span, a context, or (None) the current
    context; `{}` when there is no valid span (tracing disabled), so callers can always pass
    the result as the envelope's `trace`."""
    if isinstance(span_or_context, Span):
        context: Context | None = trace.set_span_in_context(span_or_context)
    else:
        context = span_or_context
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=context)
    return carrier


def extract(carrier: Mapping[str, str] | None) -> Context:
    """The context a message was sent from; an empty Context if the carrier has none (or a
    malformed one), so a span started with it simply becomes a root."""
    if not carrier:
        return Context()
    return _PROPAGATOR.extract({k: carrier[k] for k in TRACE_KEYS if k in carrier})


def span_context(carrier: Mapping[str, str] | None) -> SpanContext | None:
    """The remote span context in a carrier, or None when it has no valid one."""
    context = trace.get_current_span(extract(carrier)).get_span_context()
    return context if context.is_valid else None


def link_to(carrier: Mapping[str, str] | None, **attributes: str | int) -> Link | None:
    """A span link to the sender of a message (for batch processing, where one span handles
    several messages and cannot have them all as parent); None without a valid context."""
    context = span_context(carrier)
    if context is None:
        return None
    return Link(context, attributes or None)
