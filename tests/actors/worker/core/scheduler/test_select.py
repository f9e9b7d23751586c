"""The limit and max-score stages (Nomad's select.go / select_test.go).

drover fuses Nomad's LimitIterator and MaxScoreIterator into the stack's walk over the ring
(`GroupStack.select`), so these tests drive the stack with nodes whose scores are chosen
through their capacity (bin packing) and the reschedule penalty (which makes a score <= 0).
One documented difference: Nomad's LimitIterator hands back the options it skipped
(score <= 0) on the very next `Next()` call, so they take the place of later source nodes;
drover uses skipped options only when the source runs out before the limit is reached (the
behaviour the reference describes, and the one asserted here).
"""

from __future__ import annotations

import math

import pytest

from actors.worker.core.scheduler.context import EvalContext, PlanBuilder
from actors.worker.core.scheduler.select import (
    AFFINITY_SPREAD_LIMIT,
    BATCH_LIMIT,
    MAX_SKIP,
    SKIP_SCORE_THRESHOLD,
    placement_limit,
    service_limit,
)
from actors.worker.core.scheduler.stack import GroupStack
from contracts import Affinity, Allocation, Spread

ASK_CPU, ASK_MEM = 500, 256  # the builders' default group ask


def nodes(build, n):
    return [build.node(f"n{i}") for i in range(n)]


def _capacity_for(binpack: float) -> tuple[int, int]:
    """Node capacity at which the default ask bin-packs to `binpack` (20 - 2*10^free = 18*b)."""
    free = min(math.log10(10.0 - 9.0 * binpack), 0.999)
    return round(ASK_CPU / (1.0 - free)), round(ASK_MEM / (1.0 - free))


def run(h, build, limit, scores):
    """One placement over nodes n0, n1, ... scoring `scores` in ring order. A score <= 0 is
    made by the reschedule penalty: (binpack - 1) / 2, so it must lie in [-0.5, 0]."""
    ns, penalised = [], set()
    for i, score in enumerate(scores):
        binpack = score if score > 0 else 2.0 * score + 1.0
        cpu, mem = _capacity_for(binpack)
        ns.append(build.node(f"n{i}", cpu=cpu, memory_mb=mem))
        if score <= 0:
            penalised.add(f"n{i}")
    h.add_nodes(*ns)
    group = build.group(count=1)
    job = build.job("my-job", group)
    snap = h.store.snapshot()
    ctx = EvalContext(snap, PlanBuilder("e", "", job, snap.latest_index()), job)
    stack = GroupStack(ctx, job, group, ns, {"dc1": len(ns)}, batch=False)
    stack.limit = limit
    option = stack.select(frozenset(penalised))
    return (None if option is None else option.node.id), stack.last_walked


def test_constants():
    assert (SKIP_SCORE_THRESHOLD, MAX_SKIP, BATCH_LIMIT, AFFINITY_SPREAD_LIMIT) == (0.0, 3, 2, 100)


def test_limit_iterator_respects_limit(h, build):
    """TestLimitIterator: only `limit` options are looked at; the best of them wins."""
    best, walked = run(h, build, 2, [0.1, 0.2, 0.9])
    assert walked == 2
    assert best == "n1"


def test_max_score_first_wins_ties(h, build):
    best, _ = run(h, build, 3, [0.5, 0.5, 0.5])
    assert best == "n0"


def test_limit_iterator_score_threshold_skips_low_scores(h, build):
    """TestLimitIterator_ScoreThreshold, "Skips one low scoring node" and "Skips maxSkip":
    options <= 0 are set aside and do not use up the limit."""
    best, walked = run(h, build, 2, [-0.5, 0.0, 0.5, 0.6, 0.9])
    assert walked == 4  # two skipped, two counted
    assert best == "n3"


def test_limit_iterator_max_skip_reached(h, build):
    """Only MAX_SKIP options are set aside; the next low one counts against the limit."""
    best, walked = run(h, build, 2, [-0.5, -0.4, -0.3, -0.2, 0.5, 0.9])
    assert walked == 5
    assert best == "n4"


def test_limit_iterator_uses_skipped_when_source_runs_out(h, build):
    """All low scores: the skipped options are used after all, best first."""
    best, walked = run(h, build, 2, [-0.45, -0.1, -0.5])
    assert walked == 3
    assert best == "n1"


