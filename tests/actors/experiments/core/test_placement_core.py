"""The core-placed node pool: the real scheduler makes fragmentation and blocked allocations
real, NodePool's autoscaling rules (provisioning delay, fleet limit, idle removal, scale-in
order) hold, and without fragmentation it runs as NodePool does."""

from __future__ import annotations

import pytest

from actors.experiments.core.capacity import StartDelay
from actors.experiments.core.cluster import ClusterModel, ClusterStats, NodePool
from actors.experiments.core.demand import from_callable, from_series
from actors.experiments.core.placement_core import CorePool, NodeShape, _CoreRun
from actors.experiments.core.policies import NomadPolicy, nomad_policy_dict
from actors.experiments.core.simulator import RunResult, simulate
from actors.experiments.core.state import SimState
from contracts.resources import Resources

FLAT = from_callable(lambda t: 25.0, span_s=200)
ASK = Resources(cpu=1300, memory_mb=256)
HALF_LOADED = NodeShape(cpu_mhz=4000, memory_mb=8192, load_cpu=2000)  # 2000 MHz free
EVEN_ASK = Resources(cpu=1000, memory_mb=1024)
EVEN = (NodeShape(2000, 4096),)  # two allocations fit a node exactly


class Hold:
    interval_s = 10.0
    wakes_on_demand = False

    def __init__(self, plan: dict[float, int] | None = None) -> None:
        self.plan = plan or {}

    def decide(self, now: float, state: SimState) -> int | None:
        return self.plan.get(now)


def ready_at(result: RunResult, t: float) -> tuple[int, int]:
    (sample,) = [s for s in result.samples if s.time_s == t]
    return sample.ready, sample.count


def nomad() -> NomadPolicy:
    body = nomad_policy_dict(
        query="rps_per_alloc", strategy="target-value", settings={"target": 10}, cooldown="20s"
    )
    return NomadPolicy.from_dict(body, min=0, max=20)


DEMAND = from_series([0, 50, 300, 500], [3, 60, 0, 20], span_s=1800)


def test_fragmentation_blocks_what_free_room_says_fits() -> None:
    pool = CorePool(ask=ASK, shapes=(HALF_LOADED,), initial_nodes=2, max_nodes=2)
    run = pool.start(0)
    assert isinstance(run, _CoreRun)
    run.scale(0.0, 3, lambda: 0.0)
    # 4000 MHz free in all >= 3 x 1300, but no node has room for a second 1300
    assert run.count == 3 and run.ready(0.0) == 2 and run.blocked == 1
    on = [run.node_of[a] for a in run.alloc_ids]
    assert sorted(on) == [1, 2]  # one on each node, as the core placed them
    stats = run.stats()
    assert stats is not None and stats.blocked_allocs == 1
    # NodePool with a slot count from the free room (2 per node) places all three
    core = simulate(FLAT, Hold({0.0: 3}), per_alloc_rps=10, cluster=pool)
    slots = NodePool(allocs_per_node=2, initial_nodes=2, max_nodes=2)
    naive = simulate(FLAT, Hold({0.0: 3}), per_alloc_rps=10, cluster=slots)
    assert ready_at(core, 10) == (2, 3) and ready_at(naive, 10) == (3, 3)
    assert core.cluster is not None and naive.cluster is not None
    assert core.cluster.blocked_alloc_hours == pytest.approx(200 / 3600)
    assert naive.cluster.blocked_alloc_hours == 0


def test_fit_per_node_is_what_the_core_places_on_a_fresh_node() -> None:
    for shape in (HALF_LOADED, NodeShape(4000, 8192), NodeShape(8000, 1000, 0, 300)):
        run = CorePool(ask=ASK, shapes=(shape,), initial_nodes=1, max_nodes=1).start(0)
        run.scale(0.0, 10, lambda: 0.0)
        assert run.ready(0.0) == shape.fit(ASK)
    assert (HALF_LOADED.fit(ASK), NodeShape(8000, 1000, 0, 300).fit(ASK)) == (1, 2)


def test_readiness_waits_for_the_node() -> None:
    pool = CorePool(EVEN_ASK, EVEN, node_delay_s=60)
    result = simulate(FLAT, Hold({0.0: 3}), start_delay=10, per_alloc_rps=10, cluster=pool)
    assert ready_at(result, 50) == (0, 3) and ready_at(result, 60) == (3, 3)
    assert result.ledger.violation_requests == 25 * 60
    assert result.cluster == ClusterStats(
        node_hours=2 * 200 / 3600, peak_nodes=2, nodes_provisioned=2
    )
    slow = simulate(FLAT, Hold({0.0: 3}), start_delay=90, per_alloc_rps=10, cluster=pool)
    assert ready_at(slow, 80) == (0, 3) and ready_at(slow, 90) == (3, 3)


