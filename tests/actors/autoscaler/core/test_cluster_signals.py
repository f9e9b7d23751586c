"""Cluster signals (fleets' ready instances, blocked placements, allocated percentages), the
node selector strategies, and the per-node load AllocCounts keeps for them."""

from __future__ import annotations

import pytest

from actors.autoscaler.core.alloc_counts import AllocCounts, NodeLoad
from actors.autoscaler.core.cluster_signals import (
    ClusterQuery,
    ClusterView,
    Instance,
    fleet_states,
    parse_cluster_query,
)
from actors.autoscaler.core.node_selector import select_for_removal
from contracts import Allocation, DrainStrategy, Node
from contracts.allocation import ClientStatus, DesiredStatus
from contracts.autoscaling import MetricQuery, MetricReadError
from contracts.evaluation import AllocMetric, EvalStatus, Evaluation
from contracts.resources import AllocatedResources, NodeResources, ReservedResources
from contracts.share import FLEET_ATTRIBUTE
from contracts.state_log import AllocClientUpdate, UpdateAllocsClientStatus, UpsertAllocs


def node(name: str, fleet: str, *, index: int = 1, cls: str = "", **kw: object) -> Node:
    return Node(
        id=f"id-{name}",
        name=name,
        attributes={FLEET_ATTRIBUTE: fleet},
        node_resources=NodeResources(cpu=1000, memory_mb=1000),
        computed_class=cls or f"class-{fleet}",
        create_index=index,
        **kw,  # type: ignore[arg-type]
    )


def blocked(failures: int = 0, eligible: dict[str, bool] | None = None) -> Evaluation:
    return Evaluation(
        id=f"e{failures}{sorted(eligible or {})}",
        status=EvalStatus.BLOCKED,
        failed_tg_allocs={"g": AllocMetric(coalesced_failures=failures)},
        class_eligibility=eligible or {},
    )


def loads(**by_node: NodeLoad) -> object:
    return lambda node_id: by_node.get(node_id.removeprefix("id-"), NodeLoad())


def view(nodes: list[Node], evals: list[Evaluation], **by_node: NodeLoad) -> ClusterView:
    return ClusterView(lambda: nodes, lambda: evals, loads(**by_node))  # type: ignore[arg-type]


def test_queries_parse_with_an_optional_fleet_and_others_are_not_cluster_signals() -> None:
    assert parse_cluster_query("blocked_allocs") == ClusterQuery("blocked_allocs")
    assert parse_cluster_query("percentage-allocated_cpu/gpu") == ClusterQuery(
        "percentage-allocated_cpu", "gpu"
    )
    assert parse_cluster_query("avg_cpu") is None
    assert parse_cluster_query("taskgroup_avg_cpu/api/web") is None


def test_ready_instances_and_allocated_percentages_per_fleet() -> None:
    nodes = [
        node("a-0", "a"),
        node("a-1", "a"),
        node("a-2", "a", drain_strategy=DrainStrategy(deadline_s=60)),
        node("b-0", "b", reserved_resources=ReservedResources(cpu=500, memory_mb=500)),
        Node(id="loose", name="loose"),  # in no fleet: ignored
    ]
    v = view(nodes, [], **{"a-0": NodeLoad(500, 250, 1), "a-2": NodeLoad(1000, 1000, 2)})
    assert sorted(v.fleets) == ["a", "b"]
    read = v.reader("a")

    def value(query: str) -> float:
        ((_, point),) = read(MetricQuery("drover", query, 0.0, 10.0, True))
        return point

    assert value("ready_instances") == 2 and value("draining_instances") == 1
    # Over the ready instances only: 500 of 2000 MHz, 250 of 2000 MB.
    assert value("percentage-allocated_cpu") == 25.0
    assert value("percentage-allocated_memory") == 12.5
    assert value("ready_instances/b") == 1 and value("percentage-allocated_cpu/b") == 0.0
    assert value("ready_instances/gone") == 0.0  # a fleet scaled to nothing is empty
    with pytest.raises(MetricReadError, match="cluster policy"):
        read(MetricQuery("drover", "avg_cpu", 0.0, 10.0))


