"""A task group's feasible ring (ring.py) and the placement walk over it (`GroupStack.select`).

Proven here:
- the ring grows in chunks of 32, 64, 128, ... (capped at MAX_CHUNK) only when a walk runs
  past its end, so a one-allocation job on 2,000 nodes checks (and shuffles) one chunk; a
  stack's first chunk is one walk's worth (its limit and the options it may set aside);
- a group that fits nowhere walks the whole ring, and `failure_metric` then accounts for
  every node: filtered by a constraint, or exhausted by a named dimension;
- constraint-filtered nodes are counted exactly once, as the ring reaches them;
- many placements grow the ring without moving earlier entries, so exhaustion marks stay
  valid: no placement lands on a full node and no node ends over capacity;
- `fill()` completes a ring and an empty base is complete from the start.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from actors.leader.core.inprocess_planner import InProcessPlanner
from actors.worker.core.scheduler import new_scheduler
from actors.worker.core.scheduler.context import EvalContext, PlanBuilder
from actors.worker.core.scheduler.feasible import (
    EvalEligibility,
    FilterMetrics,
    GroupFeasibility,
)
from actors.worker.core.scheduler.node_set import ShuffledNodes
from actors.worker.core.scheduler.ring import FIRST_CHUNK, MAX_CHUNK, FeasibleRing
from actors.worker.core.scheduler.select import AFFINITY_SPREAD_LIMIT, MAX_SKIP, service_limit
from actors.worker.core.scheduler.stack import GroupStack
from contracts import EvalStatus, Job, Node, ReservedResources, Spread

LINUX = {"kernel.name": "linux"}
WINDOWS = {"kernel.name": "windows"}
LINUX_ONLY = "${attr.kernel.name} = linux"


def context(h: Any, job: Job) -> EvalContext:
    snap = h.store.snapshot()
    return EvalContext(snap, PlanBuilder("eval-1", "", job, snap.latest_index()), job)


def shuffled_stack(
    ctx: EvalContext, job: Job, nodes: tuple[Node, ...] | list[Node], seed: int = 11
) -> tuple[GroupStack, ShuffledNodes]:
    base = ShuffledNodes(nodes, seed)
    by_dc = dict(Counter(n.datacenter for n in nodes))
    return GroupStack(ctx, job, job.task_groups[0], base, by_dc, batch=False), base


def linux_only(build: Any, job_id: str, *groups: Any) -> Job:
    job: Job = build.job(
        job_id, *groups, constraints=(build.constraint("${attr.kernel.name}", "linux", "="),)
    )
    return job


def mixed_nodes(h: Any, build: Any) -> tuple[Node, ...]:
    """300 nodes: 90 filtered by the linux constraint, 120 too small in cpu and 90 too small
    in memory for a 1000 MHz / 512 MB ask."""
    nodes: tuple[Node, ...] = h.add_nodes(
        *(build.node(f"win-{i}", node_class="win", attributes=WINDOWS) for i in range(90)),
        *(build.node(f"cpu-{i}", cpu=500, attributes=LINUX) for i in range(120)),
        *(build.node(f"mem-{i}", memory_mb=128, attributes=LINUX) for i in range(90)),
    )
    return nodes


# -- a small prefix is enough -----------------------------------------------------------------


def test_one_allocation_checks_one_chunk_of_2000_nodes(h: Any, build: Any) -> None:
    h.nodes(2000)
    job, ev = h.register(build.job("web", build.group(count=1)))
    planner = InProcessPlanner(h.store)
    scheduler: Any = new_scheduler(ev.type, h.store.snapshot(), planner)

    scheduler.process(ev)

    build.assert_eval(planner, EvalStatus.COMPLETE)
    [alloc] = h.live_allocs(job)
    cache = scheduler._attempt_cache
    ring = cache.rings["web"]
    first_chunk = service_limit(2000) + MAX_SKIP  # one walk's worth: 14 of 2,000 nodes
    assert ring.pulled == first_chunk and len(ring.entries) == first_chunk
    assert not ring.complete
    assert cache.nodes.drawn() == first_chunk  # only the checked prefix was shuffled
    assert len(cache.nodes) == 2000
    assert alloc.node_id in {n.id for n in cache.nodes.window(0, first_chunk)}


def test_one_select_walks_the_limit_within_the_first_chunk(h: Any, build: Any) -> None:
    nodes = h.nodes(2000)
    job = build.job("web", build.group(count=1))
    stack, base = shuffled_stack(context(h, job), job, nodes)

    option = stack.select()

    assert option is not None
    assert stack.ring is not None
    assert stack.ring.pulled == stack.limit + MAX_SKIP == base.drawn()
    assert stack.limit == service_limit(2000) == 11
    assert stack.last_walked == stack.limit  # every fresh node scores > 0: limit reached
    walked = {n.id for n in base.window(0, stack.limit)}
    assert option.node.id in walked
    assert stack.cursor == stack.limit


# -- a group that fits nowhere ----------------------------------------------------------------


def test_fits_nowhere_walks_the_whole_ring_and_counts_every_node(h: Any, build: Any) -> None:
    nodes = mixed_nodes(h, build)
    job = linux_only(build, "web", build.group(count=1, cpu=1000, memory_mb=512))
    stack, base = shuffled_stack(context(h, job), job, nodes)

    assert stack.select() is None

    ring = stack.ring
    assert ring is not None and ring.complete
    assert ring.pulled == 300 and base.drawn() == 300
    assert len(ring.entries) == 210
    assert stack.last_walked == 210
    metric = stack.failure_metric()
    assert metric.nodes_in_pool == 300
    assert metric.nodes_available == {"dc1": 300}
    assert metric.nodes_evaluated == 300  # 210 walked + 90 filtered before the ring
    assert metric.nodes_filtered == 90
    assert metric.constraint_filtered == {LINUX_ONLY: 90}
    assert metric.class_filtered == {"win": 90}
    assert metric.nodes_exhausted == 210
    assert metric.dimension_exhausted == {"cpu": 120, "memory": 90}

    # A second failing select walks the same ring again and reports the same totals.
    assert stack.select() is None
    assert stack.failure_metric() == metric


def test_fits_nowhere_through_the_scheduler(h: Any, build: Any) -> None:
    mixed_nodes(h, build)
    job, ev = h.register(linux_only(build, "web", build.group(count=3, cpu=1000, memory_mb=512)))

    planner = h.process(ev)

    assert h.live_allocs(job) == []
    metric = planner.evals[0].failed_tg_allocs["web"]
    assert metric.nodes_in_pool == 300
    assert metric.nodes_evaluated == 300
    assert metric.nodes_filtered == 90
    assert metric.constraint_filtered == {LINUX_ONLY: 90}
    assert metric.nodes_exhausted == 210
    assert metric.dimension_exhausted == {"cpu": 120, "memory": 90}
    assert metric.coalesced_failures == 2


# -- filter metrics as the ring grows ---------------------------------------------------------


def test_filtered_nodes_are_counted_once_as_the_ring_reaches_them(h: Any, build: Any) -> None:
    nodes = mixed_nodes(h, build)
    job = linux_only(build, "web", build.group(count=1))
    base = ShuffledNodes(nodes, 3)
    metrics = FilterMetrics()
    ring = FeasibleRing(base, GroupFeasibility(job, job.task_groups[0], EvalEligibility()), metrics)

    steps = 0
    while not ring.complete:
        ring.extend()
        steps += 1
        prefix = base.window(0, ring.pulled)
        windows = [n for n in prefix if n.attributes == WINDOWS]
        assert metrics.nodes_filtered == len(windows)
        assert metrics.constraint_filtered == ({LINUX_ONLY: len(windows)} if windows else {})
        assert [e[0].id for e in ring.entries] == [n.id for n in prefix if n not in windows]

    assert steps == 4  # 32 + 64 + 128 + 76
    assert metrics.nodes_filtered == 90
    assert metrics.class_filtered == {"win": 90}
    assert len(ring.entries) == 210
    ring.fill()
    ring.extend()  # a complete ring checks nothing again
    assert metrics.nodes_filtered == 90 and ring.pulled == 300


def test_stack_filter_metrics_follow_the_ring(h: Any, build: Any) -> None:
    nodes = mixed_nodes(h, build)
    # Everything that passes the constraint fits this small ask.
    job = linux_only(build, "web", build.group(count=1, cpu=100, memory_mb=64))
    stack, base = shuffled_stack(context(h, job), job, nodes, seed=5)

    assert stack.select() is not None
    ring = stack.ring
    assert ring is not None and not ring.complete
    in_prefix = sum(1 for n in base.window(0, ring.pulled) if n.attributes == WINDOWS)
    assert stack.filter_metrics is ring.metrics
    assert stack.filter_metrics.nodes_filtered == in_prefix < 90

    ring.fill()
    assert stack.filter_metrics.nodes_filtered == 90
    assert stack.filter_metrics.constraint_filtered == {LINUX_ONLY: 90}


# -- many placements --------------------------------------------------------------------------


def test_many_placements_grow_the_ring_and_keep_exhaustion_marks_valid(h: Any, build: Any) -> None:
    """400 placements of 500 MHz on 150 nodes holding 2 and 150 holding 8: binpacking fills
    the small ones first, so they are marked exhausted while the ring is still growing."""
    nodes = h.add_nodes(
        *(build.node(f"small-{i}", cpu=1000) for i in range(150)),
        *(build.node(f"big-{i}", cpu=4000) for i in range(150)),
    )
    capacity = {n.id: n.node_resources.cpu for n in nodes}
    job = build.job("web", build.group(count=400, cpu=500, memory_mb=256))
    ctx = context(h, job)
    stack, _ = shuffled_stack(ctx, job, nodes, seed=21)
    placed: Counter[str] = Counter()
    entries_seen: list[str] = []
    pulled_at: list[int] = []

    for _ in range(400):
        full_before = (
            {stack.ring.entries[p][0].id for p in stack.exhausted}
            if stack.ring is not None
            else set()
        )
        option = stack.select()
        assert option is not None
        ring = stack.ring
        assert ring is not None
        node_id = option.node.id
        assert node_id not in full_before  # a node marked full is never chosen
        placed[node_id] += 1
        assert placed[node_id] * 500 <= capacity[node_id]
        # Earlier entries keep their positions as the ring grows.
        current = [e[0].id for e in ring.entries]
        assert current[: len(entries_seen)] == entries_seen
        entries_seen = current
        pulled_at.append(ring.pulled)
        # Every mark names a node that really cannot take one more allocation.
        for position, dimension in stack.exhausted.items():
            entry = ring.entries[position]
            assert dimension == "cpu"
            assert ctx.load(entry[0].id).cpu + 500 > entry[1]

    assert sum(placed.values()) == 400
    assert pulled_at[0] == stack.limit + MAX_SKIP
    assert max(pulled_at) == 300 and stack.ring is not None and stack.ring.complete
    grown_at = next(i for i, p in enumerate(pulled_at) if p > pulled_at[0])
    assert 0 < grown_at < 400
    assert len(set(pulled_at)) >= 3  # it grew in more than one step
    assert stack.exhausted  # small nodes did fill up
    assert all(placed[n.id] * 500 <= n.node_resources.cpu for n in nodes)
    full_small = [i for i in range(150) if placed[f"small-{i}"] == 2]
    assert full_small


def test_many_placements_through_the_scheduler(h: Any, build: Any) -> None:
    nodes = h.add_nodes(
        *(build.node(f"small-{i}", cpu=1000) for i in range(150)),
        *(build.node(f"big-{i}", cpu=4000) for i in range(150)),
    )
    job, ev = h.register(build.job("web", build.group(count=400, cpu=500, memory_mb=256)))
    planner = InProcessPlanner(h.store)
    scheduler: Any = new_scheduler(ev.type, h.store.snapshot(), planner)

    scheduler.process(ev)

    build.assert_eval(planner, EvalStatus.COMPLETE)
    assert len(planner.plans) == 1 and not planner.results[0].rejected_nodes
    live = h.live_allocs(job)
    assert len(live) == 400
    per_node = Counter(a.node_id for a in live)
    for node in nodes:
        assert per_node[node.id] * 500 <= node.node_resources.cpu
        usage = h.store.node_usage(node.id)
        assert usage.cpu <= node.node_resources.cpu
    ring = scheduler._attempt_cache.rings["web"]
    assert ring.complete and ring.pulled == 300


# -- FeasibleRing directly --------------------------------------------------------------------


def _feasibility(build: Any) -> GroupFeasibility:
    job = build.job("web", build.group(count=1))
    return GroupFeasibility(job, job.task_groups[0], EvalEligibility())


def test_chunks_double_up_to_the_cap(build: Any) -> None:
    node = build.node("n")
    ring = FeasibleRing([node] * 20_000, _feasibility(build), FilterMetrics())
    sizes = []
    while not ring.complete:
        before = ring.pulled
        ring.extend()
        sizes.append(ring.pulled - before)
        assert len(ring.entries) == ring.pulled

    assert sizes[:8] == [32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert FIRST_CHUNK == 32 and MAX_CHUNK == 4096
    assert sizes[8:] == [4096, 4096, 20_000 - 16_352]
    assert sum(sizes) == 20_000


def test_a_given_first_chunk_then_doubles(build: Any) -> None:
    node = build.node("n")
    ring = FeasibleRing([node] * 100, _feasibility(build), FilterMetrics(), first_chunk=5)
    sizes = []
    while not ring.complete:
        before = ring.pulled
        ring.extend()
        sizes.append(ring.pulled - before)

    assert sizes == [5, 10, 20, 40, 25]


@pytest.mark.parametrize(
    ("batch", "spread", "limit"),
    [(False, False, service_limit(2000)), (True, False, 2), (False, True, AFFINITY_SPREAD_LIMIT)],
)
def test_a_stack_checks_one_walks_worth_first(
    h: Any, build: Any, batch: bool, spread: bool, limit: int
) -> None:
    """Service, batch and spread groups: the first chunk is the limit plus what a walk may
    set aside, so a one-allocation group's first walk needs no second chunk."""
    nodes = h.nodes(2000)
    spreads = (Spread("${node.datacenter}", 100),) if spread else ()
    job = build.job("web", build.group(count=1, spreads=spreads))
    base = ShuffledNodes(nodes, 3)
    stack = GroupStack(context(h, job), job, job.task_groups[0], base, {"dc1": 2000}, batch=batch)

    assert stack.select() is not None

    assert stack.limit == limit
    assert stack.ring is not None and stack.ring.pulled == limit + MAX_SKIP == base.drawn()


