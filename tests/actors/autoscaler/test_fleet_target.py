"""The fleet target over a fake hosting agent: scale-out adds instances and the policy waits
until they register; scale-in drains the instances the selector picks, no more than asked,
and the policy waits until they are gone; the fleet's `nodes` range narrows min / max."""

from __future__ import annotations

from dataclasses import replace

from actors.autoscaler.core.alloc_counts import NodeLoad
from actors.autoscaler.core.cluster_signals import ClusterView
from actors.autoscaler.fleet_target import FleetTargets, fleet_bounds
from contracts import Node
from contracts.autoscaling import Decision, Outcome, Policy, ScalingAction, TargetSpec
from contracts.resources import NodeResources
from contracts.share import FLEET_ATTRIBUTE


class FakeAgent:
    def __init__(self) -> None:
        self.nodes: list[Node] = [self.node(i) for i in range(2)]
        self.retired: list[tuple[list[str], float]] = []

    def node(self, i: int) -> Node:
        return Node(
            id=f"id-{i}",
            name=f"sim-{i:04d}",
            attributes={FLEET_ATTRIBUTE: "sim"},
            node_resources=NodeResources(cpu=1000, memory_mb=1000),
            create_index=i,
        )

    def scale_fleet(self, name: str, count: int) -> list[str]:
        return [f"id-{i}" for i in range(len(self.nodes), count)]  # registered later

    def retire_instances(self, node_ids: list[str], deadline_s: float) -> int:
        self.retired.append((node_ids, deadline_s))
        return len(node_ids)


def view(agent: FakeAgent, busy: str = "") -> ClusterView:
    load = {busy: NodeLoad(500, 500, 1)}
    return ClusterView(lambda: agent.nodes, lambda: [], lambda n: load.get(n, NodeLoad()))


def decision(count: int) -> Decision:
    return Decision("p", f"p:{count}", 0.0, Outcome.SCALE, "", action=ScalingAction(count=count))


def test_scale_out_waits_for_the_new_instances_to_register() -> None:
    agent = FakeAgent()
    targets = FleetTargets(agent, clock=lambda: 0.0)
    before = view(agent)
    assert targets.scale("sim", "least_busy", 60, decision(4), before.fleet("sim")) == (
        "added 2 instance(s)"
    )
    status = targets.status("sim", view(agent))
    assert status is not None and (status.ready, status.count, status.starting) == (False, 2, 2)
    agent.nodes += [agent.node(2), agent.node(3)]
    status = targets.status("sim", view(agent))
    assert status is not None and (status.ready, status.count, status.starting) == (True, 4, 0)


def test_scale_in_drains_what_the_selector_picks_and_waits_until_it_is_gone() -> None:
    agent = FakeAgent()
    agent.nodes.append(agent.node(2))
    targets = FleetTargets(agent, clock=lambda: 0.0)
    now = view(agent, busy="id-0")
    note = targets.scale("sim", "least_busy", 300, decision(1), now.fleet("sim"))
    assert note == "draining sim-0001, sim-0002"
    assert agent.retired == [(["id-1", "id-2"], 300)]
    status = targets.status("sim", view(agent))
    assert status is not None and not status.ready  # draining: the policy waits
    agent.nodes = agent.nodes[:1]  # drained and removed
    status = targets.status("sim", view(agent))
    assert status is not None and (status.ready, status.count) == (True, 1)


def test_a_stuck_wait_is_given_up_after_its_deadline_and_grace() -> None:
    agent, clock = FakeAgent(), [0.0]
    targets = FleetTargets(agent, clock=lambda: clock[0])
    targets.scale("sim", "newest_create_index", 10, decision(1), view(agent).fleet("sim"))
    assert agent.retired == [(["id-1"], 10)]
    status = targets.status("sim", view(agent))
    assert status is not None and not status.ready
    clock[0] = 10 + 61
    status = targets.status("sim", view(agent))
    assert status is not None and status.ready


def test_an_unknown_fleet_is_a_missing_target_and_an_unknown_backend_is_refused() -> None:
    agent = FakeAgent()
    targets = FleetTargets(agent, lambda name: {"backend": "gcp"} if name == "g" else None)
    assert targets.status("nope", view(agent)) is None
    try:
        targets.scale("g", "least_busy", 60, decision(3), None)
    except ValueError as exc:
        assert 'unknown backend "gcp"' in str(exc)
    else:
        raise AssertionError("a fleet of an unknown backend was scaled")


def test_the_fleet_nodes_range_narrows_the_policy_bounds() -> None:
    policy = Policy(min=0, max=10, checks=(), target=TargetSpec(kind="fleet", fleet="sim"))
    assert fleet_bounds(policy, None) is policy
    assert fleet_bounds(policy, {"nodes_min": 2, "nodes_max": 5}) == replace(policy, min=2, max=5)
    assert fleet_bounds(policy, {"nodes_min": None, "nodes_max": 20}) is policy
