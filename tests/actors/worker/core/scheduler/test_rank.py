"""Score components, ported from Nomad's rank_test.go and spread_test.go.

Nomad scores through an iterator chain; drover computes the same components in
`GroupStack.select` and keeps Nomad's rule that the final score is the mean of the components
that apply. Where a Nomad test isolates one iterator, the component function is checked
directly and then the whole stack is checked on the same scenario.
"""

from __future__ import annotations

import dataclasses

import pytest

from actors.worker.core.scheduler.context import EvalContext, PlanBuilder
from actors.worker.core.scheduler.rank import (
    RESCHEDULE_PENALTY,
    job_anti_affinity,
    node_affinity,
    score_fit_binpack,
    score_fit_spread,
)
from actors.worker.core.scheduler.spread import SpreadScorer, even_spread_boost
from actors.worker.core.scheduler.stack import GroupStack
from contracts import (
    Affinity,
    AllocatedResources,
    Allocation,
    ReservedResources,
    Spread,
    SpreadTarget,
)


def context(h, job):
    snap = h.store.snapshot()
    return EvalContext(snap, PlanBuilder("eval-1", "", job, snap.latest_index()), job)


def stack_for(ctx, job, nodes, *, algorithm="binpack", batch=False):
    by_dc: dict[str, int] = {}
    for n in nodes:
        by_dc[n.datacenter] = by_dc.get(n.datacenter, 0) + 1
    return GroupStack(
        ctx, job, job.task_groups[0], list(nodes), by_dc, batch=batch, algorithm=algorithm
    )


def planned(job, node_id, n, group="web", prefix="planned"):
    ask = job.task_groups[0].combined_resources()
    res = AllocatedResources(ask.cpu, ask.memory_mb)
    return [
        Allocation(
            id=f"{prefix}-{node_id}-{i}",
            node_id=node_id,
            job_id=job.id,
            task_group=group,
            name=f"{job.id}.{group}[{i}]",
            allocated_resources=res,
        )
        for i in range(n)
    ]


def plan_alloc(ctx, alloc, node=None):
    """What the scheduler does for a placement: charge the node's proposed load, then add
    the alloc to the plan (`EvalContext.place` leaves the charging to the stack)."""
    load = ctx.load(alloc.node_id)
    load.cpu += alloc.allocated_resources.cpu
    load.memory_mb += alloc.allocated_resources.memory_mb
    ctx.place(alloc, node)


# -- bin packing ------------------------------------------------------------------------------


def test_binpack_score_function():
    """TestBinPackIterator_NoExistingAlloc's numbers: a perfect fit is 1.0; a 4096/4096 node
    with 1024/1024 reserved asked for 1024/1024 is 20 - 2*10^(2/3) over 18."""
    assert score_fit_binpack(1024, 1024, 1024, 1024) == pytest.approx(1.0)
    score = score_fit_binpack(4096 - 1024, 4096 - 1024, 1024, 1024)
    assert score == pytest.approx((20 - 2 * 10 ** (2 / 3)) / 18)
    assert score == pytest.approx(0.595, abs=1e-3)
    assert 0.50 <= score <= 0.60
    # An empty node scores 0 (20 - 2*10 clamped), and nothing goes below 0 or above 1.
    assert score_fit_binpack(1000, 1000, 0, 0) == 0.0
    assert score_fit_binpack(0, 0, 0, 0) == pytest.approx(1.0)


def test_spread_fit_is_worst_fit():
    """ScoreFitSpread: total - 2 over 18, so emptier nodes score higher."""
    assert score_fit_spread(1024, 1024, 1024, 1024) == 0.0
    assert score_fit_spread(1000, 1000, 0, 0) == pytest.approx(1.0)
    assert score_fit_spread(3072, 3072, 1024, 1024) == pytest.approx((2 * 10 ** (2 / 3) - 2) / 18)
    assert score_fit_spread(4000, 4000, 500, 500) > score_fit_spread(4000, 4000, 3000, 3000)


