"""The node-pool cluster model: node provisioning delays readiness, the fleet limit blocks
allocations (blocked first on scale-in), idle nodes go, and without a cluster (or with one
that never constrains) the run is the simulator's own."""

from __future__ import annotations

import pytest

from actors.experiments.core.capacity import StartDelay
from actors.experiments.core.cluster import ClusterStats, NodePool, Unlimited
from actors.experiments.core.demand import from_callable, from_series
from actors.experiments.core.policies import NomadPolicy, nomad_policy_dict
from actors.experiments.core.simulator import RunResult, simulate
from actors.experiments.core.state import SimState

FLAT = from_callable(lambda t: 25.0, span_s=200)


class Hold:
    interval_s = 10.0
    wakes_on_demand = False

    def __init__(self, plan: dict[float, int] | None = None) -> None:
        self.plan = plan or {}

    def decide(self, now: float, state: SimState) -> int | None:
        return self.plan.get(now)


def ready_at(result: RunResult, t: float) -> tuple[int, int]:
    """(ready, asked for) sampled at the evaluation at `t`, before its decision."""
    (sample,) = [s for s in result.samples if s.time_s == t]
    return sample.ready, sample.count


def test_readiness_waits_for_the_node() -> None:
    pool = NodePool(allocs_per_node=2, node_delay_s=60)
    result = simulate(FLAT, Hold({0.0: 3}), start_delay=10, per_alloc_rps=10, cluster=pool)
    assert ready_at(result, 50) == (0, 3) and ready_at(result, 60) == (3, 3)
    assert result.ledger.violation_requests == 25 * 60
    assert result.cluster == ClusterStats(
        node_hours=2 * 200 / 3600, peak_nodes=2, nodes_provisioned=2
    )
    # a start delay longer than the provisioning wins: the two overlap
    slow = simulate(FLAT, Hold({0.0: 3}), start_delay=90, per_alloc_rps=10, cluster=pool)
    assert ready_at(slow, 80) == (0, 3) and ready_at(slow, 90) == (3, 3)


def test_ready_nodes_take_allocations_before_new_ones() -> None:
    pool = NodePool(allocs_per_node=2, initial_nodes=1, node_delay_s=60)
    result = simulate(FLAT, Hold({0.0: 3}), per_alloc_rps=10, cluster=pool)
    assert ready_at(result, 10) == (2, 3) and ready_at(result, 60) == (3, 3)
    assert result.cluster is not None and result.cluster.nodes_provisioned == 1


def test_the_fleet_limit_blocks_and_blocked_hours_are_exact() -> None:
    pool = NodePool(allocs_per_node=2, initial_nodes=1, max_nodes=2, node_delay_s=30)
    plan = {0.0: 6, 100.0: 4}
    result = simulate(FLAT, Hold(plan), per_alloc_rps=10, cluster=pool)
    # 2 ready at 0, 2 more at 30 on the new node, 2 blocked until the scale-in at 100
    assert ready_at(result, 20) == (2, 6) and ready_at(result, 30) == (4, 6)
    assert ready_at(result, 110) == (4, 4)  # the blocked went first: no ready one removed
    stats = result.cluster
    assert stats is not None
    assert stats.blocked_alloc_hours == pytest.approx(2 * 100 / 3600)
    assert stats.blocked_allocs == 2 and stats.peak_nodes == 2
    assert stats.node_hours == pytest.approx(2 * 200 / 3600)
    # capacity is the placed allocations': 25 rps on 20 until 30 s, then 40
    assert result.ledger.violation_requests == pytest.approx(5 * 30)


def test_scale_in_takes_blocked_then_starting_then_ready() -> None:
    pool = NodePool(allocs_per_node=1, initial_nodes=2, max_nodes=3, node_delay_s=50)
    result = simulate(FLAT, Hold({0.0: 4, 10.0: 2}), per_alloc_rps=10, cluster=pool)
    # at 0: 2 ready, 1 waiting for its node, 1 blocked; at 10 the blocked and the starting go
    assert ready_at(result, 10) == (2, 4) and ready_at(result, 20) == (2, 2)
    stats = result.cluster
    assert stats is not None
    assert stats.blocked_alloc_hours == pytest.approx(10 / 3600) and stats.blocked_allocs == 1


