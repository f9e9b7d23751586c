"""Tracing through the real actors (Ray, the embedded Redis): one trace per evaluation across
every actor, plan conflicts with their attribution, the conflict report and spans flushed on a
clean shutdown. (An exporter that fails never breaking scheduling: test_shutdown.py, on the
system whose bounded stop with that failing collector it tests.)

The actors export JSON lines into the data directory (the default without an OTLP endpoint);
the test reads them back after asking every actor to flush. Plans are made to collide with the
leader's plan hold (a failpoint), not by waiting for chance collisions. The two tests read
what one system showed (a module fixture runs it once), so they pass alone and in any order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import ray

from actors.agent.core import FleetSpec
from contracts import EvalStatus, Evaluation, Job, Resources, Task, TaskGroup
from launch.cli import main as cli
from launch.system import DroverSystem, SystemConfig
from observability import SpanRecord, load_spans
from observability import conventions as c
from observability.conflicts import conflict_report
from observability.waterfall import find_trace_for_eval

T = TypeVar("T")


def crowd_job(job_id: str, count: int = 120, datacenter: str = "dc1") -> Job:
    task = Task(
        name="t",
        driver="mock",
        config={"run_for": "1h"},
        resources=Resources(cpu=400, memory_mb=256),
    )
    return Job(
        id=job_id,
        name=job_id,
        datacenters=(datacenter,),
        task_groups=(TaskGroup("g", count, tasks=(task,)),),
    )


def wait_until(predicate: Callable[[], T | None], what: str, timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def collide(system: DroverSystem) -> tuple[list[str], list[Evaluation]]:
    """Two 120-allocation jobs on an empty pool of 200 slots (20 nodes of ten): the leader
    holds the first plan until the other worker's is in (its plan hold, the failpoint that
    makes plans concurrent), so both were computed on the same snapshot; each fits alone,
    both cannot, and the second applied is partially rejected, on every run. Returns the
    job ids and their evaluations, once settled."""
    client = system.client()
    jobs = ["crowd-a", "crowd-b"]
    ray.get(system.leader.hold_plans.remote(2, 60.0, jobs))
    try:
        client.run_jobs([crowd_job(job_id) for job_id in jobs])

        def settled() -> list[Evaluation] | None:
            evals = [
                e for j in jobs for e in ray.get(system.leader.evals_by_job.remote("default", j))
            ]
            done = len(evals) >= len(jobs) and all(
                e.status is not EvalStatus.PENDING for e in evals
            )
            return evals if done else None

        evals = wait_until(settled, "the evaluations to settle", timeout_s=90)
    finally:
        ray.get(system.leader.release_plans.remote())  # a no-op once both were applied
    return jobs, evals


def spans_once_finished(
    system: DroverSystem, telemetry: Path, evals: list[Evaluation]
) -> list[SpanRecord]:
    """Every span recorded so far, once the last ones of each evaluation are among them: the
    worker's `eval.ack` (sent after the eval completed at the leader) and, where the eval
    placed, the agents' `alloc.start` (recorded when they read the committed plan)."""
    placing = {
        a.eval_id
        for job_id in {e.job_id for e in evals}
        for a in ray.get(system.leader.allocs_by_job.remote("default", job_id))
    }
    complete = [e.id for e in evals if e.status is EvalStatus.COMPLETE]

    def finished() -> list[SpanRecord] | None:
        system.flush_telemetry()
        spans = load_spans(telemetry)
        for eval_id in complete:
            names = {s.name for s in find_trace_for_eval(spans, eval_id)}
            if c.SPAN_EVAL_ACK not in names:
                return None
            if eval_id in placing and c.SPAN_ALLOC_START not in names:
                return None
        return spans

    return wait_until(finished, "every evaluation's last spans")


@dataclass
class Traced:
    """What the module's system showed, for its two tests."""

    data_dir: Path
    jobs: list[str]
    evals: list[Evaluation]
    stats: dict[str, Any]
    spans: list[SpanRecord]  # every actor's, once every evaluation's last ones were in
    placing: set[str]  # the evaluations that placed allocations
    flushed_eval_id: str  # of the job run after the last flush, just before the stop


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Traced:
    """One system for both tests (a start costs seconds), run once: two crowd jobs collide
    on the crowd fleet (dc1) and every actor's spans are flushed and read back; then one job
    runs on the other fleet (dc2, out of the crowd's way) and the system is stopped at once,
    with no flush asked for after that job: its spans reach the files only if stop flushes
    them."""
    data_dir = tmp_path_factory.mktemp("tracing") / "traced"
    config = SystemConfig(
        data_dir=data_dir,
        workers=2,
        num_cpus=2,
        fleets=[
            FleetSpec("crowd", 20, 4000, 8192, disk_mb=10_000),
            FleetSpec("few", 2, 4000, 8192, datacenter="dc2"),
        ],
    )
    with DroverSystem(config) as system:
        client = system.client()
        jobs, evals = collide(system)
        stats = client.leader_stats()
        spans = spans_once_finished(system, data_dir / "telemetry", evals)
        placing = {
            a.eval_id
            for job_id in jobs
            for a in ray.get(system.leader.allocs_by_job.remote("default", job_id))
        }
        flushed = client.run_job(crowd_job("flushed", count=1, datacenter="dc2")).eval_id
        client.wait_for_allocs("flushed", count=1, status="running")
    return Traced(data_dir, jobs, evals, stats, spans, placing, flushed)


