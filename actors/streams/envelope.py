"""Stream-entry form of `contracts.messages.Envelope`.

An entry holds `t` (message type name), `b` (JSON body from the codec) and, when the sender had
a span, `tp`/`ts` (W3C traceparent/tracestate). Other propagator keys (baggage) are not carried.

Decoding never lets a malformed entry escape as an arbitrary exception: everything becomes
`BadMessage(reason)`, which consumers dead-letter instead of crashing on (or retrying forever).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.codec import CodecError, lean_dumps, loads
from contracts.messages import Envelope
from contracts.state_log import LogEntry, decode_entry, encode_entry

TYPE = b"t"
BODY = b"b"
TRACEPARENT = b"tp"
TRACESTATE = b"ts"

_TRACE_FIELDS = ((TRACEPARENT, "traceparent"), (TRACESTATE, "tracestate"))

Fields = Mapping[bytes, bytes]


class BadMessage(ValueError):
    """A stream entry that cannot be turned into a message; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def message_type(message: object) -> str:
    """The type name messages are published under: the record's class name."""
    return type(message).__name__


def registry_of(*classes: type) -> dict[str, type]:
    """A decoding registry keyed by class name, e.g. `registry_of(EvalAck, PlanResponse)`."""
    return {cls.__name__: cls for cls in classes}


def encode_body(message: object) -> bytes:
    """Codec JSON, defaults left out (only our decoders read it); a LogEntry (a union of
    changes) uses its own encoder; bytes pass as is."""
    if isinstance(message, bytes):
        return message
    if isinstance(message, LogEntry):
        return encode_entry(message)
    return lean_dumps(message)


def decode_body(cls: type, body: bytes) -> Any:
    """Inverse of `encode_body`; raises CodecError naming the JSON path of a bad field."""
    if cls is LogEntry:
        return decode_entry(body)
    return loads(cls, body)


def encode_envelope(envelope: Envelope) -> dict[bytes, bytes]:
    fields = {TYPE: envelope.type.encode(), BODY: envelope.body}
    for key, name in _TRACE_FIELDS:
        value = envelope.trace.get(name)
        if value:
            fields[key] = value.encode()
    return fields


def encode_message(
    type_name: str, message: object, trace: Mapping[str, str] | None = None
) -> dict[bytes, bytes]:
    return encode_envelope(Envelope(type_name, encode_body(message), dict(trace or {})))


def trace_of(fields: Fields) -> dict[str, str]:
    """The trace context of an entry, best effort (never raises)."""
    trace = {}
    for key, name in _TRACE_FIELDS:
        value = fields.get(key)
        if value:
            trace[name] = value.decode(errors="replace")
    return trace


def decode_envelope(fields: Fields) -> Envelope:
    if not fields:
        raise BadMessage("entry has no fields (deleted or trimmed from the stream)")
    raw_type = fields.get(TYPE)
    if raw_type is None:
        raise BadMessage("missing field 't' (message type)")
    body = fields.get(BODY)
    if body is None:
        raise BadMessage("missing field 'b' (message body)")
    try:
        type_name = raw_type.decode()
    except UnicodeDecodeError:
        raise BadMessage(f"field 't' is not UTF-8: {raw_type[:60]!r}") from None
    return Envelope(type_name, body, trace_of(fields))


def decode_message(
    fields: Fields, registry: Mapping[str, type]
) -> tuple[str, object, dict[str, str]]:
    """(type name, decoded message, trace) of an entry, or BadMessage naming the problem."""
    envelope = decode_envelope(fields)
    cls = registry.get(envelope.type)
    if cls is None:
        known = ", ".join(sorted(registry)) or "none"
        raise BadMessage(f"unknown message type {envelope.type!r} (expected one of: {known})")
    try:
        message = decode_body(cls, envelope.body)
    except CodecError as exc:
        raise BadMessage(f"bad {envelope.type} body: {exc}") from None
    except (TypeError, ValueError) as exc:  # e.g. a record's own __post_init__ validation
        raise BadMessage(f"bad {envelope.type} body: {type(exc).__name__}: {exc}") from None
    return envelope.type, message, envelope.trace
