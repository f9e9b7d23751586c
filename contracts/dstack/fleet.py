"""dstack's fleet configuration (core/models/fleets.py) with drover's extensions.

    type: fleet
    name: gpu-pool            # optional; lower case, dstack style
    nodes: 2                  # N, "a..b", "..b", "a..", {min, target, max}; default 1
    placement: cluster        # any (default) | cluster
    blocks: 4                 # auto | int >= 1; default 1
    resources: {cpu: 32, memory: 256GB, gpu: H100:80GB:8}
    idle_duration: 1h         # duration, int seconds or off; default 3d
    backend: simulated        # drover: simulated (default) | ray

Drover extensions kept from today's fleet files: `env`, `datacenter`, `node_class`,
`node_pool`, `attributes`, `meta`, `drivers`. A simulated fleet's `resources` say what each
instance HAS, so each must be exact (`8`) or a lower bound (`2..`, read as 2), and its blocks
must divide its CPUs and GPUs; left out, dstack's normal defaults apply (cpu 2, memory 8GB,
disk 100GB, no GPU). A ray fleet's resources filter nodes, and default to
`ResourcesSpec.unconstrained()` as HEAD does for fleets without resources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from contracts.dstack.blocks import Blocks, blocks_problem, parse_blocks, resolve_blocks
from contracts.dstack.fields import (
    NAME,
    Problems,
    check_keys,
    expect_choice,
    expect_mapping,
    expect_str,
    expect_str_list,
    expect_str_map,
    optional,
    parse_duration,
    parse_env,
    show,
)
from contracts.dstack.gpu import Vendor
from contracts.dstack.matching import InstanceOffer
from contracts.dstack.nodes import FleetNodesSpec, parse_nodes
from contracts.dstack.ranges import Range
from contracts.dstack.resources import (
    DEFAULT_RESOURCES,
    CpuArch,
    ResourcesSpec,
    parse_resources,
)
from contracts.dstack.sizes import MB_PER_GB, gb_to_mb
from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits

N = TypeVar("N", int, float)

Placement = Literal["any", "cluster"]
FleetBackend = Literal["simulated", "ray"]
DEFAULT_FLEET_IDLE_S = 3 * 86400
ONE_NODE = FleetNodesSpec(1, 1, 1)
_DRIVER = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
FLEET_KEYS = (
    "type", "name", "nodes", "placement", "blocks", "resources", "idle_duration", "backend",
    "env", "datacenter", "node_class", "node_pool", "attributes", "meta", "drivers",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FleetConfiguration:
    name: str | None = None
    nodes: FleetNodesSpec = ONE_NODE
    placement: Placement = "any"
    blocks: Blocks = 1
    resources: ResourcesSpec = DEFAULT_RESOURCES
    idle_duration_s: int | None = DEFAULT_FLEET_IDLE_S  # None: off (never idle-terminated)
    backend: FleetBackend = "simulated"
    env: dict[str, str] = field(default_factory=dict)
    datacenter: str | None = None
    node_class: str | None = None
    node_pool: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    drivers: tuple[str, ...] | None = None  # None: the consumer's default


@dataclass(frozen=True, slots=True)
class InstanceShape:
    """What each instance of a simulated fleet has."""

    cpu_count: int
    memory_mb: int
    disk_mb: int  # 0: unknown
    gpu_count: int = 0
    gpu_name: str | None = None
    gpu_vendor: Vendor | None = None
    gpu_memory_gb: float = 0.0
    cpu_arch: CpuArch = "x86"

    def to_offer(self) -> InstanceOffer:
        return InstanceOffer(
            cpu_count=self.cpu_count,
            cpu_arch=self.cpu_arch,
            memory_gb=self.memory_mb / MB_PER_GB,
            disk_gb=self.disk_mb / MB_PER_GB,
            gpu_count=self.gpu_count,
            gpu_name=self.gpu_name,
            gpu_vendor=self.gpu_vendor,
            gpu_memory_gb=self.gpu_memory_gb,
        )


def _amount(value: Range[N], where: str, problems: Problems) -> N | None:
    """The one amount a range gives an instance: its min when exact or open above."""
    if value.min is not None and (value.max is None or value.exact):
        return value.min
    problems.add(
        f"{where}: a simulated fleet needs an exact amount or a lower bound such as '2..', "
        f"got {show(str(value))}"
    )
    return None


def instance_shape(config: FleetConfiguration) -> InstanceShape:
    """Each instance's resources, from exact values or lower bounds (`cpu: 2..` gives 2)."""
    spec = config.resources
    problems = Problems()
    cpu = _amount(spec.cpu.count, "resources.cpu", problems)
    if cpu == 0:
        problems.add("resources.cpu: a simulated instance needs at least 1 CPU, got 0")
    memory = _amount(spec.memory, "resources.memory", problems)
    disk = None if spec.disk is None else _amount(spec.disk, "resources.disk", problems)
    gpus = _amount(spec.gpu.count, "resources.gpu", problems) or 0
    gpu_memory = 0.0
    if gpus and spec.gpu.memory is not None:
        gpu_memory = _amount(spec.gpu.memory, "resources.gpu.memory", problems) or 0.0
    if gpus and len(spec.gpu.names) > 1:
        problems.add(
            f"resources.gpu: a simulated fleet needs one GPU name, got {','.join(spec.gpu.names)!r}"
        )
    problems.raise_if_any()
    return InstanceShape(
        cpu_count=cpu or 0,
        memory_mb=gb_to_mb(memory or 0.0),
        disk_mb=0 if disk is None else gb_to_mb(disk),
        gpu_count=gpus,
        gpu_name=spec.gpu.names[0] if gpus and spec.gpu.names else None,
        gpu_vendor=spec.gpu.vendor if gpus else None,
        gpu_memory_gb=gpu_memory,
        cpu_arch=spec.cpu.arch or "x86",
    )