def test_the_fleet_limit_blocks_and_blocked_hours_are_exact() -> None:
    # node 1 holds one allocation (half loaded), node 2 three: shapes cycle
    shapes = (HALF_LOADED, NodeShape(4000, 8192))
    pool = CorePool(ask=ASK, shapes=shapes, initial_nodes=1, max_nodes=2, node_delay_s=30)
    result = simulate(FLAT, Hold({0.0: 5, 100.0: 2}), per_alloc_rps=10, cluster=pool)
    # 1 ready at 0, 3 more at 30 on the new node, 1 blocked until the scale-in at 100
    assert ready_at(result, 20) == (1, 5) and ready_at(result, 30) == (4, 5)
    assert ready_at(result, 110) == (2, 2)
    stats = result.cluster
    assert stats is not None
    assert stats.blocked_alloc_hours == pytest.approx(100 / 3600)
    assert stats.blocked_allocs == 1 and stats.peak_nodes == 2 and stats.nodes_provisioned == 1
    assert stats.node_hours == pytest.approx(2 * 200 / 3600)
    # 25 rps on 10 until 30 s, on 40 until 100, on 20 after
    assert result.ledger.violation_requests == pytest.approx(15 * 30 + 5 * 100)


def test_scale_in_takes_blocked_then_latest_ready_and_idle_nodes_leave_the_store() -> None:
    pool = CorePool(EVEN_ASK, EVEN, initial_nodes=1, min_nodes=1, node_delay_s=50, node_idle_s=100)
    run = pool.start(2)
    assert isinstance(run, _CoreRun)
    run.scale(0.0, 6, lambda: 0.0)  # 4 waiting for two provisioning nodes
    assert (run.ready(0.0), run.blocked, len(run.nodes)) == (2, 0, 3)
    assert run.store.node_count() == 1  # the scheduler sees ready nodes only
    run.step(0.0, 50.0)
    assert run.ready(50.0) == 6 and run.store.node_count() == 3
    first = set(run.alloc_ids[:2])
    run.scale(60.0, 2, lambda: 0.0)
    assert set(run.alloc_ids) == first  # the latest ready went
    assert len(list(run.store.allocs())) == 2  # finished allocations are collected
    run.step(60.0, 160.0)
    stats = run.stats()
    assert stats is not None and stats.nodes_removed == 2 and run.store.node_count() == 1


def test_without_fragmentation_it_runs_as_node_pool() -> None:
    delays = StartDelay.sampled([1, 7, 30, 90])

    def run(pool: ClusterModel) -> RunResult:
        return simulate(
            DEMAND,
            nomad(),
            start_delay=delays,
            per_alloc_rps=10,
            seed=3,
            cluster=pool,
        )

    core = run(CorePool(EVEN_ASK, EVEN, max_nodes=3, node_delay_s=45, node_idle_s=120))
    slots = run(NodePool(2, max_nodes=3, node_delay_s=45, node_idle_s=120))
    assert core.actions == slots.actions and core.samples == slots.samples
    assert core.cluster == slots.cluster


def test_a_nomad_policy_run_is_deterministic_for_a_seed() -> None:
    shapes = (HALF_LOADED, NodeShape(4000, 8192), NodeShape(6000, 2048, 500, 512))
    pool = CorePool(ask=ASK, shapes=shapes, max_nodes=2, node_delay_s=45, node_idle_s=120)

    def run(seed: int) -> tuple[object, ...]:
        r = simulate(
            DEMAND,
            nomad(),
            start_delay=StartDelay.sampled([1, 7, 30, 90]),
            per_alloc_rps=10,
            seed=seed,
            cluster=pool,
        )
        return (r.actions, r.ledger.segments, r.cluster)

    first = run(5)
    assert first == run(5)
    stats = first[2]
    assert isinstance(stats, ClusterStats)
    assert stats.blocked_allocs > 0 and stats.peak_nodes == 2 and stats.node_hours > 0


def test_bad_pools_are_refused() -> None:
    with pytest.raises(ValueError):
        CorePool(shapes=())
    with pytest.raises(ValueError):
        CorePool(ask=ASK, shapes=(NodeShape(4000, 8192, load_cpu=3000),))  # holds none
    with pytest.raises(ValueError):
        CorePool(initial_nodes=3, max_nodes=2)
    with pytest.raises(ValueError):
        CorePool(node_delay_s=-1)


def test_a_scaling_event_costs_one_or_two_evaluations() -> None:
    run = CorePool(EVEN_ASK, EVEN).start(0)
    assert isinstance(run, _CoreRun)
    run.scale(0.0, 50, lambda: 0.0)  # one on no nodes, one on the 25 nodes it asked for
    assert (run.ready(0.0), len(run.nodes), run.evaluations) == (50, 25, 2)
    run.scale(10.0, 10, lambda: 0.0)  # scale-in reports allocations complete: no evaluation
    run.scale(20.0, 12, lambda: 0.0)  # room on the emptied nodes: one evaluation
    assert (run.ready(20.0), run.evaluations) == (12, 3)


def test_start_count_beyond_the_initial_nodes_starts_settled() -> None:
    pool = CorePool(EVEN_ASK, EVEN, initial_nodes=1, max_nodes=2, node_delay_s=60)
    result = simulate(FLAT, Hold(), start_count=5, per_alloc_rps=10, cluster=pool)
    assert ready_at(result, 0) == (4, 5)
    stats = result.cluster
    assert stats is not None and stats.blocked_allocs == 1 and stats.nodes_provisioned == 0