def test_one_trace_per_eval_crosses_every_actor_and_conflicts_are_attributed(
    traced: Traced, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    data_dir, jobs, evals, stats, spans = (
        traced.data_dir,
        traced.jobs,
        traced.evals,
        traced.stats,
        traced.spans,
    )
    assert stats["held_plans"] == 2 and stats["partial_plans"] >= 1, stats

    for ev in evals:
        if ev.status is not EvalStatus.COMPLETE:
            continue
        trace = find_trace_for_eval(spans, ev.id)
        assert len({s.trace_id for s in trace}) == 1, "one trace per evaluation"
        names = {s.name for s in trace}
        assert {
            c.SPAN_EVAL_ENQUEUE,
            c.SPAN_EVAL_SCHEDULE,
            c.SPAN_RECONCILE,
            c.SPAN_EVAL_ACK,
        } <= names
        services = {s.service_name for s in trace}
        assert {"drover-leader", "drover-broker", "drover-worker"} <= services
        if ev.id in traced.placing:  # it placed: plan, apply, start
            assert {c.SPAN_PLAN_SUBMIT, c.SPAN_PLAN_APPLY, c.SPAN_ALLOC_START} <= names
            assert "drover-agent" in services
        by_id = {s.span_id: s for s in trace}
        applies = [s for s in trace if s.name == c.SPAN_PLAN_APPLY]
        assert all(by_id[s.parent_id].name == c.SPAN_PLAN_SUBMIT for s in applies)

    rejected = [
        (span, event)
        for span in spans
        for event in span.events
        if event.name == c.EVENT_NODE_REJECTED
    ]
    assert len(rejected) == stats["rejected_nodes"]
    eval_jobs = {e.id: e.job_id for e in evals}
    for span, event in rejected:
        assert span.name == c.SPAN_PLAN_APPLY
        attrs = event.attributes
        assert attrs[c.REJECT_REASON] and attrs[c.NODE_ID]
        assert (
            attrs["drover.ask.cpu"] > attrs["drover.free.cpu"] or attrs[c.REJECT_DIMENSION] != "cpu"
        )
    attributed = [e.attributes for _, e in rejected if c.CONFLICT_EVAL_ID in e.attributes]
    assert attributed, "a rejection names the committed plan that took the capacity"
    for attrs in attributed:
        assert eval_jobs[attrs[c.CONFLICT_EVAL_ID]] == attrs[c.CONFLICT_JOB_ID]
        assert attrs[c.CONFLICT_JOB_ID] != attrs[c.JOB_ID]

    # Conflicting plans are linked: a rejected plan's apply links to the taker's apply.
    applies = {(s.trace_id, s.span_id): s for s in spans if s.name == c.SPAN_PLAN_APPLY}
    links = [
        applies[(link.trace_id, link.span_id)]
        for span, _ in rejected
        for link in span.links
        if (link.trace_id, link.span_id) in applies
    ]
    assert links and all(taker.attributes[c.JOB_ID] in jobs for taker in links)

    report = conflict_report(spans)
    assert len(report.conflicts) == stats["rejected_nodes"]
    assert sum(row.conflicts for row in report.by_reason) == stats["rejected_nodes"]
    assert len(report.plans) == stats["partial_plans"]  # every partially rejected plan
    # A rejected plan costs a retry when its eval submitted another plan afterwards (not when
    # nothing else fitted: the eval then blocks without one).
    submits = [s for s in spans if s.name == c.SPAN_PLAN_SUBMIT]
    for cost in report.plans:
        later = [
            s
            for s in submits
            if s.attributes.get(c.EVAL_ID) == cost.eval_id
            and s.attributes.get(c.PLAN_ID) != cost.plan_id
            and s.start_ns > cost.submitted_ns
        ]
        assert cost.retries == (1 if later else 0), cost
    assert sum(p.retries for p in report.plans) <= stats["partial_plans"]

    monkeypatch.chdir(data_dir.parent)
    assert cli(["trace", "conflicts", "-data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert f"{stats['rejected_nodes']} rejected node(s)" in out and "By job pair" in out
    assert cli(["trace", "show", "-data-dir", str(data_dir), "-width", "120", evals[0].id]) == 0
    assert c.SPAN_EVAL_SCHEDULE in capsys.readouterr().out


def test_spans_are_flushed_on_clean_shutdown(traced: Traced) -> None:
    # No flush was asked after the job ran: the batch processors' delay (5 s) had not
    # passed; shutdown did it.
    trace = find_trace_for_eval(load_spans(traced.data_dir / "telemetry"), traced.flushed_eval_id)
    assert {c.SPAN_EVAL_ENQUEUE, c.SPAN_EVAL_SCHEDULE, c.SPAN_PLAN_APPLY} <= {s.name for s in trace}
