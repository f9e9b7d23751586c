"""Runs on instance blocks: what an instance offers and which share of it a run gets.

An instance of a fleet splits into T blocks, carried as the device group
`drover/block/<fleet>` with T instances; an allocation holding k of them holds the share
⌊cores/T⌋·k, ⌊memory/T⌋·k and ⌊GPUs/T⌋·k GPUs (by device ID), the disk shared. Because blocks
and GPUs are device instances, the leader's device re-check refuses a block or GPU that a
concurrent plan took first, and the node's usage counts busy blocks with no new table.
Whether a share fits a run's ranges is dstack's rule, in contracts/dstack/matching.py; the
placement chain that uses this is share_stack.py.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import cast, get_args

from actors.state import NodeUsage
from actors.worker.core.scheduler.context import NodeLoad
from actors.worker.core.scheduler.select import RankedOption
from contracts import Node
from contracts.dstack.gpu import Vendor
from contracts.dstack.matching import (
    InstanceOffer,
    matches,
    shared_offer,
    smallest_fitting_blocks,
)
from contracts.dstack.sizes import MB_PER_GB, gb_to_mb
from contracts.resources import AllocatedDevice
from contracts.share import (
    BLOCK_TYPE,
    BLOCK_VENDOR,
    FLEET_ATTRIBUTE,
    PLACEMENT_ATTRIBUTE,
    ShareRequest,
    resources_spec,
)

MHZ_PER_CORE = 1000
STORAGE_TOTAL_ATTRIBUTE = "unique.storage.bytestotal"  # the agent's storage fingerprint
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_MB_PER_UNIT = {"": 1024, "mb": 1, "mib": 1, "gb": 1024, "gib": 1024, "tb": 1 << 20, "tib": 1 << 20}
_VENDORS = frozenset(get_args(Vendor))
_ARCH = {"amd64": "x86", "x86_64": "x86", "x86": "x86", "arm64": "arm", "aarch64": "arm"}

# Reasons an instance was passed over, as AllocMetric's exhausted dimensions show them.
NOT_IN_FLEETS = "fleet not requested"
NO_FIT = "resources out of range"
NO_FREE_BLOCKS = "blocks"
NOT_CLUSTER = "fleet placement is not cluster"
NOT_IDLE = "instance not idle"
HELD = "held for a waiting gang"


@dataclass(frozen=True, slots=True)
class Instance:
    """A fleet instance: its node, and what it offers in dstack's terms (`offer`)."""

    node: Node
    fleet: str
    cluster: bool
    offer: InstanceOffer
    mhz_per_core: int
    block_group: tuple[str, str, str]  # vendor, type, name of the block device group
    block_ids: tuple[str, ...]
    gpu_group: tuple[str, str, str] | None
    gpu_ids: tuple[str, ...]

    @property
    def total_blocks(self) -> int:
        return len(self.block_ids)


_INSTANCES: dict[int, tuple[Node, Instance | None]] = {}
_INSTANCES_MAX = 65_536


def instance_of(node: Node) -> Instance | None:
    """The instance view of a node, or None if it is not split into blocks. Node records
    are immutable and a snapshot's stay alive across evaluations: each is read once."""
    hit = _INSTANCES.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    if len(_INSTANCES) >= _INSTANCES_MAX:
        _INSTANCES.clear()
    instance = _read_instance(node)
    _INSTANCES[id(node)] = (node, instance)
    return instance