def test_chunk_pulls_over_a_shuffled_base(build: Any) -> None:
    nodes = [build.node(f"n{i}") for i in range(1000)]
    base = ShuffledNodes(nodes, 8)
    ring = FeasibleRing(base, _feasibility(build), FilterMetrics())
    pulled = []
    while not ring.complete:
        ring.extend()
        pulled.append(ring.pulled)
        assert base.drawn() == ring.pulled

    assert pulled == [32, 96, 224, 480, 992, 1000]
    # The same order as the plain list of that permutation (the slicing path).
    plain = FeasibleRing(list(ShuffledNodes(nodes, 8)), _feasibility(build), FilterMetrics())
    plain.fill()
    assert [e[0].id for e in plain.entries] == [e[0].id for e in ring.entries]


def test_fill_completes_the_ring(build: Any) -> None:
    nodes = [build.node(f"n{i}") for i in range(100)]
    ring = FeasibleRing(ShuffledNodes(nodes, 1), _feasibility(build), FilterMetrics())
    ring.extend()
    assert (ring.pulled, ring.complete) == (32, False)

    ring.fill()

    assert (ring.pulled, ring.complete) == (100, True)
    assert sorted(e[0].id for e in ring.entries) == sorted(n.id for n in nodes)
    ring.fill()
    assert ring.pulled == 100 and len(ring.entries) == 100


