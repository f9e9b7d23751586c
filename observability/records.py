"""Finished spans as plain, typed records: what the JSONL files hold and the reports read.

`SpanRecord.from_span` converts an SDK span (e.g. from an InMemorySpanExporter);
`to_json`/`from_json` are the JSONL line form. Ids are lowercase hex (32 digits for traces, 16
for spans), times are nanoseconds since the epoch, attribute sequences become tuples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.util.types import AttributeValue

SERVICE_NAME = "service.name"
SERVICE_INSTANCE_ID = "service.instance.id"

AttrValue = str | bool | int | float | tuple[str | bool | int | float, ...]
AttrMap = Mapping[str, AttrValue]


def _attrs(values: Mapping[str, AttributeValue] | Mapping[str, Any] | None) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for key, value in (values or {}).items():
        if isinstance(value, str | bool | int | float):
            out[str(key)] = value
        elif isinstance(value, list | tuple):
            out[str(key)] = tuple(v for v in value if isinstance(v, str | bool | int | float))
        elif value is not None:
            out[str(key)] = str(value)
    return out


@dataclass(frozen=True, slots=True)
class EventRecord:
    name: str
    time_ns: int
    attributes: AttrMap = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LinkRecord:
    trace_id: str
    span_id: str
    attributes: AttrMap = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanRecord:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    service_name: str = ""
    service_instance: str = ""
    kind: str = "INTERNAL"
    attributes: AttrMap = field(default_factory=dict)
    events: tuple[EventRecord, ...] = ()
    links: tuple[LinkRecord, ...] = ()
    status_code: str = "UNSET"
    """UNSET, OK or ERROR."""
    status_description: str | None = None

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def attr(self, key: str) -> AttrValue | None:
        return self.attributes.get(key)

    def str_attr(self, key: str) -> str | None:
        value = self.attributes.get(key)
        return value if isinstance(value, str) else None

    def int_attr(self, key: str) -> int | None:
        value = self.attributes.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @classmethod
    def from_span(cls, span: ReadableSpan) -> SpanRecord:
        context = span.get_span_context()
        assert context is not None, "a finished SDK span always has a context"
        resource = span.resource.attributes
        return cls(
            trace_id=f"{context.trace_id:032x}",
            span_id=f"{context.span_id:016x}",
            parent_id=f"{span.parent.span_id:016x}" if span.parent is not None else None,
            name=span.name,
            start_ns=span.start_time or 0,
            end_ns=span.end_time or span.start_time or 0,
            service_name=str(resource.get(SERVICE_NAME, "")),
            service_instance=str(resource.get(SERVICE_INSTANCE_ID, "")),
            kind=span.kind.name,
            attributes=_attrs(span.attributes),
            events=tuple(
                EventRecord(e.name, e.timestamp, _attrs(e.attributes)) for e in span.events
            ),
            links=tuple(
                LinkRecord(
                    f"{link.context.trace_id:032x}",
                    f"{link.context.span_id:016x}",
                    _attrs(link.attributes),
                )
                for link in span.links
            ),
            status_code=span.status.status_code.name,
            status_description=span.status.description,
        )

    @classmethod
    def from_spans(cls, spans: Iterable[ReadableSpan]) -> list[SpanRecord]:
        return [cls.from_span(span) for span in spans]

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_id": self.parent_id,
            "name": self.name,
            "kind": self.kind,
            "service_name": self.service_name,
            "service_instance": self.service_instance,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "attributes": dict(self.attributes),
            "events": [
                {"name": e.name, "time_ns": e.time_ns, "attributes": dict(e.attributes)}
                for e in self.events
            ],
            "links": [
                {"trace_id": k.trace_id, "span_id": k.span_id, "attributes": dict(k.attributes)}
                for k in self.links
            ],
            "status": {"code": self.status_code, "description": self.status_description},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SpanRecord:
        """Inverse of `to_json`; raises KeyError/TypeError/ValueError on a malformed object."""
        status = data.get("status") or {}
        parent = data.get("parent_id")
        return cls(
            trace_id=str(data["trace_id"]),
            span_id=str(data["span_id"]),
            parent_id=str(parent) if parent else None,
            name=str(data["name"]),
            start_ns=int(data["start_ns"]),
            end_ns=int(data["end_ns"]),
            service_name=str(data.get("service_name", "")),
            service_instance=str(data.get("service_instance", "")),
            kind=str(data.get("kind", "INTERNAL")),
            attributes=_attrs(data.get("attributes")),
            events=tuple(
                EventRecord(str(e["name"]), int(e["time_ns"]), _attrs(e.get("attributes")))
                for e in data.get("events", ())
            ),
            links=tuple(
                LinkRecord(str(k["trace_id"]), str(k["span_id"]), _attrs(k.get("attributes")))
                for k in data.get("links", ())
            ),
            status_code=str(status.get("code", "UNSET")),
            status_description=status.get("description"),
        )
