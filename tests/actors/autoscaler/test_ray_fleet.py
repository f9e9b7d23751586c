"""A Ray-backed fleet over a fake Ray cluster: the ask's bundles take one worker node's
shape (the target's settings override it), scale-out asks Ray for N bundles and counts the
missing instances as starting, scale-in drains first and lowers the ask only once the
drained instances are gone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from actors.autoscaler.core.alloc_counts import NodeLoad
from actors.autoscaler.core.cluster_signals import ClusterView
from actors.autoscaler.fleet_target import FleetTargets
from actors.autoscaler.ray_fleet import HEAD_RESOURCE, RayFleets, instance_shape, ray_status
from contracts import Node
from contracts.autoscaling import Decision, Outcome, ScalingAction, TargetSpec
from contracts.resources import NodeResources
from contracts.share import FLEET_ATTRIBUTE

HEAD = {"NodeID": "head", "Resources": {HEAD_RESOURCE: 1.0, "CPU": 0.0, "memory": 8e9}}
WORKER = {"CPU": 2.0, "memory": 4e9, "object_store_memory": 1e9, "node:10.0.0.2": 1.0}


def worker(node_id: str) -> dict[str, Any]:
    return {"NodeID": node_id, "Resources": dict(WORKER)}


class FakeRay:
    def __init__(self) -> None:
        self.ray_nodes: list[Mapping[str, Any]] = [HEAD, worker("w0")]
        self.asks: list[list[dict[str, float]]] = []
        self.retired: list[tuple[str, float]] = []

    def nodes(self) -> list[Mapping[str, Any]]:
        return self.ray_nodes

    def request(self, bundles: list[dict[str, float]]) -> None:
        self.asks.append(bundles)

    def retire(self, node_id: str, deadline_s: float) -> int:
        self.retired.append((node_id, deadline_s))
        return 1


class NoAgent:  # a Ray fleet never calls the simulated fleets' agent
    def scale_fleet(self, name: str, count: int) -> list[str]:
        raise AssertionError("simulated scale-out on a ray fleet")

    def retire_instances(self, node_ids: list[str], deadline_s: float) -> int:
        raise AssertionError("simulated scale-in on a ray fleet")


def instance(node_id: str, index: int) -> Node:
    return Node(
        id=node_id,
        name=f"node-{node_id}",
        attributes={FLEET_ATTRIBUTE: "gpu"},
        node_resources=NodeResources(cpu=2000, memory_mb=4000),
        create_index=index,
    )


def view(instances: list[Node]) -> ClusterView:
    return ClusterView(lambda: instances, lambda: [], lambda n: NodeLoad())


def decision(count: int) -> Decision:
    return Decision("p", f"p:{count}", 0.0, Outcome.SCALE, "", action=ScalingAction(count=count))


def targets(ray: FakeRay, clock: list[float]) -> FleetTargets:
    return FleetTargets(
        NoAgent(),
        lambda name: {"backend": "ray"} if name == "gpu" else None,
        lambda: clock[0],
        RayFleets(ray, lambda: clock[0]),
    )


def test_one_bundle_is_one_worker_node_of_the_fleet_and_settings_override_it() -> None:
    nodes = [HEAD, worker("w0"), worker("w1")]
    assert instance_shape({}, nodes).bundle() == {"CPU": 2.0}  # the head and memory left out
    extras = {"ray_instance_gpu": "1", "ray_instance_memory": "1024", "ray_instance_resource": "x"}
    assert instance_shape(extras, nodes).bundle() == {
        "CPU": 2.0,
        "GPU": 1.0,
        "memory": 1024.0 * 1024 * 1024,
        "x": 1.0,
    }
    assert instance_shape({"ray_instance_cpu": "4"}, [HEAD]).bundle() == {"CPU": 4.0}
    with pytest.raises(ValueError, match="ray_instance_cpu"):
        instance_shape({}, [HEAD])  # scaled from zero workers: nothing to copy


def test_status_counts_instances_asked_for_and_not_registered_as_starting() -> None:
    status = ray_status(ready=1, registered=1, asked=3, retiring=0)
    assert (status.ready, status.count, status.starting) == (False, 1, 2)
    status = ray_status(ready=3, registered=3, asked=3, retiring=0)
    assert (status.ready, status.count, status.starting) == (True, 3, 0)
    status = ray_status(ready=2, registered=1, asked=1, retiring=1)  # one draining
    assert (status.ready, status.count, status.starting) == (False, 2, 0)
    assert ray_status(ready=2, registered=2, asked=None, retiring=0).ready


def test_scale_out_asks_ray_for_n_bundles_and_waits_for_the_agents() -> None:
    ray, clock = FakeRay(), [0.0]
    fleets = targets(ray, clock)
    now = [instance("w0", 0)]
    note = fleets.scale("gpu", "least_busy", 60, decision(3), view(now).fleet("gpu"))
    assert note.startswith("asked Ray's autoscaler for 3 instance(s)")
    assert ray.asks == [[{"CPU": 2.0}] * 3]
    status = fleets.status("gpu", view(now))
    assert status is not None and (status.ready, status.count, status.starting) == (False, 1, 2)
    now += [instance("w1", 1), instance("w2", 2)]  # new nodes' agents registered them
    status = fleets.status("gpu", view(now))
    assert status is not None and (status.ready, status.count, status.starting) == (True, 3, 0)
    clock[0] = 10_000.0  # an ask never filled stops holding the policy back
    now = now[:1]
    status = fleets.status("gpu", view(now))
    assert status is not None and (status.ready, status.starting) == (True, 0)


def test_scale_in_drains_first_and_lowers_the_ask_once_the_instances_are_gone() -> None:
    ray, clock = FakeRay(), [0.0]
    ray.ray_nodes = [HEAD, worker("w0"), worker("w1")]
    fleets = targets(ray, clock)
    now = [instance("head", 0), instance("w0", 1), instance("w1", 2)]
    note = fleets.scale("gpu", "newest_create_index", 30, decision(1), view(now).fleet("gpu"))
    assert note == "draining node-w1, node-w0; then asking Ray's autoscaler for 1 instance(s)"
    assert ray.retired == [("w1", 30), ("w0", 30)]  # the head is never picked
    assert ray.asks == []  # not yet: Ray could take a node still running work
    status = fleets.status("gpu", view(now))
    assert status is not None and not status.ready
    now = now[:1]  # drained and removed by their agents
    status = fleets.status("gpu", view(now))
    assert status is not None and (status.ready, status.count) == (True, 1)
    assert ray.asks == [[{"CPU": 2.0}]]


def test_the_target_block_settings_reach_the_ask() -> None:
    ray, clock = FakeRay(), [0.0]
    ray.ray_nodes = [HEAD]
    fleets = targets(ray, clock)
    target = TargetSpec(kind="fleet", fleet="gpu", extras={"ray_instance_gpu": "1"})
    fleets._extras["gpu"] = dict(target.extras)
    fleets.scale("gpu", "least_busy", 60, decision(2), None)
    assert ray.asks == [[{"GPU": 1.0}] * 2]