def test_binpack_iterator_no_existing_alloc(h, build):
    """TestBinPackIterator_NoExistingAlloc through the stack: perfect fit 1.0, the reserved
    node ~0.595, the over-full node dropped."""
    perfect = build.node("perfect", cpu=1024, memory_mb=1024)
    roomy = build.node(
        "roomy", cpu=4096, memory_mb=4096, reserved=ReservedResources(cpu=1024, memory_mb=1024)
    )
    overfull = build.node(
        "overfull", cpu=1024, memory_mb=1024, reserved=ReservedResources(cpu=512, memory_mb=512)
    )
    h.add_nodes(perfect, roomy, overfull)
    job = build.job("my-job", build.group(count=1, cpu=1024, memory_mb=1024))

    scores = {}
    for node in (perfect, roomy, overfull):
        option = stack_for(context(h, job), job, [node]).select()
        scores[node.id] = option.final_score if option else None
    assert scores["perfect"] == pytest.approx(1.0)
    assert scores["roomy"] == pytest.approx(0.5955, abs=1e-3)
    assert scores["overfull"] is None

    stack = stack_for(context(h, job), job, [overfull, roomy, perfect])
    option = stack.select()
    assert option.node.id == "perfect"
    assert option.final_score == pytest.approx(1.0)
    metric = stack.failure_metric()
    assert metric.nodes_exhausted == 1
    assert metric.dimension_exhausted == {"cpu": 1}


def test_binpack_counts_existing_and_planned_allocs(h, build):
    """TestBinPackIterator_ExistingAlloc / _PlannedAlloc: usage from state and from the plan
    both count, and stops in the plan free room."""
    h.add_nodes(
        build.node("n1", cpu=2048, memory_mb=2048), build.node("n2", cpu=2048, memory_mb=2048)
    )
    other = build.job("other", build.group(count=1, cpu=2048, memory_mb=2048))
    h.add_allocs(build.alloc(other, "n1", 0))
    job = build.job("my-job", build.group(count=1, cpu=1024, memory_mb=1024))

    ctx = context(h, job)
    option = stack_for(ctx, job, [h.store.node("n1"), h.store.node("n2")]).select()
    assert option.node.id == "n2"  # n1 is full from state

    ctx = context(h, job)
    existing = h.store.alloc(h.store.allocs_by_node("n1")[0].id)
    ctx.stop(existing, dataclasses.replace(existing, desired_status="stop"))
    option = stack_for(ctx, job, [h.store.node("n1")]).select()
    assert option is not None and option.node.id == "n1"  # the planned stop freed it


# -- job anti-affinity ------------------------------------------------------------------------


def test_job_anti_affinity_function():
    """TestJobAntiAffinity_PlannedAlloc: 2 planned with count 4 gives -0.75; none gives 0."""
    assert job_anti_affinity(2, 4) == -0.75
    assert job_anti_affinity(0, 4) == 0.0
    assert job_anti_affinity(1, 2) == -1.0
    assert job_anti_affinity(3, 0) == 0.0


def test_job_anti_affinity_planned_alloc(h, build):
    h.add_nodes(build.node("n1"), build.node("n2"))
    job = build.job("my-job", build.group(count=4))
    ctx = context(h, job)
    for alloc in planned(job, "n1", 2):
        plan_alloc(ctx, alloc)
    n1, n2 = h.store.node("n1"), h.store.node("n2")

    crowded = stack_for(ctx, job, [n1]).select()
    # binpack with the two planned allocs plus this one, and the -0.75 component: mean of two.
    binpack = score_fit_binpack(4000, 8192, 3 * 500, 3 * 256)
    assert crowded.final_score == pytest.approx((binpack - 0.75) / 2)

    # A planned alloc of another group or job is no collision.
    ctx = context(h, job)
    for alloc in planned(job, "n2", 2, group="other"):
        plan_alloc(ctx, alloc)
    alone = stack_for(ctx, job, [n2]).select()
    assert alone.final_score == pytest.approx(score_fit_binpack(4000, 8192, 3 * 500, 3 * 256))


# -- rescheduling penalty ---------------------------------------------------------------------


def test_node_anti_affinity_penalty_nodes(h, build):
    """TestNodeAntiAffinity_PenaltyNodes: -1 on a penalised node, nothing elsewhere."""
    assert RESCHEDULE_PENALTY == -1.0
    h.add_nodes(build.node("n1"), build.node("n2"))
    job = build.job("my-job", build.group(count=1))
    binpack = score_fit_binpack(4000, 8192, 500, 256)

    option = stack_for(context(h, job), job, [h.store.node("n1")]).select(frozenset({"n1"}))
    assert option.final_score == pytest.approx((binpack - 1.0) / 2)
    option = stack_for(context(h, job), job, [h.store.node("n2")]).select(frozenset({"n1"}))
    assert option.final_score == pytest.approx(binpack)


# -- node affinity ----------------------------------------------------------------------------


