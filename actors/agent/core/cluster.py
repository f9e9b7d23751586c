"""What each rank of a run learns about its cluster (dstack's ClusterInfo, as env vars).

A run's ranks are committed in one plan, so the log entry that places them holds every rank:
the agent builds each rank's view from that entry and the nodes it knows, before any starts.
Every variable is given under drover's name and dstack's, so dstack scripts run unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contracts import Allocation, Node
from contracts.share import held_ids

IP_ATTRIBUTE = "unique.network.ip-address"


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    rank: int
    ips: tuple[str, ...]  # in rank order; ips[0] is the master
    gpus_per_node: int  # in this rank's share
    gpus_num: int  # over all ranks
    gpu_indices: tuple[int, ...]  # positions of this rank's GPUs on its instance
    hostfile: str  # `<ip> slots=<gpus>` per rank (`<ip>` alone on GPU-less nodes)


def cluster_info(
    alloc: Allocation, ranks: Sequence[Allocation], node_of: Callable[[str], Node | None]
) -> ClusterInfo:
    """`alloc`'s view of the run whose placed ranks are `ranks` (it among them)."""
    ordered = sorted({a.index: a for a in (*ranks, alloc)}.values(), key=lambda a: a.index)
    ips = []
    lines = []
    for rank in ordered:
        node = node_of(rank.node_id)
        ip = node.attributes.get(IP_ATTRIBUTE, "") if node is not None else ""
        ips.append(ip or "127.0.0.1")
        gpus = len(held_ids(rank, "gpu"))
        lines.append(f"{ips[-1]} slots={gpus}" if gpus else ips[-1])
    mine = held_ids(alloc, "gpu")
    node = node_of(alloc.node_id)
    on_node = [
        i.id for d in (node.node_resources.devices if node else ()) if d.type == "gpu"
        for i in d.instances
    ]  # fmt: skip
    return ClusterInfo(
        rank=alloc.index,
        ips=tuple(ips),
        gpus_per_node=len(mine),
        gpus_num=sum(len(held_ids(r, "gpu")) for r in ordered),
        gpu_indices=tuple(on_node.index(g) for g in mine if g in on_node),
        hostfile="\n".join(lines) + "\n",
    )


def cluster_env(info: ClusterInfo, hostfile_path: str) -> dict[str, str]:
    values = {
        "NODE_RANK": str(info.rank),
        "NODES_NUM": str(len(info.ips)),
        "MASTER_NODE_IP": info.ips[0],
        "NODES_IPS": "\n".join(info.ips),
        "GPUS_PER_NODE": str(info.gpus_per_node),
        "GPUS_NUM": str(info.gpus_num),
        "MPI_HOSTFILE": hostfile_path,
    }
    env = {
        f"{prefix}_{key}": value for prefix in ("DROVER", "DSTACK") for key, value in values.items()
    }
    # Processes on the instance itself see its GPUs by position (NVIDIA_VISIBLE_DEVICES,
    # the IDs, comes with every task's environment: env.py).
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in info.gpu_indices)
    return env
