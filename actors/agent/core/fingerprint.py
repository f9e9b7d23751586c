"""Node fingerprints: what a node offers, as Nomad's client reports it on registration.

Two sources: `simulated_nodes` for virtual fleets (deterministic, so runs can be repeated
and compared), and `nodes_from_ray` for real machines, read from `ray.nodes()`. Both
return ready nodes with their computed class set, as the scheduler expects.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from actors.agent.core.storage import Storage
from contracts import (
    DeviceInstance,
    DriverInfo,
    Node,
    NodeDeviceResource,
    NodeEligibility,
    NodeResources,
)
from contracts.dstack.blocks import Blocks, blocks_problem, resolve_blocks
from contracts.share import (
    BLOCK_TYPE,
    BLOCK_VENDOR,
    FLEET_ATTRIBUTE,
    MAX_BLOCKS_PER_INSTANCE,
    PLACEMENT_ATTRIBUTE,
)

_NODE_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "drover:node")
_MB = 1024 * 1024
_HEAD_RESOURCE = "node:__internal_head__"
_ACCELERATOR_PREFIX = "accelerator_type:"
# Ray labels that name a Nomad node field instead of becoming an attribute.
_FIELD_LABELS = {
    "drover.io/datacenter": "datacenter",
    "drover.io/node-class": "node_class",
    "drover.io/node-pool": "node_pool",
}


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """`count` identical simulated nodes (instances) named `<name>-0000`, `<name>-0001`, ...

    Each instance splits into `blocks` blocks (an int, or "auto": dstack's divisibility rule,
    contracts/dstack/blocks.py), carried as the device group `drover/block/<name>`; one that
    cannot be split is registered ineligible, saying why. `placement: cluster` lets gangs
    use the fleet; `address` is the IP its ranks see (simulated instances share the agent's
    machine)."""

    name: str
    count: int
    cpu_mhz: int
    memory_mb: int
    disk_mb: int = 50_000
    gpus: int = 0
    gpu_model: str = ""
    gpu_memory: str = ""  # e.g. "80 GiB": the `memory` device attribute constraints read
    datacenter: str = "dc1"
    node_class: str = ""
    node_pool: str = "default"
    attributes: Mapping[str, str] = field(default_factory=dict)
    meta: Mapping[str, str] = field(default_factory=dict)
    drivers: tuple[str, ...] = ("mock",)
    blocks: int | str = 1
    placement: str = "any"
    gpu_vendor: str = "nvidia"
    address: str = "127.0.0.1"
    backend: str = "simulated"  # or "ray": the Ray cluster's nodes are the instances
    deleting: bool = False  # `fleet delete` drains its instances; it goes once they are gone
    # dstack's `nodes` range (min / max; None: unbounded): a cluster scaling policy keeps
    # the fleet within it as well as within its own min / max.
    nodes_min: int | None = None
    nodes_max: int | None = None


def node_id_for(name: str) -> str:
    """The stable node ID of a simulated node: the same name always gets the same ID."""
    return str(uuid.uuid5(_NODE_NAMESPACE, name))


def simulated_nodes(spec: FleetSpec, indexes: Iterable[int] | None = None) -> list[Node]:
    """The fleet's instances `<name>-0000`... (`indexes`: only those, for a scaled fleet)."""
    cores = max(1, spec.cpu_mhz // 1000)
    nodes = []
    for i in range(spec.count) if indexes is None else indexes:
        name = f"{spec.name}-{i:04d}"
        devices: tuple[NodeDeviceResource, ...] = ()
        if spec.gpus > 0:
            instances = tuple(
                DeviceInstance(f"GPU-{uuid.uuid5(_NODE_NAMESPACE, f'{name}/gpu{k}')}")
                for k in range(spec.gpus)
            )
            attrs = {"memory": spec.gpu_memory} if spec.gpu_memory else {}
            model = spec.gpu_model or "unknown"
            devices = (NodeDeviceResource(spec.gpu_vendor, "gpu", model, instances, attrs),)
        attributes = {
            "kernel.name": "linux",
            "os.name": "linux",
            "cpu.arch": "amd64",
            "cpu.numcores": str(cores),
            "cpu.frequency": str(spec.cpu_mhz // cores),
            "cpu.totalcompute": str(spec.cpu_mhz),
            "memory.totalbytes": str(spec.memory_mb * _MB),
            "unique.hostname": name,
            "unique.network.ip-address": spec.address,
            **_driver_attributes(spec.drivers),
        }
        node = Node(
            id=node_id_for(name),
            name=name,
            datacenter=spec.datacenter,
            node_class=spec.node_class,
            node_pool=spec.node_pool,
            attributes=attributes,
            meta=dict(spec.meta),
            drivers={d: DriverInfo() for d in spec.drivers},
            node_resources=NodeResources(spec.cpu_mhz, spec.memory_mb, spec.disk_mb, devices),
        )
        nodes.append(fleet_member(node, spec))
    return nodes


UNSPLITTABLE_PREFIXES = ("cannot split", "blocks:")
"""How an unsplittable instance's status description starts (blocks_problem's and ours)."""


def fleet_member(node: Node, spec: FleetSpec) -> Node:
    """`node` as an instance of the fleet: its name and placement as attributes, the fleet's
    own attributes and meta, and its blocks as the devices `drover/block/<fleet>` (dstack's
    divisibility rule on the node's cores and GPUs); one that cannot be split is ineligible,
    saying why. A node that was in a fleet before leaves that one's blocks behind."""
    resources = node.node_resources
    cores = int(node.attributes.get("cpu.numcores") or 0) or max(1, resources.cpu // 1000)
    gpus = sum(len(d.instances) for d in resources.devices if d.type == "gpu")
    blocks: Blocks = "auto" if spec.blocks == "auto" else int(spec.blocks)
    unsplittable = blocks_problem(cores, gpus, blocks)
    total = resolve_blocks(cores, gpus, blocks) or 0
    if total > MAX_BLOCKS_PER_INSTANCE:
        unsplittable = f"blocks: {total} per instance, at most {MAX_BLOCKS_PER_INSTANCE}"
        total = 0
    devices = tuple(d for d in resources.devices if d.type != BLOCK_TYPE)
    if total:
        ids = tuple(DeviceInstance(f"{node.name}/block{k}") for k in range(total))
        devices += (NodeDeviceResource(BLOCK_VENDOR, BLOCK_TYPE, spec.name, ids),)
    member = replace(
        node,
        attributes={
            **node.attributes,
            PLACEMENT_ATTRIBUTE: spec.placement,
            **spec.attributes,
            FLEET_ATTRIBUTE: spec.name,  # the fleet's own name, whatever its attributes say
        },
        meta={**node.meta, **spec.meta},
        node_resources=replace(resources, devices=devices),
    )
    if unsplittable is not None:
        member = replace(
            member,
            scheduling_eligibility=NodeEligibility.INELIGIBLE,
            status_description=unsplittable,
        )
    elif node.status_description.startswith(UNSPLITTABLE_PREFIXES):
        # Split now (a fleet redeclared with other blocks): eligible again.
        member = replace(
            member, scheduling_eligibility=NodeEligibility.ELIGIBLE, status_description=""
        )
    return member.with_computed_class()


def without_fleet(node: Node) -> Node:
    """`node` after its fleet was deleted: no fleet attributes, no blocks, eligible."""
    attributes = {
        k: v for k, v in node.attributes.items() if k not in (FLEET_ATTRIBUTE, PLACEMENT_ATTRIBUTE)
    }
    devices = tuple(d for d in node.node_resources.devices if d.type != BLOCK_TYPE)
    return replace(
        node,
        attributes=attributes,
        node_resources=replace(node.node_resources, devices=devices),
        scheduling_eligibility=NodeEligibility.ELIGIBLE,
        status_description="",
    ).with_computed_class()


def nodes_from_ray(
    ray_nodes: Iterable[Mapping[str, Any]],
    *,
    mhz_per_cpu: int = 1000,
    drivers: Iterable[str] = ("mock", "ray"),
    storage: Storage | None = None,
    names: Mapping[str, str] | None = None,
) -> list[Node]:
    """Nodes for the alive entries of `ray.nodes()`; the node ID is Ray's NodeID.

    Ray's logical CPUs become MHz at `mhz_per_cpu` each; `memory` (bytes) becomes MB; `GPU`
    with an `accelerator_type:<X>` resource becomes the device group `nvidia/gpu/<X>`
    (amd/intel for Ray's AMD-/Intel- types). Ray does not report disk: `storage` is the file
    system the agent measured (storage.py), its free space the node's disk and its
    `unique.storage.*` attributes the node's; without it a node offers no disk. `drivers`
    are the enabled ones, each listed and advertised as `driver.<name>`. A node is named
    after its host unless `names` (by node ID) names it (the agent's `-node NAME`).
    Labels become `ray.label.<key>` attributes, except the `drover.io/datacenter`,
    `drover.io/node-class` and `drover.io/node-pool` labels, which set those node fields.
    Ray runs its GPU nodes on Linux, so `kernel.name` is reported as linux.
    """
    enabled = tuple(dict.fromkeys(drivers))
    return [
        _ray_node(n, mhz_per_cpu, enabled, storage, (names or {}).get(str(n["NodeID"]), ""))
        for n in ray_nodes
        if n.get("Alive")
    ]


def _ray_node(
    entry: Mapping[str, Any],
    mhz_per_cpu: int,
    drivers: tuple[str, ...],
    storage: Storage | None,
    node_name: str,
) -> Node:
    node_id = str(entry["NodeID"])
    resources: Mapping[str, float] = entry.get("Resources") or {}
    labels: Mapping[str, str] = entry.get("Labels") or {}
    cpus = float(resources.get("CPU", 0.0))
    memory_mb = int(float(resources.get("memory", 0.0)) // _MB)
    hostname = str(entry.get("NodeManagerHostname") or entry.get("NodeName") or node_id)
    attributes = {
        "kernel.name": "linux",
        "cpu.numcores": str(int(cpus)),
        "cpu.totalcompute": str(int(cpus * mhz_per_cpu)),
        "memory.totalbytes": str(int(float(resources.get("memory", 0.0)))),
        "unique.hostname": hostname,
        "unique.ray.node_id": node_id,
        "ray.node_ip": str(entry.get("NodeManagerAddress", "")),
        "unique.network.ip-address": str(entry.get("NodeManagerAddress", "")),
        **_driver_attributes(drivers),
        **(storage.attributes() if storage is not None else {}),
    }
    if _HEAD_RESOURCE in resources:
        attributes["ray.head"] = "true"
    fields = {"datacenter": "dc1", "node_class": "", "node_pool": "default"}
    for key, value in labels.items():
        if key in _FIELD_LABELS:
            fields[_FIELD_LABELS[key]] = str(value)
        elif key != "ray.io/node-id":  # already unique.ray.node_id; would split classes
            attributes[f"ray.label.{key}"] = str(value)
    node = Node(
        id=node_id,
        name=node_name or hostname,
        datacenter=fields["datacenter"],
        node_class=fields["node_class"],
        node_pool=fields["node_pool"],
        attributes=attributes,
        drivers={d: DriverInfo() for d in drivers},
        node_resources=NodeResources(
            int(cpus * mhz_per_cpu),
            memory_mb,
            storage.disk_mb if storage is not None else 0,
            _ray_gpus(node_id, resources),
        ),
    )
    return node.with_computed_class()


def _ray_gpus(node_id: str, resources: Mapping[str, float]) -> tuple[NodeDeviceResource, ...]:
    count = int(float(resources.get("GPU", 0.0)))
    if count <= 0:
        return ()
    models = [k[len(_ACCELERATOR_PREFIX) :] for k in resources if k.startswith(_ACCELERATOR_PREFIX)]
    model = models[0] if models else "unknown"
    vendor = (
        "amd" if model.startswith("AMD-") else "intel" if model.startswith("Intel-") else "nvidia"
    )
    # Ray does not expose GPU UUIDs; the IDs only need to be unique within the node.
    instances = tuple(DeviceInstance(f"{node_id[:8]}-gpu{k}") for k in range(count))
    return (NodeDeviceResource(vendor, "gpu", model, instances),)


def _driver_attributes(drivers: Iterable[str]) -> dict[str, str]:
    """Nomad advertises each detected driver as the attribute `driver.<name> = 1`."""
    return {f"driver.{d}": "1" for d in drivers}