def _divisible_gpus(shape: InstanceShape) -> int:
    """GPUs as the block rule counts them: TPUs (vendor google) count as 1, so never split."""
    return min(shape.gpu_count, 1) if shape.gpu_vendor == "google" else shape.gpu_count


def instance_total_blocks(config: FleetConfiguration) -> int:
    """T for each instance of a simulated fleet; an error naming `blocks` if it cannot split."""
    shape = instance_shape(config)
    total = resolve_blocks(shape.cpu_count, _divisible_gpus(shape), config.blocks)
    if total is None:
        reason = blocks_problem(shape.cpu_count, _divisible_gpus(shape), config.blocks)
        raise ValidationError(f"blocks: {reason}")
    return total


def parse_idle_duration(value: object, where: str, default: int) -> int | None:
    """dstack's idle duration: `off`, false or a negative int mean off (None); true and null
    mean the default; otherwise a duration."""
    if value is None or value is True:
        return default
    if value is False or value == "off" or (type(value) is int and value < 0):
        return None
    return parse_duration(value, where)


def parse_fleet(data: object) -> FleetConfiguration:
    """A FleetConfiguration from a loaded YAML/JSON document; every problem at once."""
    doc = expect_mapping(data, "fleet")
    problems = Problems()
    for problem in check_keys(doc, FLEET_KEYS, ""):
        problems.add(problem)
    if doc.get("type", "fleet") != "fleet":
        problems.add(f"type: expected 'fleet', got {show(doc.get('type'))}")
    before = len(problems.items)
    backend = optional(doc, "backend", "", _backend, problems) or "simulated"
    resources = optional(doc, "resources", "", parse_resources, problems)
    if resources is None and doc.get("resources") is None:
        resources = DEFAULT_RESOURCES if backend == "simulated" else ResourcesSpec.unconstrained()
    blocks = optional(doc, "blocks", "", parse_blocks, problems) or 1
    shape_known = len(problems.items) == before
    config = FleetConfiguration(
        name=optional(doc, "name", "", _name, problems),
        nodes=optional(doc, "nodes", "", parse_nodes, problems) or ONE_NODE,
        placement=optional(doc, "placement", "", _placement, problems) or "any",
        blocks=blocks,
        resources=resources or DEFAULT_RESOURCES,
        idle_duration_s=problems.run(
            parse_idle_duration, doc.get("idle_duration"), "idle_duration", DEFAULT_FLEET_IDLE_S
        ),
        backend=backend,
        env=optional(doc, "env", "", parse_env, problems) or {},
        datacenter=optional(doc, "datacenter", "", expect_str, problems),
        node_class=optional(doc, "node_class", "", expect_str, problems),
        node_pool=optional(doc, "node_pool", "", expect_str, problems),
        attributes=optional(doc, "attributes", "", expect_str_map, problems) or {},
        meta=optional(doc, "meta", "", expect_str_map, problems) or {},
        drivers=optional(doc, "drivers", "", _drivers, problems),
    )
    if backend == "simulated" and shape_known:
        problems.run(instance_total_blocks, config)
    problems.raise_if_any()
    return config


def _name(value: object, where: str) -> str:
    return expect_str(value, where, NAME)


def _drivers(value: object, where: str) -> tuple[str, ...]:
    return expect_str_list(value, where, _DRIVER)


def _backend(value: object, where: str) -> FleetBackend:
    return "ray" if expect_choice(value, where, ("simulated", "ray")) == "ray" else "simulated"


def _placement(value: object, where: str) -> Placement:
    return "cluster" if expect_choice(value, where, ("any", "cluster")) == "cluster" else "any"


install_fast_inits(__name__)