def _read_instance(node: Node) -> Instance | None:
    blocks = gpus = None
    for group in node.node_resources.devices:
        if group.vendor == BLOCK_VENDOR and group.type == BLOCK_TYPE:
            blocks = group
        elif group.type == "gpu" and gpus is None:
            gpus = group
    if blocks is None or not blocks.instances:
        return None
    attrs = node.attributes
    resources, reserved = node.node_resources, node.reserved_resources
    cpu_mhz = resources.cpu - reserved.cpu
    cores = _int(attrs.get("cpu.numcores")) or max(1, cpu_mhz // MHZ_PER_CORE)
    gpu_ids = gpus.healthy_ids() if gpus is not None else ()
    vendor = gpus.vendor.lower() if gpus is not None else ""
    offer = InstanceOffer(
        cpu_count=cores,
        cpu_arch="arm" if _ARCH.get(attrs.get("cpu.arch", "").lower()) == "arm" else "x86",
        memory_gb=(resources.memory_mb - reserved.memory_mb) / MB_PER_GB,
        disk_gb=_disk_size_mb(node) / MB_PER_GB,
        gpu_count=len(gpu_ids),
        gpu_name=gpus.name if gpus is not None else None,
        gpu_vendor=cast(Vendor, vendor) if vendor in _VENDORS else None,
        gpu_memory_gb=_size_mb(gpus.attributes.get("memory", "")) / MB_PER_GB if gpus else 0.0,
    )
    return Instance(
        node=node,
        fleet=attrs.get(FLEET_ATTRIBUTE, ""),
        cluster=attrs.get(PLACEMENT_ATTRIBUTE) == "cluster",
        offer=offer,
        mhz_per_core=max(1, cpu_mhz // cores),
        block_group=(blocks.vendor, blocks.type, blocks.name),
        block_ids=tuple(i.id for i in blocks.instances),
        gpu_group=(gpus.vendor, gpus.type, gpus.name) if gpus is not None else None,
        gpu_ids=gpu_ids,
    )


def share_fits(request: ShareRequest, instance: Instance, k: int) -> bool:
    """dstack's offer match, applied to the share of k blocks."""
    return _fits(request, instance.offer, instance.total_blocks, k)


def smallest_share(
    request: ShareRequest, instance: Instance, busy_blocks: int, *, whole: bool = False
) -> int | None:
    """The fewest blocks whose share fits, if that many are free; a gang rank (`whole`)
    takes the instance whole and only when no block of it is busy. None: no share fits."""
    return _smallest(request, instance.offer, instance.total_blocks, busy_blocks, whole)


def fits_some_share(request: ShareRequest, instance: Instance) -> bool:
    """Could any share of the instance fit the ranges at all (all its blocks free)?"""
    return _fits_some(request, instance.offer, instance.total_blocks)


# The answers depend on the request and the instance's offer alone, and a fleet's instances
# share one offer: one evaluation asks thousands of times what a few calls answer.
@functools.lru_cache(maxsize=65_536)
def _fits(request: ShareRequest, offer: InstanceOffer, total: int, k: int) -> bool:
    return matches(resources_spec(request), shared_offer(offer, total, k))


@functools.lru_cache(maxsize=65_536)
def _smallest(
    request: ShareRequest, offer: InstanceOffer, total: int, busy: int, whole: bool
) -> int | None:
    return smallest_fitting_blocks(resources_spec(request), offer, total, busy, whole)


@functools.lru_cache(maxsize=65_536)
def _fits_some(request: ShareRequest, offer: InstanceOffer, total: int) -> bool:
    return any(_fits(request, offer, total, k) for k in range(1, total + 1))


def busy_blocks(instance: Instance, in_use: Collection[str]) -> int:
    return sum(1 for block_id in instance.block_ids if block_id in in_use)


def share_option(instance: Instance, k: int, used: NodeLoad | NodeUsage) -> RankedOption | None:
    """The allocation's resources for k blocks: the first free blocks and GPUs, and the
    share's cores and memory; None if the node's other tenants (`used`: what the snapshot
    and this plan hold there) left too little."""
    in_use = used.device_ids
    total = instance.total_blocks
    free_blocks = [b for b in instance.block_ids if b not in in_use]
    blocks = free_blocks[:k]
    gpu_count = len(instance.gpu_ids) // total * k
    gpus = [g for g in instance.gpu_ids if g not in in_use][:gpu_count]
    if len(blocks) < k or len(gpus) < gpu_count:
        return None
    offer = instance.offer
    memory_mb = gb_to_mb(offer.memory_gb)
    cpu = offer.cpu_count // total * k * instance.mhz_per_core
    memory = memory_mb // total * k
    if used.cpu + cpu > offer.cpu_count * instance.mhz_per_core:
        return None
    if used.memory_mb + memory > memory_mb:
        return None
    devices = [AllocatedDevice(*instance.block_group, tuple(blocks))]
    if gpus and instance.gpu_group is not None:
        devices.append(AllocatedDevice(*instance.gpu_group, tuple(gpus)))
    fill = (total - len(free_blocks) + k) / total
    return RankedOption(instance.node, fill, cpu, memory, 0, tuple(devices))


def count_reason(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def _disk_size_mb(node: Node) -> int:
    """The instance's disk as dstack offers it: its size, not what is free. A fingerprinted
    node (a Ray machine) reports its file system's size as `unique.storage.bytestotal`
    (its DiskMB is the free space, Nomad's); a simulated one has only its disk_mb."""
    total = _int(node.attributes.get(STORAGE_TOTAL_ATTRIBUTE)) // (1024 * 1024)
    return total or node.node_resources.disk_mb - node.reserved_resources.disk_mb


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def _size_mb(text: str) -> int:
    """A device memory attribute ("80 GiB", "24GB", "16384 MiB") in MB; 0 if unknown."""
    match = _SIZE.match(text)
    if match is None:
        return 0
    unit = match.group(2).lower()
    if unit not in _MB_PER_UNIT:
        return 0
    return int(float(match.group(1)) * _MB_PER_UNIT[unit])
