"""Placing dstack runs on instance blocks (`TaskGroup.share`; see contracts/share.py).

An instance of a fleet splits into T blocks, carried as the device group
`drover/block/<fleet>` with T instances; an allocation holding k of them holds the share
⌊cores/T⌋·k, ⌊memory/T⌋·k and ⌊GPUs/T⌋·k GPUs (by device ID), the disk shared. Because blocks
and GPUs are device instances, the leader's device re-check refuses a block or GPU that a
concurrent plan took first, and the node's usage counts busy blocks with no new table.

- One rank (`ShareStack.select`): on each feasible instance, the smallest k whose share fits
  every range among the blocks still free (dstack's offer rule); the instance with the
  fewest free blocks left afterwards wins (best fit keeps whole instances free for gangs),
  an exact fill ending the walk.
- A gang (`ShareStack.select_gang`): N distinct instances of one `placement: cluster` fleet,
  each fully idle and taken whole (k = T), or nothing. Among fleets with enough, the one with
  the fewest idle instances wins (best fit again); the leader commits the plan all at once.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import cast, get_args

from actors.state import EMPTY_USAGE
from actors.worker.core.scheduler.context import EvalContext, NodeLoad
from actors.worker.core.scheduler.feasible import FilterMetrics, GroupFeasibility
from actors.worker.core.scheduler.select import RankedOption
from contracts import AllocMetric, Job, Node, TaskGroup
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


def instance_of(node: Node) -> Instance | None:
    """The instance view of a node, or None if it is not split into blocks."""
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
        disk_gb=(resources.disk_mb - reserved.disk_mb) / MB_PER_GB,
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
    return matches(resources_spec(request), shared_offer(instance.offer, instance.total_blocks, k))


def smallest_share(
    request: ShareRequest, instance: Instance, busy_blocks: int, *, whole: bool = False
) -> int | None:
    """The fewest blocks whose share fits, if that many are free; a gang rank (`whole`)
    takes the instance whole and only when no block of it is busy. None: no share fits."""
    return smallest_fitting_blocks(
        resources_spec(request), instance.offer, instance.total_blocks, busy_blocks, whole
    )


def busy_blocks(instance: Instance, in_use: Collection[str]) -> int:
    return sum(1 for block_id in instance.block_ids if block_id in in_use)


def share_option(
    instance: Instance, k: int, load: NodeLoad | None, in_use: Collection[str]
) -> RankedOption | None:
    """The allocation's resources for k blocks: the first free blocks and GPUs, and the
    share's cores and memory; None if the node's other tenants left too little."""
    total = instance.total_blocks
    blocks = [b for b in instance.block_ids if b not in in_use][:k]
    gpu_count = len(instance.gpu_ids) // total * k
    gpus = [g for g in instance.gpu_ids if g not in in_use][:gpu_count]
    if len(blocks) < k or len(gpus) < gpu_count:
        return None
    offer = instance.offer
    memory_mb = gb_to_mb(offer.memory_gb)
    cpu = offer.cpu_count // total * k * instance.mhz_per_core
    memory = memory_mb // total * k
    used_cpu = load.cpu if load is not None else 0
    used_memory = load.memory_mb if load is not None else 0
    if used_cpu + cpu > offer.cpu_count * instance.mhz_per_core:
        return None
    if used_memory + memory > memory_mb:
        return None
    devices = [AllocatedDevice(*instance.block_group, tuple(blocks))]
    if gpus and instance.gpu_group is not None:
        devices.append(AllocatedDevice(*instance.gpu_group, tuple(gpus)))
    fill = (total - len([b for b in instance.block_ids if b not in in_use]) + k) / total
    return RankedOption(instance.node, fill, cpu, memory, 0, tuple(devices))


class ShareStack:
    """The placement chain of a group with a `share` (GroupStack's counterpart)."""

    def __init__(
        self, ctx: EvalContext, job: Job, tg: TaskGroup, base_nodes: Sequence[Node]
    ) -> None:
        assert tg.share is not None
        self.ctx = ctx
        self.job = job
        self.tg = tg
        self.request: ShareRequest = tg.share
        self.base_nodes = base_nodes
        self.feasibility = GroupFeasibility(job, tg, ctx.eligibility)
        self.filter_metrics = FilterMetrics()
        self.phases = None
        self._candidates: list[Instance] | None = None
        self._static_reasons: dict[str, int] = {}  # instances no share of could ever fit
        self._reasons: dict[str, int] = {}  # instances the last walk passed over
        self._walked = 0

    # -- GroupStack's reporting interface ---------------------------------------------------

    def feasibility_ns(self) -> int:
        return 0

    def report_phases(self, start_ns: int, end_ns: int, feasibility_ns: int) -> None:
        return None

    # -- candidates ------------------------------------------------------------------------

    def candidates(self) -> list[Instance]:
        """Feasible instances (drivers, constraints, datacenters, pool) of the requested
        fleets whose whole share could fit the ranges at all: decided once per evaluation."""
        if self._candidates is None:
            fleets = set(self.request.fleets)
            found = []
            for node in self.base_nodes:
                instance = instance_of(node)
                if instance is None:
                    continue
                if not self.feasibility.check(node, self.filter_metrics):
                    continue
                if fleets and instance.fleet not in fleets:
                    _count(self._static_reasons, NOT_IN_FLEETS)
                    continue
                if not any(
                    share_fits(self.request, instance, k)
                    for k in range(1, instance.total_blocks + 1)
                ):
                    _count(self._static_reasons, NO_FIT)
                    continue
                found.append(instance)
            self._candidates = found
        return self._candidates

    def _reason(self, reason: str) -> None:
        _count(self._reasons, reason)

    def _in_use(self, node_id: str) -> tuple[NodeLoad | None, Collection[str]]:
        ctx = self.ctx
        load = ctx.loads.get(node_id)
        if load is not None:
            return load, load.device_ids
        usage = ctx.usage_lookup(node_id) or EMPTY_USAGE
        return None, usage.device_ids

    # -- one rank --------------------------------------------------------------------------

    def select(self, penalty_nodes: frozenset[str] = frozenset()) -> RankedOption | None:
        best: RankedOption | None = None
        candidates = self.candidates()
        self._walked, self._reasons = 0, {}
        for instance in candidates:
            node_id = instance.node.id
            self._walked += 1
            load, in_use = self._in_use(node_id)
            k = smallest_share(self.request, instance, busy_blocks(instance, in_use))
            if k is None:
                self._reason(NO_FREE_BLOCKS)
                continue
            option = share_option(instance, k, load, in_use)
            if option is None:
                self._reason(NO_FREE_BLOCKS)
                continue
            if node_id in penalty_nodes:
                option.final_score -= 1.0
            if best is None or option.final_score > best.final_score:
                best = option
                if option.final_score >= 1.0:
                    break  # fills the instance exactly: nothing packs better
        if best is not None:
            self._charge(best)
        return best

    # -- a gang ----------------------------------------------------------------------------

    def select_gang(self, ranks: int, fleet: str = "") -> list[RankedOption] | None:
        """`ranks` whole idle instances of one cluster fleet (`fleet`, if some ranks already
        run there), charged to the plan; None, with nothing charged, if no fleet has them."""
        idle: dict[str, list[Instance]] = {}
        candidates = self.candidates()
        self._walked, self._reasons = 0, {}
        for instance in candidates:
            self._walked += 1
            if not instance.cluster:
                self._reason(NOT_CLUSTER)
                continue
            if fleet and instance.fleet != fleet:
                continue
            load, in_use = self._in_use(instance.node.id)
            if in_use or (load is not None and (load.cpu or load.memory_mb)):
                self._reason(NOT_IDLE)
                continue
            usage = self.ctx.usage_lookup(instance.node.id)
            if usage is not None and usage.alloc_count:
                self._reason(NOT_IDLE)
                continue
            if smallest_share(self.request, instance, 0, whole=True) is None:
                self._reason(NO_FIT)
                continue
            idle.setdefault(instance.fleet, []).append(instance)
        fitting = [(len(members), name) for name, members in idle.items() if len(members) >= ranks]
        if not fitting:
            return None
        _, chosen = min(fitting)
        options = []
        for instance in idle[chosen][:ranks]:
            option = share_option(instance, instance.total_blocks, None, ())
            assert option is not None  # an idle instance holds its whole share
            options.append(option)
        for option in options:
            self._charge(option)
        return options

    def _charge(self, option: RankedOption) -> None:
        load = self.ctx.load(option.node.id)
        load.cpu += option.cpu
        load.memory_mb += option.memory_mb
        for device in option.devices:
            load.claim_devices(device.device_ids)

    def failure_metric(self) -> AllocMetric:
        static = self.filter_metrics
        reasons = dict(self._static_reasons)
        for reason, n in self._reasons.items():
            _count(reasons, reason, n)
        return AllocMetric(
            nodes_evaluated=self._walked + static.nodes_filtered,
            nodes_filtered=static.nodes_filtered,
            nodes_in_pool=len(self.base_nodes),
            class_filtered=dict(static.class_filtered),
            constraint_filtered=dict(static.constraint_filtered),
            nodes_exhausted=sum(reasons.values()),
            dimension_exhausted=reasons,
        )


def _count(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


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