def test_node_affinity_function(build):
    node = build.node("n1", datacenter="dc1", attributes={"rack": "r1"}, meta={"tier": "gold"})
    affinities = (
        Affinity("${node.datacenter}", "dc1", "=", 100),
        Affinity("${attr.rack}", "r1", "=", -50),
        Affinity("${meta.tier}", "silver", "=", 50),
    )
    assert node_affinity(affinities, node) == pytest.approx((100 - 50) / 200)
    assert node_affinity((), node) == 0.0
    assert node_affinity((Affinity("${node.datacenter}", "dc2", "=", 50),), node) == 0.0
    assert node_affinity((Affinity("${attr.rack}", "r1", "=", -50),), node) == -1.0


def test_node_affinity_component_is_always_added(h, build):
    """NodeAffinityIterator appends its score even when it is 0, diluting binpack."""
    h.add_nodes(build.node("n1", datacenter="dc1"), build.node("n2", datacenter="dc2"))
    group = build.group(count=1, affinities=(Affinity("${node.datacenter}", "dc1", "=", 100),))
    job = build.job("my-job", group)
    binpack = score_fit_binpack(4000, 8192, 500, 256)

    option = stack_for(context(h, job), job, [h.store.node("n1")]).select()
    assert option.final_score == pytest.approx((binpack + 1.0) / 2)
    option = stack_for(context(h, job), job, [h.store.node("n2")]).select()
    assert option.final_score == pytest.approx(binpack / 2)

    # Both nodes seen (the affinity limit is 100): the matching one wins.
    both = stack_for(context(h, job), job, [h.store.node("n2"), h.store.node("n1")])
    assert both.select().node.id == "n1"


# -- spread -----------------------------------------------------------------------------------


def _spread_cluster(h, build, dcs):
    nodes = [build.node(f"n{i}", datacenter=dc) for i, dc in enumerate(dcs)]
    h.add_nodes(*nodes)
    return nodes


def test_spread_iterator_single_attribute(h, build):
    """TestSpreadIterator_SingleAttribute: 80% dc1 over count 10, 2 allocs in dc1 already:
    dc1 boost (8 - 3)/8 = 0.625, dc2 (implicit 20%) boost (2 - 1)/2 = 0.5."""
    nodes = _spread_cluster(h, build, ["dc1", "dc2", "dc1", "dc1"])
    spread = Spread("${node.datacenter}", 100, (SpreadTarget("dc1", 80),))
    job = build.job("my-job", build.group(count=10, spreads=(spread,)))
    h.register(job)
    job = h.store.job("default", "my-job")
    h.add_allocs(build.alloc(job, "n0", 0), build.alloc(job, "n2", 1))

    ctx = context(h, job)
    scorer = SpreadScorer(ctx, job, job.task_groups[0])
    scores = {n.id: scorer.score(n) for n in nodes}
    assert scores == pytest.approx({"n0": 0.625, "n1": 0.5, "n2": 0.625, "n3": 0.625})

    # Plan more in dc1 until it meets its desired 8 (7 used + this one): no boost there.
    # Allocs of another group or job do not count.
    for alloc in planned(job, "n3", 5):
        ctx.place(alloc, nodes[3])
    ctx.place(planned(job, "n0", 1, group="other", prefix="x")[0], nodes[0])
    scores = {n.id: scorer.score(n) for n in nodes}
    assert scores == pytest.approx({"n0": 0.0, "n1": 0.5, "n2": 0.0, "n3": 0.0})


def test_spread_iterator_multiple_attributes_are_weighted(h, build):
    """TestSpreadIterator_MultipleAttributes: each boost is scaled by weight / sum(weights)."""
    dcs = ["dc1", "dc2", "dc1", "dc1"]
    racks = ["r1", "r1", "r2", "r2"]
    nodes = [
        build.node(f"n{i}", datacenter=dc, attributes={"rack": rack})
        for i, (dc, rack) in enumerate(zip(dcs, racks, strict=True))
    ]
    h.add_nodes(*nodes)
    spreads = (
        Spread("${node.datacenter}", 100, (SpreadTarget("dc1", 60), SpreadTarget("dc2", 40))),
        Spread("${attr.rack}", 50, (SpreadTarget("r1", 40), SpreadTarget("r2", 60))),
    )
    job = build.job("my-job", build.group(count=10, spreads=spreads))
    h.register(job)
    job = h.store.job("default", "my-job")
    h.add_allocs(build.alloc(job, "n0", 0), build.alloc(job, "n2", 1))

    scorer = SpreadScorer(context(h, job), job, job.task_groups[0])
    dc1 = {"used": 2, "desired": 6}
    dc2 = {"used": 0, "desired": 4}
    r1 = {"used": 1, "desired": 4}
    r2 = {"used": 1, "desired": 6}

    def boost(x, weight):
        return (x["desired"] - (x["used"] + 1)) / x["desired"] * weight / 150

    expected = {
        "n0": boost(dc1, 100) + boost(r1, 50),
        "n1": boost(dc2, 100) + boost(r1, 50),
        "n2": boost(dc1, 100) + boost(r2, 50),
        "n3": boost(dc1, 100) + boost(r2, 50),
    }
    assert {n.id: scorer.score(n) for n in nodes} == pytest.approx(expected)


