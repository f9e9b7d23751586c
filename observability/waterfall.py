"""One trace as a terminal waterfall (`drover trace show EVAL_ID`).

    spans = load_spans(data_dir)
    trace = find_trace_for_eval(spans, eval_id)
    print(render_waterfall(trace, width=120, linked=linked_spans(spans, trace)))

Rows are the span tree (children under their parent, by start time; a span whose parent is
not in the set is a root), each with its service (`service.name/service.instance.id`), its
duration and a bar placed on the trace's time axis. Events are listed under their span with
their offset from the trace start; `plan.node_rejected` events are spelled out (node, reason,
asked/free, the plan that took the capacity). Spans from other traces that link to this one
(or that it links to), e.g. the leader's `plan.apply_batch`, are shown in a section of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from observability import conventions as c
from observability.conventions import ResourceAmounts
from observability.records import EventRecord, SpanRecord
from observability.text import format_duration

MIN_BAR = 10
MAX_LABEL = 48
MAX_SERVICE = 28


def find_trace(spans: Iterable[SpanRecord], trace_id: str) -> list[SpanRecord]:
    """All spans of one trace, by start time."""
    wanted = trace_id.lower()
    return sorted((s for s in spans if s.trace_id == wanted), key=_order)


def find_trace_for_eval(spans: Iterable[SpanRecord], eval_id: str) -> list[SpanRecord]:
    """All spans of the trace(s) holding a span with `drover.eval.id == eval_id`, by start
    time; normally one trace, more if the eval's context was lost on the way. Empty if none."""
    all_spans = list(spans)
    traces = {s.trace_id for s in all_spans if s.str_attr(c.EVAL_ID) == eval_id}
    return sorted((s for s in all_spans if s.trace_id in traces), key=_order)


def linked_spans(spans: Iterable[SpanRecord], trace: Sequence[SpanRecord]) -> list[SpanRecord]:
    """Spans outside `trace` that link to one of its spans or that one of its spans links to."""
    ids = {s.span_id for s in trace}
    targets = {link.span_id for s in trace for link in s.links}
    return sorted(
        (
            s
            for s in spans
            if s.span_id not in ids
            and (s.span_id in targets or any(link.span_id in ids for link in s.links))
        ),
        key=_order,
    )


def _order(span: SpanRecord) -> tuple[int, int, str]:
    return (span.start_ns, -span.end_ns, span.span_id)


def _tree(spans: Sequence[SpanRecord]) -> list[tuple[int, SpanRecord]]:
    """(depth, span) in display order."""
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[SpanRecord]] = {}
    roots: list[SpanRecord] = []
    for span in sorted(spans, key=_order):
        if span.parent_id is not None and span.parent_id in by_id:
            children.setdefault(span.parent_id, []).append(span)
        else:
            roots.append(span)
    out: list[tuple[int, SpanRecord]] = []
    seen: set[str] = set()

    def walk(span: SpanRecord, depth: int) -> None:
        if span.span_id in seen:
            return
        seen.add(span.span_id)
        out.append((depth, span))
        for child in children.get(span.span_id, ()):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    for span in spans:  # a parent cycle leaves spans unreached: show them as roots
        if span.span_id not in seen:
            walk(span, 0)
    return out


def _label(span: SpanRecord, show_eval: bool) -> str:
    parts = [span.name]
    attempt = span.int_attr(c.PLAN_ATTEMPT)
    if attempt is not None:
        parts.append(f"#{attempt}")
    outcome = span.str_attr(c.PLAN_OUTCOME) or span.str_attr(c.EVAL_OUTCOME)
    if outcome:
        parts.append(f"({outcome})")
    feasible, total = span.int_attr(c.NODES_FEASIBLE), span.int_attr(c.NODES_TOTAL)
    if feasible is not None and total is not None:
        parts.append(f"[{feasible}/{total} nodes]")
    eval_id = span.str_attr(c.EVAL_ID)
    if show_eval and eval_id:
        parts.append(f"<eval {eval_id}>")
    if span.status_code == "ERROR":
        parts.append("!")
    return " ".join(parts)


def _service(span: SpanRecord) -> str:
    name = span.service_name or "?"
    return f"{name}/{span.service_instance}" if span.service_instance else name


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _amounts(amounts: ResourceAmounts) -> str:
    text = f"cpu={amounts.cpu} mem={amounts.memory_mb}MB disk={amounts.disk_mb}MB"
    return text + (f" gpus={amounts.gpus}" if amounts.gpus else "")


