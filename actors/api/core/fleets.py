"""Fleet declarations (`drover apply -f FILE`, `drover fleet apply FILE`, `POST /v1/fleets`):
dstack's fleet syntax (contracts/dstack/fleet.py), as YAML in a file or the same keys as JSON,
turned into the FleetSpec the agents host.

    type: fleet
    name: gpu-pool
    nodes: 8
    placement: cluster           # gangs (multi-node runs) need a cluster fleet
    blocks: 4                    # or auto: each instance splits into blocks runs take k of
    resources: {cpu: 16, memory: 64GB, disk: 200GB, gpu: H100:80GB:8}
    backend: simulated           # or ray: the Ray cluster's nodes, one instance each
    datacenter: dc1              # drover's: node fields and attributes of the instances
    node_class: gpu
    attributes: {rack: r1}

A simulated fleet's resources are what each instance has (exact amounts, or lower bounds
read as exact). Every instance carries `drover.fleet = <name>` (constraints can target a
fleet) and its blocks as the devices `drover/block/<name>`. Fleet files of the format before
dstack's syntax that read differently now fail with a message saying how to write them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from actors.agent.core import FleetSpec
from contracts.dstack.fleet import FleetConfiguration, instance_shape, instance_total_blocks
from contracts.dstack.fleet import parse_fleet as parse_fleet_configuration
from contracts.errors import ValidationError
from contracts.share import (
    FLEET_ATTRIBUTE,
    MAX_BLOCKS_PER_INSTANCE,
    MAX_GPUS_PER_INSTANCE,
    MAX_INSTANCES_PER_FLEET,
)

MHZ_PER_CORE = 1000
LEGACY_MB_LIMIT = 1024  # a bare memory or disk number this large was MB in the old format
_BINARY_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt])ib\s*$", re.IGNORECASE)
_MHZ = re.compile(r"^\s*\d+\s*mhz\s*$", re.IGNORECASE)


def parse_fleet(data: Any) -> FleetSpec:
    """A fleet declaration -> FleetSpec; every problem is reported at once."""
    if not isinstance(data, Mapping):
        raise ValidationError(f"fleet: expected a mapping, got {type(data).__name__}")
    _legacy_forms(data)
    config = parse_fleet_configuration({"type": "fleet", **data})
    return fleet_spec(config)


def fleet_spec(config: FleetConfiguration) -> FleetSpec:
    name = config.name or f"fleet-{secrets.token_hex(3)}"  # dstack names unnamed fleets too
    ray = config.backend == "ray"
    spec = FleetSpec(
        name=name,
        count=config.nodes.target,
        # The range a cluster scaling policy may move the fleet in (the autoscaler clamps).
        nodes_min=config.nodes.min,
        nodes_max=config.nodes.max,
        cpu_mhz=0,
        memory_mb=0,
        disk_mb=0,
        datacenter=config.datacenter or "dc1",
        node_class=config.node_class or "",
        node_pool=config.node_pool or "default",
        attributes={**config.attributes, FLEET_ATTRIBUTE: name},
        meta=dict(config.meta),
        drivers=config.drivers or (("mock", "ray") if ray else ("mock",)),
        blocks=config.blocks,
        placement=config.placement,
        backend=config.backend,
    )
    problems = []
    if spec.count > MAX_INSTANCES_PER_FLEET:
        problems.append(f"nodes: {spec.count}: at most {MAX_INSTANCES_PER_FLEET} per fleet")
    if ray:
        if problems:
            raise ValidationError(problems)
        return spec  # the Ray cluster's nodes are the instances: what they have is fingerprinted
    shape = instance_shape(config)
    if shape.gpu_count > MAX_GPUS_PER_INSTANCE:
        problems.append(
            f"resources.gpu: {shape.gpu_count} GPUs: at most {MAX_GPUS_PER_INSTANCE} per instance"
        )
    total = instance_total_blocks(config)  # splittable: the parser checked
    if total > MAX_BLOCKS_PER_INSTANCE:
        problems.append(
            f"blocks: {config.blocks} makes {total} blocks per instance: "
            f"at most {MAX_BLOCKS_PER_INSTANCE}"
        )
    if problems:
        raise ValidationError(problems)
    return replace(
        spec,
        cpu_mhz=shape.cpu_count * MHZ_PER_CORE,
        memory_mb=shape.memory_mb,
        disk_mb=shape.disk_mb,
        gpus=shape.gpu_count,
        gpu_model=shape.gpu_name or "",
        gpu_memory=f"{shape.gpu_memory_gb:g}GB" if shape.gpu_count else "",
        gpu_vendor=shape.gpu_vendor or "nvidia",
    )


def _legacy_forms(data: Mapping[str, Any]) -> None:
    """Values the format before dstack's syntax read differently: say how to write them."""
    resources = data.get("resources")
    if not isinstance(resources, Mapping):
        return
    problems = []
    for key in ("memory", "disk"):
        value = resources.get(key)
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and value >= LEGACY_MB_LIMIT
        ):
            problems.append(
                f"resources.{key}: {value} has no unit, and fleet files follow dstack now, "
                f"where a bare number is GB: write {value:g}MB (or the size in GB)"
            )
    cpu = resources.get("cpu")
    if isinstance(cpu, str) and _MHZ.match(cpu):
        problems.append(
            f"resources.cpu: {cpu!r}: fleet files follow dstack now and give CPU cores "
            "(cpu: 8, or arm:8); an instance has 1,000 MHz per core"
        )
    gpu = resources.get("gpu")
    if isinstance(gpu, Mapping) and isinstance(gpu.get("memory"), str):
        match = _BINARY_UNIT.match(gpu["memory"])
        if match:
            problems.append(
                f"resources.gpu.memory: {gpu['memory']!r}: write {match.group(1)}"
                f"{match.group(2).upper()}B (dstack's units are MB, GB and TB)"
            )
    if problems:
        raise ValidationError(problems)


def fleet_to_json(spec: FleetSpec) -> dict[str, Any]:
    return {
        "Name": spec.name,
        "Nodes": spec.count,
        "CPU": spec.cpu_mhz,
        "MemoryMB": spec.memory_mb,
        "DiskMB": spec.disk_mb,
        "GPUs": spec.gpus,
        "GPUModel": spec.gpu_model,
        "Datacenter": spec.datacenter,
        "NodeClass": spec.node_class,
        "NodePool": spec.node_pool,
        "Attributes": dict(spec.attributes),
        "Meta": dict(spec.meta),
        "Drivers": list(spec.drivers),
        "Placement": spec.placement,
        "Blocks": spec.blocks,
        "Backend": spec.backend,
    }
