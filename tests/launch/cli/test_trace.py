"""`drover trace conflicts|show` over the JSON lines that configured actors wrote into a data
directory: the data directory and `-since` options, `-json`, eval ID prefixes, `-width`, and
one-line errors for a missing directory, a bad duration and an unknown or ambiguous eval."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from observability import PlanRef, ResourceAmounts, configure, record_node_rejected
from observability import conventions as c
from observability.propagation import extract, inject

Cli = Callable[..., tuple[int, str, str]]
HOUR_NS = 3600 * 10**9
OLD_EVAL, NEW_EVAL, OTHER_EVAL = "e0aa1111-old", "e1bb2222-new", "e1bb3333-other"


def write_spans(data_dir: Path) -> None:
    """Two rejected plans, two hours apart, as a worker and the leader export them; and a
    third eval whose ID shares a prefix with the second."""
    worker = configure("worker", "worker-1", data_dir, env={})
    leader = configure("leader", "leader", data_dir, env={})
    now = time.time_ns()
    for eval_id, job_id, taker, at in (
        (OLD_EVAL, "cron", "batch", now - 2 * HOUR_NS),
        (NEW_EVAL, "web", "api", now - 10**9),
    ):
        schedule = worker.tracer.start_span(
            c.SPAN_EVAL_SCHEDULE,
            start_time=at,
            attributes=c.eval_attributes(eval_id, job_id=job_id, trigger="job-register"),
        )
        submit = worker.tracer.start_span(
            c.SPAN_PLAN_SUBMIT,
            context=extract(inject(schedule)),
            start_time=at + 1000,
            attributes=c.plan_attributes(eval_id, 1, job_id=job_id),
        )
        apply = leader.tracer.start_span(
            c.SPAN_PLAN_APPLY,
            context=extract(inject(submit)),
            start_time=at + 2000,
            attributes=c.plan_attributes(eval_id, 1, job_id=job_id),
        )
        record_node_rejected(
            apply,
            node_id="n1",
            reason="cpu exhausted",
            rejected=PlanRef(eval_id, job_id, c.plan_id(eval_id, 1), attempt=1),
            asked=ResourceAmounts(cpu=1000),
            free=ResourceAmounts(cpu=200),
            taken_by=PlanRef("e9", taker, "e9#1"),
            timestamp_ns=at + 2500,
        )
        apply.end(end_time=at + 3000)
        submit.end(end_time=at + 4000)
        schedule.end(end_time=at + 5000)
    worker.tracer.start_span(
        c.SPAN_EVAL_SCHEDULE, attributes=c.eval_attributes(OTHER_EVAL, job_id="db")
    ).end()
    worker.shutdown()
    leader.shutdown()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    write_spans(tmp_path / "data")
    return tmp_path / "data"


def test_conflicts_read_the_data_dir_and_since_keeps_the_recent_ones(
    cli: Cli, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = cli("trace", "conflicts", "-data-dir", str(data_dir))
    assert code == 0 and out.startswith("2 rejected node(s) in 2 plan(s) of 2 eval(s)")
    code, out, _ = cli("trace", "conflicts", "-since", "1h", "-data-dir", str(data_dir))
    assert code == 0 and out.startswith("1 rejected node(s) in 1 plan(s) of 1 eval(s)")
    assert "web" in out and "cron" not in out

    code, out, _ = cli("trace", "conflicts", "-json", "-since", "1h", "-data-dir", str(data_dir))
    report = orjson.loads(out)
    assert code == 0 and [(x["node_id"], x["job_id"]) for x in report["conflicts"]] == [
        ("n1", "web")
    ]

    monkeypatch.chdir(data_dir.parent)  # the default: ./.drover-data
    data_dir.rename(data_dir.parent / ".drover-data")
    code, out, _ = cli("trace", "conflicts")
    assert code == 0 and out.startswith("2 rejected node(s)")


def test_conflicts_errors_are_one_line(cli: Cli, data_dir: Path, tmp_path: Path) -> None:
    code, _, err = cli("trace", "conflicts", "-since", "soon", "-data-dir", str(data_dir))
    assert (code, err) == (1, "drover: -since: expected a duration such as 10m or 1h, got 'soon'\n")
    empty = tmp_path / "empty"
    code, _, err = cli("trace", "conflicts", "-data-dir", str(empty))
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"drover: no telemetry in {empty / 'telemetry'}: start the agent")


def test_show_finds_an_eval_by_unique_prefix_and_fits_the_width(cli: Cli, data_dir: Path) -> None:
    code, by_id, _ = cli("trace", "show", "-data-dir", str(data_dir), "-width", "90", OLD_EVAL)
    assert code == 0
    code, by_prefix, _ = cli("trace", "show", "-data-dir", str(data_dir), "-width", "90", "e0")
    assert code == 0 and by_prefix == by_id
    bars = [row for row in by_id.splitlines() if row.endswith("|")]
    for name in (c.SPAN_EVAL_SCHEDULE, c.SPAN_PLAN_SUBMIT, c.SPAN_PLAN_APPLY):
        assert any(name in row for row in bars), name
    assert "node n1 rejected: cpu exhausted" in by_id
    assert max(len(row) for row in bars) <= 90
    _, wide, _ = cli("trace", "show", "-data-dir", str(data_dir), "-width", "160", OLD_EVAL)
    assert max(len(row) for row in wide.splitlines() if row.endswith("|")) > 90

    code, _, err = cli("trace", "show", "-data-dir", str(data_dir), "e1bb")
    assert (code, err) == (1, 'drover: eval prefix "e1bb" is ambiguous: 2 matches\n')
    code, _, err = cli("trace", "show", "-data-dir", str(data_dir), "zzzz")
    assert (code, err) == (1, f'drover: no spans for evaluation "zzzz" in {data_dir}\n')
