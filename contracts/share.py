"""A run's ask for a share of an instance, as dstack matches it (`TaskGroup.share`).

A Nomad task group asks for fixed amounts (500 MHz, 256 MB). A dstack run asks for ranges
(`cpu: 2..`, `memory: 16GB..`, `gpu: A100:80GB:2`) and is given a share of an instance: the
smallest number k of its T blocks whose share (⌊cpu/T⌋·k cores, ⌊memory/T⌋·k, ⌊gpus/T⌋·k
GPUs by device ID; disk shared) satisfies every range. A gang (`nodes: N` > 1) takes N whole,
fully idle instances (k = T) of one `placement: cluster` fleet, committed together or not
at all. Blocks are node devices (`drover/block/<fleet>`), so the leader's device re-check is
what keeps two plans from handing out one block (see actors/worker/core/scheduler/share.py).

The ranges are in drover's units (cores, MB) with dstack's inclusive bounds; None is open.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from contracts.dstack.gpu import GPUSpec, Vendor
from contracts.dstack.ranges import Range
from contracts.dstack.resources import CpuArch, CPUSpec, ResourcesSpec
from contracts.dstack.sizes import MB_PER_GB, gb_to_mb
from contracts.fast_init import install_fast_inits

if TYPE_CHECKING:  # contracts.job imports this module
    from contracts.allocation import Allocation
    from contracts.job import Job
    from contracts.node import Node

BLOCK_VENDOR = "drover"
BLOCK_TYPE = "block"
"""Blocks are device instances `drover/block/<fleet>` on a fleet's instances."""
# Job meta of a dstack run (see actors/api/core/runs.py).
RUN_META = "drover.run"  # the configuration type it came from ("task")
STOP_CRITERIA_META = "drover.run.stop_criteria"  # all-done | master-done
NO_CAPACITY_META = "drover.run.no_capacity"  # wait (a blocked evaluation) | fail
WAIT_LIMIT_META = "drover.run.wait_s"  # how long a run may wait for capacity (retry.duration)
RUN_ENDED_META = "drover.run.ended"  # why the leader ended a run: "no-capacity"
ENDED_NO_CAPACITY = "no-capacity"
MASTER_DONE = "master-done"
NO_CAPACITY_WAIT = "wait"
NO_CAPACITY_FAIL = "fail"
# Bounds on what one fleet file can ask drover to build and every replica to hold.
MAX_BLOCKS_PER_INSTANCE = 256
MAX_INSTANCES_PER_FLEET = 10_000
MAX_GPUS_PER_INSTANCE = 1024
FLEET_ATTRIBUTE = "drover.fleet"
PLACEMENT_ATTRIBUTE = "drover.fleet.placement"  # "any" or "cluster" (gangs need cluster)


@dataclass(frozen=True, slots=True)
class IntRange:
    """An inclusive range; None is open (`2..` is IntRange(2, None))."""

    min: int | None = None
    max: int | None = None

    def contains(self, value: int) -> bool:
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def show(self, unit: str = "") -> str:
        low = "" if self.min is None else f"{self.min}{unit}"
        high = "" if self.max is None else f"{self.max}{unit}"
        return low if self.min == self.max and self.min is not None else f"{low}..{high}"


@dataclass(frozen=True, slots=True)
class ShareRequest:
    cpu: IntRange = IntRange(2, None)  # cores
    cpu_arch: str = ""  # "" any, "x86" or "arm"
    memory_mb: IntRange = IntRange(8192, None)
    disk_mb: IntRange = IntRange()  # the instance's disk is shared, not divided
    gpu_count: IntRange = IntRange(0, None)
    gpu_names: tuple[str, ...] = field(default_factory=tuple)  # any of, case-insensitive
    gpu_vendor: str = ""
    gpu_memory_mb: IntRange = IntRange()  # per GPU
    gpu_total_memory_mb: IntRange = IntRange()
    gpu_compute_capability: str = ""  # a minimum, e.g. "8.0" (NVIDIA only)
    gang: bool = False  # every allocation of the group on its own whole instance, all or none
    fleets: tuple[str, ...] = field(default_factory=tuple)  # only these fleets ("" any)


