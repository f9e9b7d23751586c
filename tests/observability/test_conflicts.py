from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.trace import SpanContext

from observability import conventions as c
from observability.conflicts import GroupRow, conflict_report, render_json, render_text
from observability.jsonl import load_spans
from observability.propagation import extract, inject
from observability.records import SpanRecord
from observability.telemetry import configure

T0 = 1_700_000_000_000_000_000
MS = 1_000_000

Scenario = tuple[list[SpanRecord], dict[str, SpanContext]]


def test_conflicts_are_read_from_the_events(collision: Scenario) -> None:
    spans, contexts = collision
    report = conflict_report(spans)
    assert [(x.eval_id, x.plan_id, x.node_id, x.reason, x.dimension) for x in report.conflicts] == [
        ("e1", "e1#1", "n1", "cpu exhausted", "cpu"),
        ("e1", "e1#1", "n2", "memory exhausted", "memory"),
        ("e3", "e3#1", "n1", "cpu exhausted", "cpu"),
        ("e4", "e4#1", "n3", "node does not exist", "node"),
    ]
    first = report.conflicts[0]
    assert (first.job_id, first.attempt, first.time_ns) == ("web", 1, T0 + 130 * MS)
    assert (first.taken_by_eval_id, first.taken_by_job_id, first.taken_by_plan_id) == (
        "e2",
        "api",
        "e2#1",
    )
    assert first.asked == c.ResourceAmounts(cpu=1000, memory_mb=512)
    assert first.free == c.ResourceAmounts(cpu=300, memory_mb=256)
    assert first.span_id == f"{contexts['e1.apply1'].span_id:016x}"
    assert report.conflicts[-1].taken_by_job_id is None


def test_cost_per_rejected_plan(collision: Scenario) -> None:
    spans, _ = collision
    report = conflict_report(spans)
    costs = {p.plan_id: p for p in report.plans}
    assert sorted(costs) == ["e1#1", "e3#1", "e4#1"]
    # e1#1: submitted at 50 (its plan.submit), eval.schedule ends at 400; attempt 2 followed.
    assert (costs["e1#1"].submitted_ns, costs["e1#1"].retries) == (T0 + 50 * MS, 1)
    assert costs["e1#1"].delay_ns == 350 * MS
    # e3#1: submitted at 310, eval.schedule ends at 700, never retried.
    assert (costs["e3#1"].retries, costs["e3#1"].delay_ns) == (0, 390 * MS)
    # e4#1: no submit or schedule span: from the apply's start (800) to its last span (820).
    assert (costs["e4#1"].submitted_ns, costs["e4#1"].delay_ns) == (T0 + 800 * MS, 20 * MS)
    assert (report.retries, report.evals, report.delay_total_ns) == (1, 3, 760 * MS)


def test_grouped_by_node_job_pair_and_reason(collision: Scenario) -> None:
    spans, _ = collision
    report = conflict_report(spans)
    assert report.by_node == (
        GroupRow(
            ("n1",), conflicts=2, plans=2, retries=1, delay_total_ns=740 * MS, delay_max_ns=390 * MS
        ),
        GroupRow(("n2",), 1, 1, 1, 350 * MS, 350 * MS),
        GroupRow(("n3",), 1, 1, 0, 20 * MS, 20 * MS),
    )
    assert report.by_job_pair == (
        GroupRow(("web", "api"), 2, 1, 1, 350 * MS, 350 * MS),  # two nodes, one plan
        GroupRow(("batch", "web"), 1, 1, 0, 390 * MS, 390 * MS),
        GroupRow(("db", "?"), 1, 1, 0, 20 * MS, 20 * MS),
    )
    assert report.by_reason == (
        GroupRow(("cpu", "cpu exhausted"), 2, 2, 1, 740 * MS, 390 * MS),
        GroupRow(("memory", "memory exhausted"), 1, 1, 1, 350 * MS, 350 * MS),
        GroupRow(("node", "node does not exist"), 1, 1, 0, 20 * MS, 20 * MS),
    )


def test_since_keeps_later_conflicts_but_costs_use_every_span(collision: Scenario) -> None:
    spans, _ = collision
    report = conflict_report(spans, since_ns=T0 + 335 * MS)
    assert [x.plan_id for x in report.conflicts] == ["e3#1", "e4#1"]
    assert [row.key for row in report.by_node] == [("n1",), ("n3",)]
    assert report.by_node[0] == GroupRow(("n1",), 1, 1, 0, 390 * MS, 390 * MS)
    assert report.since_ns == T0 + 335 * MS
    assert conflict_report(spans, since_ns=T0 + 900 * MS).conflicts == ()


