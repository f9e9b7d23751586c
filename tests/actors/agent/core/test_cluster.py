"""A run's cluster variables (cluster.py), built from the ranks one plan placed."""

from __future__ import annotations

from actors.agent.core.cluster import cluster_env, cluster_info
from contracts import (
    AllocatedDevice,
    AllocatedResources,
    Allocation,
    DeviceInstance,
    Node,
    NodeDeviceResource,
    NodeResources,
)


def node(node_id: str, ip: str) -> Node:
    instances = tuple(DeviceInstance(f"{node_id}-g{i}") for i in range(4))
    gpus = NodeDeviceResource("nvidia", "gpu", "H100", instances)
    return Node(
        id=node_id,
        name=node_id,
        attributes={"unique.network.ip-address": ip},
        node_resources=NodeResources(8000, 8192, 0, (gpus,)),
    )


def rank(index: int, node_id: str, gpus: tuple[str, ...]) -> Allocation:
    held = AllocatedResources(devices=(AllocatedDevice("nvidia", "gpu", "H100", gpus),))
    return Allocation(
        id=f"a{index}", name=f"r.node[{index}]", node_id=node_id, allocated_resources=held
    )


def test_every_rank_sees_the_master_its_peers_and_its_share() -> None:
    nodes = {"n0": node("n0", "10.0.0.1"), "n1": node("n1", "10.0.0.2")}
    ranks = [rank(1, "n1", ("n1-g2", "n1-g3")), rank(0, "n0", ("n0-g0", "n0-g1"))]
    info = cluster_info(ranks[0], ranks, nodes.get)
    env = cluster_env(info, "/tmp/hostfile")
    for prefix in ("DROVER", "DSTACK"):
        assert env[f"{prefix}_NODE_RANK"] == "1"
        assert env[f"{prefix}_NODES_NUM"] == "2"
        assert env[f"{prefix}_MASTER_NODE_IP"] == "10.0.0.1"
        assert env[f"{prefix}_NODES_IPS"] == "10.0.0.1\n10.0.0.2"
        assert env[f"{prefix}_GPUS_PER_NODE"] == "2"
        assert env[f"{prefix}_GPUS_NUM"] == "4"
        assert env[f"{prefix}_MPI_HOSTFILE"] == "/tmp/hostfile"
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"  # the share's positions on its instance
    assert info.hostfile == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"


def test_gpu_less_nodes_are_listed_without_slots() -> None:
    bare = Node(id="n", name="n", attributes={"unique.network.ip-address": "10.0.0.9"})
    alone = Allocation(id="a0", name="r.node[0]", node_id="n")
    info = cluster_info(alone, [alone], {"n": bare}.get)
    assert info.hostfile == "10.0.0.9\n" and info.gpus_num == 0
    assert cluster_env(info, "h")["CUDA_VISIBLE_DEVICES"] == ""
