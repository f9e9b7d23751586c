"""Gangs do not starve: a blocked gang holds the instances it waits for (share_stack.py),
single ranks go elsewhere, and the gang starts when its held instances drain; plain first fit
(FIRST_FIT) lets later single ranks take them, for comparison."""

from __future__ import annotations

import pytest

from actors.agent.core import FleetSpec, simulated_nodes
from actors.worker.core.scheduler import new_scheduler
from actors.worker.core.scheduler.share_stack import FIRST_FIT, SharePolicy
from contracts import (
    ClientStatus,
    EvalStatus,
    JobType,
    NodeEligibility,
    Resources,
    Task,
    TaskGroup,
)
from contracts.share import IntRange, ShareRequest
from contracts.state_log import AllocClientUpdate, UpdateAllocsClientStatus

GB = 1024
ONE_BLOCK = ShareRequest(cpu=IntRange(1, 1), memory_mb=IntRange(GB))
WHOLE = ShareRequest(cpu=IntRange(1), memory_mb=IntRange(GB))
DEFAULT = SharePolicy()


def cluster(h, count: int, name: str = "c"):
    spec = FleetSpec(name, count, cpu_mhz=2000, memory_mb=4 * GB, blocks=2, placement="cluster")
    return h.add_nodes(*simulated_nodes(spec))


def run(build, name: str, request: ShareRequest, nodes: int = 1, priority: int = 50):
    group = TaskGroup(
        name,
        count=nodes,
        tasks=(Task("rank", "mock", {"run_for": "1h"}, resources=Resources(0, 0)),),
        share=ShareRequest(**{**_fields(request), "gang": nodes > 1}),
    )
    return build.job(name, group, type=JobType.BATCH, all_at_once=True, priority=priority)


def _fields(request: ShareRequest) -> dict:
    return {f: getattr(request, f) for f in request.__slots__}


def process(h, ev, policy: SharePolicy = DEFAULT):
    from actors.leader.core.inprocess_planner import InProcessPlanner

    planner = InProcessPlanner(h.store)
    scheduler = new_scheduler(ev.type, h.store.snapshot(), planner, new_id=_ids(ev.id))
    scheduler.share_policy = policy
    scheduler.process(ev)
    return planner


def _ids(prefix: str):
    counter = iter(range(10**9))
    return lambda: f"{prefix}-{next(counter)}"


def finish(h, job) -> None:
    updates = tuple(AllocClientUpdate(a.id, ClientStatus.COMPLETE) for a in h.live_allocs(job))
    h.store.commit(UpdateAllocsClientStatus(updates))


def blocked_eval(planner):
    (blocked,) = [e for e in planner.created_evals if e.status is EvalStatus.BLOCKED]
    return blocked


def test_a_blocked_gang_holds_the_instances_it_waits_for(h, build):
    a, b, c = cluster(h, 3)
    first, ev = h.register(run(build, "first", ONE_BLOCK))
    process(h, ev)
    (busy_node,) = {x.node_id for x in h.live_allocs(first)}
    gang, ev = h.register(run(build, "gang", WHOLE, nodes=3))
    planner = process(h, ev)
    assert h.live_allocs(gang) == []
    blocked = blocked_eval(planner)
    # All three are held: the two idle ones and the one with a busy block.
    assert sorted(blocked.reserved_nodes) == sorted(n.id for n in (a, b, c))
    assert h.store.node_holds(busy_node) == (blocked.id,)
    # A later single rank finds every instance held and waits too.
    late, ev = h.register(run(build, "late", ONE_BLOCK))
    planner = process(h, ev)
    assert h.live_allocs(late) == []
    assert planner.evals[-1].failed_tg_allocs["late"].dimension_exhausted == {
        "held for a waiting gang": 3
    }
    # The first run ends: the blocked gang is evaluated again and takes all three.
    finish(h, first)
    process(h, h.store.eval(blocked.id))
    assert len(h.live_allocs(gang)) == 3
    assert h.store.node_holds(busy_node) == ()


def test_single_ranks_backfill_what_the_gang_does_not_hold(h, build):
    """Five instances: two with one busy block, three idle. A gang of 4 (more than are
    idle) holds the three idle ones and one half-busy one; the other half-busy instance is
    not held, so a later single rank backfills its free block."""
    cluster(h, 5)
    x, ev = h.register(run(build, "x", ONE_BLOCK))
    process(h, ev)
    (first,) = {a.node_id for a in h.live_allocs(x)}
    # Best fit would put y next to x: keep x's instance out of reach for y's placement.
    h.update_node(first, scheduling_eligibility=NodeEligibility.INELIGIBLE)
    y, ev = h.register(run(build, "y", ONE_BLOCK))
    process(h, ev)
    h.update_node(first, scheduling_eligibility=NodeEligibility.ELIGIBLE)
    busy_nodes = {a.node_id for j in (x, y) for a in h.live_allocs(j)}
    assert len(busy_nodes) == 2
    _gang, ev = h.register(run(build, "gang", WHOLE, nodes=4))
    planner = process(h, ev)
    held = set(blocked_eval(planner).reserved_nodes)
    assert len(held) == 4 and len(held & busy_nodes) == 1
    late, ev = h.register(run(build, "late", ONE_BLOCK))
    process(h, ev)
    (alloc,) = h.live_allocs(late)
    assert alloc.node_id in busy_nodes - held


def test_first_fit_lets_single_ranks_take_what_a_gang_waits_for(h, build):
    cluster(h, 3)
    _first, ev = h.register(run(build, "first", ONE_BLOCK))
    process(h, ev, FIRST_FIT)
    _gang, ev = h.register(run(build, "gang", WHOLE, nodes=3))
    planner = process(h, ev, FIRST_FIT)
    assert blocked_eval(planner).reserved_nodes == ()
    late, ev = h.register(run(build, "late", ONE_BLOCK))
    process(h, ev, FIRST_FIT)
    assert len(h.live_allocs(late)) == 1  # on an instance the gang needed


@pytest.mark.parametrize(("priority", "placed"), [(50, 0), (80, 1)])
def test_holds_bind_runs_of_the_gang_priority_or_lower(h, build, priority, placed):
    cluster(h, 2)
    _first, ev = h.register(run(build, "first", ONE_BLOCK))
    process(h, ev)
    gang, ev = h.register(run(build, "gang", WHOLE, nodes=2))
    process(h, ev)
    assert h.live_allocs(gang) == []
    late, ev = h.register(run(build, "late", ONE_BLOCK, priority=priority))
    process(h, ev)
    assert len(h.live_allocs(late)) == placed


def test_a_later_gang_does_not_take_an_earlier_gangs_hold(h, build):
    cluster(h, 2, "c1")
    cluster(h, 2, "c2")
    _blocker, ev = h.register(
        run(
            build,
            "blocker",
            ONE_BLOCK,
        )
    )
    process(h, ev)
    big, ev = h.register(run(build, "big", WHOLE, nodes=2))
    # c1 or c2 has a busy instance; `big` fits the other fleet at once.
    process(h, ev)
    assert len(h.live_allocs(big)) == 2
    _waiting, ev = h.register(run(build, "waiting", WHOLE, nodes=2))
    planner = process(h, ev)
    held = set(blocked_eval(planner).reserved_nodes)
    assert len(held) == 2  # the fleet with the busy block
    # A younger gang of one rank would fit on the held idle instance, but yields to it.
    younger, ev = h.register(run(build, "younger", WHOLE, nodes=1))
    process(h, ev)
    assert not {x.node_id for x in h.live_allocs(younger)} & held