def describe_event(event: EventRecord) -> str:
    attrs = event.attributes
    if event.name == c.EVENT_NODE_REJECTED:
        text = (
            f"node {attrs.get(c.NODE_ID, '?')} rejected: {attrs.get(c.REJECT_REASON, '?')}"
            f"; asked {_amounts(ResourceAmounts.from_attributes(attrs, c.ASK_PREFIX))}"
            f", free {_amounts(ResourceAmounts.from_attributes(attrs, c.FREE_PREFIX))}"
        )
        if c.CONFLICT_JOB_ID in attrs or c.CONFLICT_EVAL_ID in attrs:
            text += (
                f"; taken by job {attrs.get(c.CONFLICT_JOB_ID, '?')}"
                f" (eval {attrs.get(c.CONFLICT_EVAL_ID, '?')},"
                f" plan {attrs.get(c.CONFLICT_PLAN_ID, '?')})"
            )
        return text
    shown = [f"{k}={v}" for k, v in list(attrs.items())[:4]]
    return " ".join([event.name, *shown])


def _offset(ns: int) -> str:
    if ns == 0:
        return "+0"
    return ("+" if ns > 0 else "-") + format_duration(abs(ns))


def _render_rows(
    spans: Sequence[SpanRecord],
    width: int,
    window: tuple[int, int],
    origin: int,
    show_eval: bool = False,
) -> list[str]:
    rows = _tree(spans)
    t0, t1 = window
    total = max(1, t1 - t0)
    labels = [_clip("  " * depth + _label(span, show_eval), MAX_LABEL) for depth, span in rows]
    services = [_clip(_service(span), MAX_SERVICE) for _, span in rows]
    durations = [format_duration(span.duration_ns) for _, span in rows]
    label_w = max(len(x) for x in labels)
    service_w = max(len(x) for x in services)
    duration_w = max(len(x) for x in durations)
    bar_w = max(MIN_BAR, width - label_w - service_w - duration_w - 8)

    left, right = _offset(t0 - origin), _offset(t1 - origin)
    out = [
        f"{'SPAN'.ljust(label_w)}  {'SERVICE'.ljust(service_w)}  {'TIME'.rjust(duration_w)}"
        f"  {left}{right.rjust(bar_w + 2 - len(left))}"
    ]
    for (depth, span), label, service, duration in zip(
        rows, labels, services, durations, strict=True
    ):
        start = min(bar_w - 1, max(0, int((span.start_ns - t0) * bar_w / total)))
        end = min(bar_w, max(start + 1, -(-(span.end_ns - t0) * bar_w // total)))
        bar = [" "] * bar_w
        for i in range(start, end):
            bar[i] = "█"
        for event in span.events:
            mark = min(bar_w - 1, max(0, int((event.time_ns - t0) * bar_w / total)))
            bar[mark] = "◆"
        out.append(
            f"{label.ljust(label_w)}  {service.ljust(service_w)}  {duration.rjust(duration_w)}"
            f"  |{''.join(bar)}|"
        )
        indent = "  " * (depth + 1)
        for event in sorted(span.events, key=lambda e: e.time_ns):
            out.append(f"{indent}◆ {_offset(event.time_ns - origin)} {describe_event(event)}")
    return out


def render_waterfall(
    spans: Sequence[SpanRecord], width: int = 120, linked: Sequence[SpanRecord] = ()
) -> str:
    """The waterfall of `spans` (normally one trace) then, if given, the linked spans, on one
    time axis (offsets are from the first span of `spans`)."""
    if not spans:
        return "No spans.\n"
    t0 = min(s.start_ns for s in spans)
    t1 = max(s.end_ns for s in spans)
    window = (min([t0, *(s.start_ns for s in linked)]), max([t1, *(s.end_ns for s in linked)]))
    traces = sorted({s.trace_id for s in spans})
    services = sorted({s.service_name for s in spans if s.service_name})
    lines = [
        f"trace {', '.join(traces)}: {len(spans)} span(s), {format_duration(t1 - t0)}, "
        f"services: {', '.join(services) or '?'}",
        "",
        *_render_rows(spans, width, window, t0),
    ]
    if linked:
        lines += ["", f"Linked spans ({len(linked)}; other traces, joined by span links):", ""]
        lines += _render_rows(linked, width, window, t0, show_eval=True)
    return "\n".join(line.rstrip() for line in lines) + "\n"