def test_spread_value_without_target_is_penalised(h, build):
    """Full targets (no implicit remainder): a value with no target gets -1, and so does a
    node without the attribute."""
    nodes = [
        build.node("n0", datacenter="dc1"),
        build.node("n1", datacenter="dc3"),
        build.node("n2", datacenter="dc1", attributes={"rack": "r1"}),
    ]
    h.add_nodes(*nodes)
    spread = Spread("${node.datacenter}", 50, (SpreadTarget("dc1", 50), SpreadTarget("dc2", 50)))
    job = build.job("my-job", build.group(count=4, spreads=(spread,)))
    scorer = SpreadScorer(context(h, job), job, job.task_groups[0])
    assert scorer.score(nodes[1]) == -1.0
    assert scorer.score(nodes[0]) == pytest.approx((2 - 1) / 2)

    rack = Spread("${attr.rack}", 50)
    job = build.job("my-job", build.group(count=4, spreads=(rack,)))
    scorer = SpreadScorer(context(h, job), job, job.task_groups[0])
    assert scorer.score(nodes[0]) == -1.0


def test_even_spread_boost():
    """Nomad's evenSpreadScoreBoost."""
    assert even_spread_boost({}, "dc1") == 0.0  # nothing placed yet
    counts = {"dc1": 2, "dc2": 1}
    assert even_spread_boost(counts, "dc3") == 1.0  # unused value: maximum boost
    assert even_spread_boost(counts, "dc2") == 1.0  # the minimum: (max - cur) / min
    assert even_spread_boost(counts, "dc1") == -1.0  # above the minimum: (min - cur) / min
    assert even_spread_boost({"dc1": 2, "dc2": 2}, "dc1") == -1.0  # even: maximum penalty
    assert even_spread_boost({"dc1": 4, "dc2": 2}, "dc2") == 1.0
    assert even_spread_boost({"dc1": 4, "dc2": 2, "dc3": 3}, "dc3") == pytest.approx(-0.5)


def test_even_spread_places_evenly(h, build):
    """TestSpreadIterator_EvenSpread end to end: no targets, 3 DCs, count 9 -> 3/3/3."""
    dcs = ["dc1", "dc1", "dc2", "dc2", "dc3", "dc3"]
    h.add_nodes(*(build.node(f"n{i}", datacenter=dc) for i, dc in enumerate(dcs)))
    spread = Spread("${node.datacenter}", 100)
    job, ev = h.register(build.job("my-job", build.group(count=9, spreads=(spread,))))
    h.process(ev)
    per_dc: dict[str, int] = {}
    for alloc in h.job_allocs(job):
        dc = h.store.node(alloc.node_id).datacenter
        per_dc[dc] = per_dc.get(dc, 0) + 1
    assert per_dc == {"dc1": 3, "dc2": 3, "dc3": 3}


def test_spread_targets_end_to_end(h, build):
    """70/30 over two DCs with count 10 lands 7/3 although binpack alone would stack."""
    h.add_nodes(*(build.node(f"a{i}", datacenter="dc1") for i in range(5)))
    h.add_nodes(*(build.node(f"b{i}", datacenter="dc2") for i in range(5)))
    spread = Spread("${node.datacenter}", 100, (SpreadTarget("dc1", 70), SpreadTarget("dc2", 30)))
    job, ev = h.register(build.job("my-job", build.group(count=10, spreads=(spread,))))
    h.process(ev)
    dcs = sorted(h.store.node(a.node_id).datacenter for a in h.job_allocs(job))
    assert dcs.count("dc1") == 7 and dcs.count("dc2") == 3
