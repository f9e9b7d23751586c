"""Fleet declarations (`drover fleet apply FILE`): YAML in the file, the same keys as JSON in
`POST /v1/fleets`, validated into a FleetSpec with errors naming the field and the value.

    type: fleet
    name: gpu-pool
    nodes: 8
    resources: {cpu: 16, memory: 64GB, disk: 200GB, gpu: {count: 8, name: H100, memory: 80GB}}
    datacenter: dc1
    node_class: gpu
    attributes: {rack: r1}
    meta: {team: ml}

`cpu` counts cores (1,000 MHz each, as Ray nodes are fingerprinted) unless given in MHz
(`cpu: 2400MHz`); sizes take MB/GB/TB (and MiB/GiB/TiB) or a plain number of MB; `gpu` is a
count or a block with `count`, `name` and `memory`. Every node of the fleet carries the
attribute `drover.fleet = <name>`, so constraints can target a fleet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from actors.agent.core import FleetSpec
from contracts.errors import ValidationError
from contracts.share import FLEET_ATTRIBUTE

MHZ_PER_CORE = 1000
_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_SIZE_UNITS_MB = {
    "": 1,
    "mb": 1,
    "m": 1,
    "mib": 1,
    "gb": 1024,
    "g": 1024,
    "gib": 1024,
    "tb": 1024 * 1024,
    "t": 1024 * 1024,
    "tib": 1024 * 1024,
}
_TOP_KEYS = {
    "type",
    "name",
    "nodes",
    "resources",
    "datacenter",
    "node_class",
    "node_pool",
    "attributes",
    "meta",
    "drivers",
}
_RESOURCE_KEYS = {"cpu", "memory", "disk", "gpu"}
_GPU_KEYS = {"count", "name", "memory"}


def _size_mb(value: Any, where: str, problems: list[str]) -> int:
    if isinstance(value, bool):
        problems.append(f"{where}: expected a size such as 8GB, got {value!r}")
        return 0
    if isinstance(value, int | float):
        return int(value)
    match = _SIZE.match(str(value))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS_MB:
        problems.append(f"{where}: expected a size such as 8GB or 512MB, got {value!r}")
        return 0
    return int(float(match.group(1)) * _SIZE_UNITS_MB[unit])


def _cpu_mhz(value: Any, problems: list[str]) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value * MHZ_PER_CORE)
    text = str(value).strip().lower()
    if text.endswith("mhz") and text[:-3].strip().isdigit():
        return int(text[:-3])
    problems.append(f"resources.cpu: expected a number of cores or e.g. 2400MHz, got {value!r}")
    return 0


def _str_map(data: Mapping[str, Any], key: str, problems: list[str]) -> dict[str, str]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping):
        problems.append(f"{key}: expected a map of strings, got {value!r}")
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _unknown(data: Mapping[str, Any], allowed: set[str], where: str, problems: list[str]) -> None:
    for key in data:
        if key not in allowed:
            problems.append(f"{where}{key}: unknown field (expected one of {sorted(allowed)})")


def parse_fleet(data: Any) -> FleetSpec:
    """A fleet declaration -> FleetSpec; every problem is reported at once."""
    if not isinstance(data, Mapping):
        raise ValidationError(f"fleet: expected a mapping, got {type(data).__name__}")
    problems: list[str] = []
    _unknown(data, _TOP_KEYS, "", problems)
    kind = data.get("type", "fleet")
    if kind != "fleet":
        problems.append(f"type: expected 'fleet', got {kind!r}")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(f"name: expected letters, digits, '-', '_' or '.', got {name!r}")
        name = ""
    nodes = data.get("nodes", 1)
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 0 <= nodes <= 100_000:
        problems.append(f"nodes: expected an integer from 0 to 100000, got {nodes!r}")
        nodes = 0
    resources = data.get("resources") or {}
    if not isinstance(resources, Mapping):
        problems.append(f"resources: expected a mapping, got {resources!r}")
        resources = {}
    _unknown(resources, _RESOURCE_KEYS, "resources.", problems)
    cpu = _cpu_mhz(resources.get("cpu", 4), problems)
    memory = _size_mb(resources.get("memory", "8GB"), "resources.memory", problems)
    disk = _size_mb(resources.get("disk", "50GB"), "resources.disk", problems)
    gpus, gpu_model, gpu_memory = 0, "", ""
    gpu = resources.get("gpu")
    if isinstance(gpu, Mapping):
        _unknown(gpu, _GPU_KEYS, "resources.gpu.", problems)
        gpu_model = str(gpu.get("name", ""))
        gpu_memory = str(gpu.get("memory", ""))
        gpu = gpu.get("count", 1)
    if gpu is not None:
        if not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0:
            problems.append(f"resources.gpu: expected a count or a block, got {gpu!r}")
        else:
            gpus = gpu
    drivers = data.get("drivers", ["mock"])
    if not isinstance(drivers, list) or not all(isinstance(d, str) for d in drivers):
        problems.append(f"drivers: expected a list of driver names, got {drivers!r}")
        drivers = ["mock"]
    attributes = _str_map(data, "attributes", problems)
    meta = _str_map(data, "meta", problems)
    if problems:
        raise ValidationError(problems)
    return FleetSpec(
        name=name,
        count=nodes,
        cpu_mhz=cpu,
        memory_mb=memory,
        disk_mb=disk,
        gpus=gpus,
        gpu_model=gpu_model,
        gpu_memory=gpu_memory,
        datacenter=str(data.get("datacenter", "dc1")),
        node_class=str(data.get("node_class", "")),
        node_pool=str(data.get("node_pool", "default")),
        attributes={**attributes, FLEET_ATTRIBUTE: name},
        meta=meta,
        drivers=tuple(drivers),
    )


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
    }