def test_blocked_placements_count_for_the_fleets_whose_classes_could_take_them() -> None:
    nodes = [node("a-0", "a"), node("b-0", "b")]
    evals = [
        blocked(2, {"class-a": True, "class-b": False}),  # 3 placements, only a fits
        blocked(0, {}),  # eligibility unknown: counts for every fleet
        Evaluation(id="done", status=EvalStatus.COMPLETE, failed_tg_allocs={"g": AllocMetric()}),
    ]
    v = view(nodes, evals)
    assert v.blocked == {"a": 4, "b": 1}
    # The only fleet takes every blocked placement, whatever the classes say.
    assert view([node("a-0", "a")], [blocked(0, {"other": True})]).blocked == {"a": 1}


def test_a_job_policy_reads_cluster_signals_of_a_named_fleet_and_the_rest_from_its_source() -> None:
    v = view([node("a-0", "a")], [blocked(1)])
    read = v.reader("", lambda q: [(1.0, 42.0)])
    assert read(MetricQuery("drover", "blocked_allocs/a", 0.0, 5.0)) == [(5.0, 2.0)]
    assert read(MetricQuery("drover", "avg_cpu", 0.0, 5.0)) == [(1.0, 42.0)]
    with pytest.raises(MetricReadError, match="names no fleet"):
        read(MetricQuery("drover", "blocked_allocs", 0.0, 5.0))


def inst(name: str, index: int, load: NodeLoad, ready: bool = True) -> Instance:
    return Instance(f"id-{name}", name, index, 1000, 1000, load, ready, not ready)


FLEET = [
    inst("n0", 1, NodeLoad(900, 900, 3)),
    inst("n1", 2, NodeLoad(100, 0, 1, system_allocs=1)),
    inst("n2", 3, NodeLoad()),
    inst("n3", 4, NodeLoad(500, 500, 1)),
    inst("n4", 5, NodeLoad(), ready=False),  # draining already: never picked again
]


@pytest.mark.parametrize(
    ("strategy", "count", "picked"),
    [
        ("least_busy", 2, ["n2", "n1"]),
        ("empty", 2, ["n2"]),  # only one empty instance: fewer than asked
        ("empty_ignore_system", 3, ["n1", "n2"]),
        ("newest_create_index", 2, ["n3", "n2"]),
        ("oldest_create_index", 1, ["n0"]),
        ("least_busy", 0, []),
    ],
)
def test_node_selector_strategies(strategy: str, count: int, picked: list[str]) -> None:
    assert [i.name for i in select_for_removal(FLEET, count, strategy)] == picked


def test_an_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="node_selector_strategy"):
        select_for_removal(FLEET, 1, "random")


def test_fleet_states_group_nodes_by_their_fleet_attribute() -> None:
    states = fleet_states([node("a-0", "a", index=7)], lambda _: NodeLoad(1, 2, 1))
    (only,) = states["a"].instances
    assert (only.name, only.create_index, only.load, only.ready) == (
        "a-0",
        7,
        NodeLoad(1, 2, 1),
        True,
    )


def test_alloc_counts_sum_live_allocations_per_node() -> None:
    counts = AllocCounts(lambda ns, job: job == "sys")

    def alloc(
        alloc_id: str, job: str, node_id: str, desired: DesiredStatus = DesiredStatus.RUN
    ) -> Allocation:
        return Allocation(
            id=alloc_id,
            job_id=job,
            node_id=node_id,
            task_group="g",
            desired_status=desired,
            allocated_resources=AllocatedResources(cpu=100, memory_mb=10),
        )

    counts.apply(
        UpsertAllocs((alloc("a", "web", "n1"), alloc("b", "web", "n1"), alloc("s", "sys", "n1")))
    )
    assert counts.node_load("n1") == NodeLoad(300, 30, 3, 1)
    counts.apply(UpdateAllocsClientStatus((AllocClientUpdate("a", ClientStatus.RUNNING),)))
    assert counts.node_load("n1") == NodeLoad(300, 30, 3, 1)  # a report moves nothing
    counts.apply(UpdateAllocsClientStatus((AllocClientUpdate("b", ClientStatus.COMPLETE),)))
    counts.apply(UpsertAllocs((alloc("s", "sys", "n1", DesiredStatus.STOP),)))
    assert counts.node_load("n1") == NodeLoad(100, 10, 1, 0)
    counts.apply(UpsertAllocs((alloc("a", "web", "n1", DesiredStatus.STOP),)))
    assert counts.node_load("n1") == NodeLoad()
