from __future__ import annotations

from opentelemetry.trace import SpanContext

from observability.records import SpanRecord
from observability.waterfall import (
    find_trace,
    find_trace_for_eval,
    linked_spans,
    render_waterfall,
)

Scenario = tuple[list[SpanRecord], dict[str, SpanContext]]


def _hex(context: SpanContext) -> str:
    return f"{context.span_id:016x}"


def test_find_trace_for_eval_gives_the_whole_trace(collision: Scenario) -> None:
    spans, contexts = collision
    trace = find_trace_for_eval(spans, "e1")
    assert [s.span_id for s in trace] == [
        _hex(contexts[label])
        for label in ("e1.schedule", "e1.submit1", "e1.apply1", "e1.submit2", "e1.apply2")
    ]
    assert {s.trace_id for s in trace} == {f"{contexts['e1.schedule'].trace_id:032x}"}
    assert find_trace(spans, trace[0].trace_id.upper()) == trace
    assert find_trace_for_eval(spans, "nope") == []


def test_linked_spans_both_ways(collision: Scenario) -> None:
    spans, contexts = collision
    e1 = find_trace_for_eval(spans, "e1")
    e3 = find_trace_for_eval(spans, "e3")
    # e3's apply links to e1's apply #2 (the plan that took its capacity).
    assert [s.span_id for s in linked_spans(spans, e1)] == [_hex(contexts["e3.apply1"])]
    assert [s.span_id for s in linked_spans(spans, e3)] == [_hex(contexts["e1.apply2"])]


def test_waterfall_rows_tree_services_durations_and_bars(collision: Scenario) -> None:
    spans, _ = collision
    trace = find_trace_for_eval(spans, "e1")
    text = render_waterfall(trace, width=110)
    lines = text.splitlines()
    assert lines[0] == (
        f"trace {trace[0].trace_id}: 5 span(s), 400.0ms, services: drover-leader, drover-worker"
    )
    assert lines[2].startswith("SPAN") and lines[2].endswith("+400.0ms")
    assert lines[2].split()[:4] == ["SPAN", "SERVICE", "TIME", "+0"]
    rows = [line for line in lines[3:] if line.count("|") == 2]
    names = [row.split("  drover-")[0].rstrip() for row in rows]
    assert names == [
        "eval.schedule",
        "  plan.submit #1",
        "    plan.apply #1 (partial)",
        "  plan.submit #2",
        "    plan.apply #2 (committed)",
    ]
    services = [row.split("|")[0].split()[-2] for row in rows]
    worker, leader = "drover-worker/worker-1", "drover-leader/leader-1"
    assert services == [worker, worker, leader, worker, leader]
    assert [row.split("|")[0].split()[-1] for row in rows] == [
        "400.0ms",
        "100.0ms",
        "20.0ms",
        "60.0ms",
        "30.0ms",
    ]
    bars = [row.split("|")[1] for row in rows]
    width = len(bars[0])
    assert all(len(bar) == width for bar in bars)
    assert bars[0] == "█" * width  # the root covers the whole trace
    # plan.submit #2 runs 200-260 ms of 400: its bar starts half way.
    start = bars[3].index("█")
    assert abs(start - width // 2) <= 1
    assert bars[3].rstrip().endswith("█") and len(bars[3].rstrip()) <= int(width * 0.66)
    assert "◆" in bars[2]  # the rejection marked on plan.apply #1


def test_waterfall_lists_events_under_their_span(collision: Scenario) -> None:
    spans, _ = collision
    lines = render_waterfall(find_trace_for_eval(spans, "e1"), width=110).splitlines()
    apply_row = next(i for i, line in enumerate(lines) if "plan.apply #1" in line)
    assert lines[apply_row + 1] == (
        "      ◆ +130.0ms node n1 rejected: cpu exhausted; asked cpu=1000 mem=512MB disk=0MB, "
        "free cpu=300 mem=256MB disk=0MB; taken by job api (eval e2, plan e2#1)"
    )
    assert lines[apply_row + 2].startswith("      ◆ +131.0ms node n2 rejected: memory exhausted")
    assert "plan.submit #2" in lines[apply_row + 3]


def test_linked_section(collision: Scenario) -> None:
    spans, _ = collision
    trace = find_trace_for_eval(spans, "e1")
    text = render_waterfall(trace, width=110, linked=linked_spans(spans, trace))
    main, linked = text.split("Linked spans (1; other traces, joined by span links):")
    assert "<eval e3>" not in main
    linked_lines = [line for line in linked.splitlines() if line.strip()]
    assert linked_lines[1].startswith("plan.apply #1 <eval e3>  drover-leader/leader-1  20.0ms")
    # the same time axis as the trace: e3's apply (330-350 ms) sits near the right end
    bar = linked_lines[1].split("|")[1]
    assert bar.index("█") > len(bar) * 0.75
    assert "◆ +340.0ms node n1 rejected: cpu exhausted" in linked_lines[2]
    assert "taken by job web (eval e1, plan e1#2)" in linked_lines[2]


def test_orphans_become_roots_and_empty_input() -> None:
    orphan = SpanRecord("a" * 32, "1" * 16, "f" * 16, "process drover:evals", 0, 10)
    root = SpanRecord("a" * 32, "2" * 16, None, "eval.enqueue", 5, 6, service_name="drover-api")
    text = render_waterfall([orphan, root], width=80)
    rows = [line for line in text.splitlines() if "|" in line]
    assert rows[0].startswith("process drover:evals")
    assert rows[1].startswith("eval.enqueue")  # not indented: no parent in the set
    assert "?" in rows[0] and "drover-api" in rows[1]
    assert render_waterfall([]) == "No spans.\n"


def test_narrow_width_keeps_a_minimum_bar(collision: Scenario) -> None:
    spans, _ = collision
    text = render_waterfall(find_trace_for_eval(spans, "e1"), width=20)
    bars = [line.split("|")[1] for line in text.splitlines() if line.count("|") == 2]
    assert bars and all(len(bar) == 10 for bar in bars)