def test_an_empty_base_is_complete_at_once(build: Any) -> None:
    bases: list[list[Node] | ShuffledNodes] = [[], ShuffledNodes([], 4)]
    for base in bases:
        ring = FeasibleRing(base, _feasibility(build), FilterMetrics())
        assert ring.complete and ring.entries == [] and ring.pulled == 0
        ring.extend()
        ring.fill()
        assert ring.entries == [] and ring.pulled == 0


def test_an_empty_pool_fails_at_once(h: Any, build: Any) -> None:
    job = build.job("web", build.group(count=1))
    stack, _ = shuffled_stack(context(h, job), job, ())

    assert stack.select() is None
    assert stack.ring is not None and stack.ring.complete
    metric = stack.failure_metric()
    assert (metric.nodes_in_pool, metric.nodes_evaluated, metric.nodes_exhausted) == (0, 0, 0)
    assert "no nodes in the job's datacenters and node pool" in metric.reasons()


def test_entries_hold_capacity_less_reserved_and_reciprocals(build: Any) -> None:
    roomy = build.node(
        "roomy",
        cpu=4000,
        memory_mb=8192,
        disk_mb=1000,
        reserved=ReservedResources(cpu=1000, memory_mb=192, disk_mb=100),
    )
    empty = build.node(
        "empty", cpu=500, memory_mb=256, reserved=ReservedResources(cpu=500, memory_mb=256)
    )
    ring = FeasibleRing([roomy, empty], _feasibility(build), FilterMetrics())
    ring.fill()

    assert ring.entries[0] == (roomy, 3000, 8000, 900, 1 / 3000, 1 / 8000)
    assert ring.entries[1] == (empty, 0, 0, empty.node_resources.disk_mb, 0.0, 0.0)
