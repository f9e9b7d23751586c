"""Phase timings: recorded only when asked, one reconcile per pass and per group a
feasibility and a ranking phase with their node counts."""

from __future__ import annotations

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.worker.core.scheduler import new_scheduler
from actors.worker.core.scheduler.phases import PhaseLog


def test_phases_of_a_pass(h, build) -> None:
    h.nodes(10)
    job, ev = h.register(build.job("my-job", build.group(count=4)))
    scheduler = new_scheduler(ev.type, h.store.snapshot(), InProcessPlanner(h.store))
    scheduler.phases = PhaseLog()
    scheduler.process(ev)
    phases = {p.name: p for p in scheduler.phases.phases}
    assert set(phases) == {"reconcile", "feasibility", "ranking"}
    assert phases["reconcile"].attributes["place"] == 4
    assert phases["feasibility"].attributes["nodes"] == 10
    assert phases["feasibility"].attributes["feasible"] == 10
    ranking = phases["ranking"]
    assert ranking.attributes["placements"] == 4 and ranking.attributes["nodes_scored"] >= 4
    assert all(p.start_ns <= p.end_ns for p in phases.values())
    assert phases["reconcile"].end_ns <= phases["feasibility"].start_ns
    assert len(h.live_allocs(job)) == 4


def test_nothing_is_recorded_by_default(h, build) -> None:
    h.nodes(3)
    _, ev = h.register(build.job("my-job", build.group(count=2)))
    scheduler = new_scheduler(ev.type, h.store.snapshot(), InProcessPlanner(h.store))
    scheduler.process(ev)
    assert scheduler.phases is None