def test_idle_nodes_are_removed_after_node_idle_s_down_to_min_nodes() -> None:
    pool = NodePool(allocs_per_node=1, initial_nodes=1, min_nodes=1, node_idle_s=100)
    policy = Hold({0.0: 3, 60.0: 1, 300.0: 0})
    policy.interval_s = 60.0
    result = simulate(FLAT, policy, per_alloc_rps=10, until_s=600, cluster=pool)
    stats = result.cluster
    assert stats is not None
    # two nodes empty at 60 go at 160 (a point of the run); the last stays (min_nodes)
    assert stats.nodes_provisioned == 2 and stats.nodes_removed == 2
    assert stats.node_hours == pytest.approx((3 * 160 + 1 * 440) / 3600)
    assert any(s.start_s == 160 for s in result.ledger.segments)


def test_no_cluster_is_the_simulator_as_before() -> None:
    demand = from_series([0, 50, 300, 500], [3, 60, 0, 20], span_s=900)
    delays = StartDelay.sampled([1, 7, 30, 90])

    def policy() -> NomadPolicy:
        body = nomad_policy_dict(
            query="rps_per_alloc", strategy="target-value", settings={"target": 10}
        )
        return NomadPolicy.from_dict(body, min=0, max=20)

    plain = simulate(demand, policy(), start_delay=delays, per_alloc_rps=10, seed=2)
    none = simulate(demand, policy(), start_delay=delays, per_alloc_rps=10, seed=2, cluster=None)
    assert none == plain and plain.cluster is None
    assert Unlimited(3).stats() is None
    # a pool that never constrains gives the same trajectory and figures (more points only)
    loose = NodePool(node_idle_s=60)
    pooled = simulate(demand, policy(), start_delay=delays, per_alloc_rps=10, seed=2, cluster=loose)
    assert pooled.samples == plain.samples and pooled.actions == plain.actions
    assert pooled.metrics == pytest.approx(plain.metrics)


def test_start_count_beyond_the_initial_nodes_starts_settled() -> None:
    pool = NodePool(allocs_per_node=2, initial_nodes=1, max_nodes=2, node_delay_s=60)
    result = simulate(FLAT, Hold(), start_count=5, per_alloc_rps=10, cluster=pool)
    assert ready_at(result, 0) == (4, 5)
    stats = result.cluster
    assert stats is not None and stats.blocked_allocs == 1 and stats.nodes_provisioned == 0


def test_same_seed_same_cluster_run() -> None:
    demand = from_series([0, 50, 300, 500], [3, 60, 0, 20], span_s=1800)
    pool = NodePool(allocs_per_node=2, max_nodes=2, node_delay_s=45, node_idle_s=120)

    def run(seed: int) -> tuple[object, ...]:
        body = nomad_policy_dict(
            query="rps_per_alloc", strategy="target-value", settings={"target": 10}, cooldown="20s"
        )
        policy = NomadPolicy.from_dict(body, min=0, max=20)
        r = simulate(
            demand,
            policy,
            start_delay=StartDelay.sampled([1, 7, 30, 90]),
            per_alloc_rps=10,
            seed=seed,
            cluster=pool,
        )
        return (r.actions, r.ledger.segments, r.cluster)

    first = run(5)
    assert first == run(5)
    stats = first[2]
    assert isinstance(stats, ClusterStats) and stats.blocked_allocs > 0


def test_bad_pools_are_refused() -> None:
    with pytest.raises(ValueError):
        NodePool(allocs_per_node=0)
    with pytest.raises(ValueError):
        NodePool(initial_nodes=3, max_nodes=2)
    with pytest.raises(ValueError):
        NodePool(node_delay_s=-1)