def is_run(job: Job) -> bool:
    """A job made from a dstack task file: its group carries a share (Nomad's API refuses
    one, so no other job has it)."""
    return any(tg.share is not None for tg in job.task_groups)


def node_block_ids(node: Node) -> tuple[str, ...]:
    """The instance's blocks (its `drover/block/<fleet>` device instances); () if unsplit."""
    for group in node.node_resources.devices:
        if group.vendor == BLOCK_VENDOR and group.type == BLOCK_TYPE:
            return tuple(i.id for i in group.instances)
    return ()


def held_ids(alloc: Allocation, device_type: str) -> tuple[str, ...]:
    """The device instances of one type (BLOCK_TYPE, "gpu") an allocation holds."""
    return tuple(
        i for d in alloc.allocated_resources.devices if d.type == device_type for i in d.device_ids
    )


def share_request(
    resources: ResourcesSpec, *, gang: bool = False, fleets: tuple[str, ...] = ()
) -> ShareRequest:
    """A run's resources (dstack's spec, GB) as the group's wire record (MB)."""
    gpu = resources.gpu
    capability = gpu.compute_capability
    return ShareRequest(
        cpu=_ints(resources.cpu.count),
        cpu_arch=resources.cpu.arch or "",
        memory_mb=_mbs(resources.memory),
        disk_mb=_mbs(resources.disk),
        gpu_count=_ints(gpu.count),
        gpu_names=gpu.names,
        gpu_vendor=gpu.vendor or "",
        gpu_memory_mb=_mbs(gpu.memory),
        gpu_total_memory_mb=_mbs(gpu.total_memory),
        gpu_compute_capability=f"{capability[0]}.{capability[1]}" if capability else "",
        gang=gang,
        fleets=fleets,
    )


@functools.lru_cache(maxsize=1024)
def resources_spec(request: ShareRequest) -> ResourcesSpec:
    """The record back as dstack's spec, which the matching rules read
    (contracts/dstack/matching.py: the one implementation of them)."""
    capability = None
    if request.gpu_compute_capability:
        major, _, minor = request.gpu_compute_capability.partition(".")
        capability = (int(major), int(minor or 0))
    return ResourcesSpec(
        cpu=CPUSpec(
            arch=cast(CpuArch, request.cpu_arch) if request.cpu_arch else None,
            count=_range(request.cpu) or Range(0, None),
        ),
        memory=_gbs(request.memory_mb) or Range(0.0, None),
        gpu=GPUSpec(
            vendor=cast(Vendor, request.gpu_vendor) if request.gpu_vendor else None,
            names=request.gpu_names,
            memory=_gbs(request.gpu_memory_mb),
            count=_range(request.gpu_count) or Range(0, None),
            total_memory=_gbs(request.gpu_total_memory_mb),
            compute_capability=capability,
        ),
        disk=_gbs(request.disk_mb),
    )


def _ints(value: Range[int]) -> IntRange:
    return IntRange(value.min, value.max)


def _mbs(value: Range[float] | None) -> IntRange:
    if value is None:
        return IntRange()
    return IntRange(
        None if value.min is None else gb_to_mb(value.min),
        None if value.max is None else gb_to_mb(value.max),
    )


def _range(value: IntRange) -> Range[int] | None:
    return None if value.min is None and value.max is None else Range(value.min, value.max)


def _gbs(value: IntRange) -> Range[float] | None:
    if value.min is None and value.max is None:
        return None
    return Range(
        None if value.min is None else value.min / MB_PER_GB,
        None if value.max is None else value.max / MB_PER_GB,
    )


install_fast_inits(__name__)
