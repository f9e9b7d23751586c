"""A node that joins the Ray cluster after the system started (Ray's autoscaler adding
capacity for a fleet policy, or an operator's `ray start`) gets a drover agent and becomes
an instance of the Ray-backed fleet; a node that leaves is forgotten."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

import launch.system
from actors.api.core.fleets import parse_fleet
from contracts.share import FLEET_ATTRIBUTE
from launch.system import DroverSystem, SystemConfig

GB = 1024**3


@pytest.fixture(scope="module")
def cluster(cluster_of: Any) -> Iterator[Cluster]:
    with cluster_of("drover-node-watch", {"num_cpus": 2, "memory": 2 * GB}, []) as c:
        yield c


@pytest.fixture(scope="module")
def system(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DroverSystem]:
    config = SystemConfig(
        data_dir=Path(tmp_path_factory.mktemp("node-watch")),
        ray_address=cluster.address,
        namespace="drover-node-watch",
        workers=1,
        real_agents=True,
        autoscaler=False,
        tracing=False,
    )
    # The system looks for joined and departed Ray nodes every NODE_WATCH_S (5 s): every
    # 0.5 s here, so that each wait below is not up to 5 s of the watch's sleep.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(launch.system, "NODE_WATCH_S", 0.5)
        with DroverSystem(config) as running:
            running.apply_fleet(parse_fleet({"name": "ray-pool", "backend": "ray"}))
            yield running


def fleet_members(system: DroverSystem) -> set[str]:
    nodes = ray.get(system.leader.nodes.remote())
    return {n.id for n in nodes if n.attributes.get(FLEET_ATTRIBUTE) == "ray-pool"}


def wait_for(check: Any, what: str, deadline_s: float = 90.0) -> Any:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_node_that_joins_later_gets_an_agent_and_joins_the_ray_fleet(
    cluster: Cluster, system: DroverSystem
) -> None:
    (head,) = fleet_members(system)
    added = cluster.add_node(num_cpus=2, memory=2 * GB)
    new_id = added.node_id
    wait_for(
        lambda: new_id in fleet_members(system),
        "the new node to become an instance of the Ray fleet",
    )
    assert fleet_members(system) == {head, new_id}
    assert any(agent_id.endswith(new_id[:12]) for agent_id in system.agents)

    cluster.remove_node(added)
    wait_for(
        lambda: not any(agent_id.endswith(new_id[:12]) for agent_id in system.agents),
        "the removed node's agent to be forgotten",
    )