def test_limit_iterator_good_option_beats_skipped(h, build):
    best, _ = run(h, build, 3, [-0.45, 0.2])
    assert best == "n1"


def test_limit_iterator_skipped_fill_only_up_to_limit(h, build):
    """With one counted option and limit 2, one skipped option is considered, in skip order:
    the better later skips are never looked at."""
    best, walked = run(h, build, 2, [-0.45, -0.1, -0.3, -0.5])
    assert walked == 4
    assert best == "n0"  # n3 (-0.5, counted) vs the first skipped n0 (-0.45)


def test_empty_source(h, build):
    best, walked = run(h, build, 2, [])
    assert (best, walked) == (None, 0)


@pytest.mark.parametrize(
    ("node_count", "limit"),
    [
        (0, 2),
        (1, 2),
        (2, 2),
        (4, 2),
        (5, 3),
        (8, 3),
        (9, 4),
        (10, 4),
        (1000, 10),
        (1024, 10),
        (1025, 11),
    ],
)
def test_service_limit(node_count, limit):
    """max(2, ceil(log2(n)))."""
    assert service_limit(node_count) == limit


def test_placement_limit():
    assert placement_limit(True, 1000, 10, False) == 2  # batch: power of two choices
    assert placement_limit(False, 1000, 10, False) == 10
    assert placement_limit(False, 1000, 10, True) == 100  # affinity or spread
    assert placement_limit(True, 1000, 10, True) == 100
    assert placement_limit(False, 1000, 250, True) == 250  # count beyond 100


def _stack(h, build, group, n, *, batch=False, best_at=None):
    """A stack over n roomy nodes; `best_at` makes node n<best_at> a perfect binpack fit."""
    ns = nodes(build, n)
    if best_at is not None:
        ns[best_at] = build.node(f"n{best_at}", cpu=500, memory_mb=256)
    h.add_nodes(*ns)
    job = build.job("my-job", group)
    snap = h.store.snapshot()
    ctx = EvalContext(snap, PlanBuilder("e", "", job, snap.latest_index()), job)
    return GroupStack(ctx, job, group, ns, {"dc1": n}, batch=batch)


@pytest.mark.parametrize(("best_at", "found"), [(3, True), (4, False)])
def test_stack_looks_at_limit_nodes(h, build, best_at, found):
    """Ten nodes: a service placement scores ceil(log2 10) = 4 of them and keeps the best,
    so a perfect fit in fifth position is never seen."""
    stack = _stack(h, build, build.group(count=1), 10, best_at=best_at)
    assert stack.limit == 4
    assert (stack.select().node.id == f"n{best_at}") is found


@pytest.mark.parametrize(("best_at", "found"), [(1, True), (2, False)])
def test_stack_batch_limit(h, build, best_at, found):
    """Batch: power of two choices."""
    stack = _stack(h, build, build.group(count=1), 10, batch=True, best_at=best_at)
    assert stack.limit == 2
    assert (stack.select().node.id == f"n{best_at}") is found


def test_stack_affinity_and_spread_limits(h, build):
    group = build.group(count=1, affinities=(Affinity("${node.datacenter}", "dc1", "=", 50),))
    assert _stack(h, build, group, 10).limit == 100
    group = build.group(count=150, spreads=(Spread("${node.datacenter}", 50),))
    assert _stack(h, build, group, 10).limit == 150


def test_successive_placements_walk_on(h, build):
    """Each placement continues from where the previous one stopped (StaticIterator offset),
    so equal nodes are used in turn instead of piling on the first."""
    stack = _stack(h, build, build.group(count=4), 8)
    assert stack.limit == 3
    chosen = []
    for i in range(4):
        option = stack.select()
        chosen.append(option.node.id)
        stack.ctx.place(
            Allocation(id=f"a{i}", node_id=option.node.id, job_id="my-job", task_group="web"),
            option.node,
        )
    # n0..n2 scored (tie: the first wins), then n3..n5, ...; planned allocs then repel
    # (job anti-affinity), so four different nodes.
    assert chosen[:2] == ["n0", "n3"]
    assert len(set(chosen)) == 4