def test_text_rendering(collision: Scenario) -> None:
    spans, _ = collision
    text = render_text(conflict_report(spans))
    lines = text.splitlines()
    assert lines[0] == (
        "4 rejected node(s) in 3 plan(s) of 3 eval(s) across 3 job(s); "
        "cost: 1 retry(ies), 760.0ms of eval delay"
    )
    by_node = lines[lines.index("By node") + 1 : lines.index("By node") + 5]
    assert by_node == [
        "NODE  CONFLICTS  PLANS  RETRIES  DELAY TOTAL  DELAY MAX",
        "n1            2      2        1      740.0ms    390.0ms",
        "n2            1      1        1      350.0ms    350.0ms",
        "n3            1      1        0       20.0ms     20.0ms",
    ]
    pair_header = next(i for i, line in enumerate(lines) if line.startswith("REJECTED JOB"))
    assert lines[pair_header + 1].split() == ["web", "api", "2", "1", "1", "350.0ms", "350.0ms"]
    assert lines[pair_header + 3].split()[:2] == ["db", "?"]
    reason_header = next(i for i, line in enumerate(lines) if line.startswith("DIMENSION"))
    assert lines[reason_header + 1].startswith("cpu        cpu exhausted  ")
    # columns line up: every row of a table is as wide as its header or narrower
    header = lines[reason_header]
    assert all(len(line) <= len(header) for line in lines[reason_header + 1 : reason_header + 4])


def test_empty_report() -> None:
    assert render_text(conflict_report([])) == "No plan conflicts.\n"
    since = render_text(conflict_report([], since_ns=T0))
    assert since == "No plan conflicts since 2023-11-14 22:13:20 UTC.\n"


def test_json_rendering(collision: Scenario) -> None:
    spans, _ = collision
    data = json.loads(render_json(conflict_report(spans)))
    assert data["totals"] == {
        "conflicts": 4,
        "plans": 3,
        "evals": 3,
        "retries": 1,
        "delay_total_ns": 760 * MS,
    }
    assert data["by_job_pair"][0] == {
        "job_id": "web",
        "taken_by_job_id": "api",
        "conflicts": 2,
        "plans": 1,
        "retries": 1,
        "delay_total_ns": 350 * MS,
        "delay_max_ns": 350 * MS,
    }
    assert data["by_reason"][0]["dimension"] == "cpu"
    first = data["conflicts"][0]
    assert first["taken_by"] == {"eval_id": "e2", "job_id": "api", "plan_id": "e2#1"}
    assert first["asked"] == {"cpu": 1000, "memory_mb": 512, "disk_mb": 0, "gpus": 0}


def test_same_report_from_jsonl_lines(collision: Scenario, tmp_path: Path) -> None:
    spans, _ = collision
    path = tmp_path / "telemetry" / "spans-leader-l1.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(json.dumps(s.to_json()).encode() + b"\n" for s in spans))
    assert conflict_report(load_spans(tmp_path)) == conflict_report(spans)


def test_report_from_what_configured_actors_wrote(tmp_path: Path) -> None:
    worker = configure("worker", "worker-1", tmp_path, env={})
    leader = configure("leader", "leader-1", tmp_path, env={})
    with worker.tracer.start_as_current_span(
        c.SPAN_EVAL_SCHEDULE, attributes=c.eval_attributes("e1", job_id="web")
    ):
        with worker.tracer.start_as_current_span(
            c.SPAN_PLAN_SUBMIT, attributes=c.plan_attributes("e1", 1, job_id="web")
        ) as submit:
            carrier = inject(submit)
            with leader.tracer.start_as_current_span(
                c.SPAN_PLAN_APPLY, context=extract(carrier)
            ) as apply:
                c.record_node_rejected(
                    apply,
                    node_id="n7",
                    reason="disk exhausted",
                    rejected=c.PlanRef("e1", "web", c.plan_id("e1", 1), attempt=1),
                    asked=c.ResourceAmounts(disk_mb=2000),
                    free=c.ResourceAmounts(disk_mb=500),
                    taken_by=c.PlanRef("e9", "logs", "e9#3"),
                )
        with worker.tracer.start_as_current_span(
            c.SPAN_PLAN_SUBMIT, attributes=c.plan_attributes("e1", 2, job_id="web")
        ):
            pass
    worker.shutdown()
    leader.shutdown()

    report = conflict_report(load_spans(tmp_path))
    (conflict,) = report.conflicts
    assert (conflict.node_id, conflict.dimension, conflict.taken_by_job_id) == (
        "n7",
        "disk",
        "logs",
    )
    assert report.by_job_pair[0].key == ("web", "logs")
    assert report.retries == 1
    (cost,) = report.plans
    assert cost.delay_ns is not None and cost.delay_ns > 0
