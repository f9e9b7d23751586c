"""Offer matching (dstack's requirements_to_query_filter + offer_to_catalog_item +
gpuhunt.matches) and block offers of shared instances (get_shared_instances_with_offers).

Matching rules, all bounds inclusive, a None bound open, checked in this order:
cpu arch (when the spec sets one), cpu count, memory; GPU vendor (when the spec sets one and
the offer has GPUs: a drover reading, so that an inferred NVIDIA vendor on `gpu: 0..8` keeps
GPU-less offers); GPU count; names, case-insensitive (an offer without GPUs fails when names are
set); compute capability (the offer must be NVIDIA with a known capability >= the minimum);
per-GPU memory (0 when the offer has no GPUs); total GPU memory = count x per-GPU; disk, skipped
when the offer's disk is unknown (0).

Shared instances: an instance split into T blocks, `busy_blocks` of them taken, offers the
smallest k in 1..T whose share matches. A multinode job only takes a fully idle instance, and
whole (k = T: host networking, the fix of dstack #2650 in PR #2651). The chosen k is assignable
only if k <= T - busy_blocks (otherwise dstack shows the offer as busy and never assigns it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contracts.dstack.blocks import MAX_BLOCKS, share
from contracts.dstack.gpu import COMPUTE_CAPABILITY, Vendor
from contracts.dstack.ranges import Range
from contracts.dstack.resources import CpuArch, ResourcesSpec
from contracts.dstack.sizes import MB_PER_GB, format_gb, gb_to_mb
from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits

MAX_GPUS = 100_000


@dataclass(frozen=True, slots=True)
class InstanceOffer:
    """One instance (or a share of one) as matching sees it; the GPU fields describe the
    first GPU, as in dstack. `disk_gb` 0 means unknown and is not checked."""

    cpu_count: int
    cpu_arch: CpuArch = "x86"
    memory_gb: float = 0.0
    disk_gb: float = 0.0
    gpu_count: int = 0
    gpu_name: str | None = None
    gpu_vendor: Vendor | None = None
    gpu_memory_gb: float = 0.0
    gpu_compute_capability: tuple[int, int] | None = None  # None: looked up by name


def _gb(value: Range[float]) -> str:
    low = "" if value.min is None else format_gb(value.min)
    high = "" if value.max is None else format_gb(value.max)
    return low if value.exact else f"{low}..{high}"


def _compute_capability(offer: InstanceOffer) -> tuple[int, int] | None:
    if offer.gpu_compute_capability is not None:
        return offer.gpu_compute_capability
    return COMPUTE_CAPABILITY.get((offer.gpu_name or "").lower())


def _gpu_mismatch(spec: ResourcesSpec, offer: InstanceOffer) -> str | None:
    gpu = spec.gpu
    has_gpus = offer.gpu_count > 0
    if gpu.vendor is not None and has_gpus and offer.gpu_vendor != gpu.vendor:
        return f"gpu.vendor: offer has {offer.gpu_vendor}, spec needs {gpu.vendor}"
    if not gpu.count.contains(offer.gpu_count):
        return f"gpu.count: offer has {offer.gpu_count} GPUs, spec needs {gpu.count}"
    if gpu.names:
        wanted = {name.lower() for name in gpu.names}
        if not has_gpus or offer.gpu_name is None or offer.gpu_name.lower() not in wanted:
            shown = offer.gpu_name if has_gpus else "no GPUs"
            return f"gpu.name: offer has {shown}, spec needs one of {', '.join(gpu.names)}"
    if gpu.compute_capability is not None:
        cc = _compute_capability(offer) if has_gpus and offer.gpu_vendor == "nvidia" else None
        if cc is None or cc < gpu.compute_capability:
            shown = "an unknown one" if cc is None else f"{cc[0]}.{cc[1]}"
            need = ".".join(map(str, gpu.compute_capability))
            return f"gpu.compute_capability: offer has {shown}, spec needs {need} or newer"
    per_gpu = offer.gpu_memory_gb if has_gpus else 0.0
    if gpu.memory is not None and not gpu.memory.contains(per_gpu):
        return f"gpu.memory: offer has {format_gb(per_gpu)} per GPU, spec needs {_gb(gpu.memory)}"
    total = offer.gpu_count * per_gpu
    if gpu.total_memory is not None and not gpu.total_memory.contains(total):
        return f"gpu.total_memory: offer has {format_gb(total)}, spec needs {_gb(gpu.total_memory)}"
    return None


def mismatch_reason(spec: ResourcesSpec, offer: InstanceOffer) -> str | None:
    """The first dimension in which `offer` fails `spec` ("why not placed"), None if it fits."""
    if spec.cpu.arch is not None and offer.cpu_arch != spec.cpu.arch:
        return f"cpu.arch: offer is {offer.cpu_arch}, spec needs {spec.cpu.arch}"
    if not spec.cpu.count.contains(offer.cpu_count):
        return f"cpu: offer has {offer.cpu_count} CPUs, spec needs {spec.cpu.count}"
    if not spec.memory.contains(offer.memory_gb):
        return f"memory: offer has {format_gb(offer.memory_gb)}, spec needs {_gb(spec.memory)}"
    gpu_reason = _gpu_mismatch(spec, offer)
    if gpu_reason is not None:
        return gpu_reason
    if spec.disk is not None and offer.disk_gb > 0 and not spec.disk.contains(offer.disk_gb):
        return f"disk: offer has {format_gb(offer.disk_gb)}, spec needs {_gb(spec.disk)}"
    return None


def matches(spec: ResourcesSpec, offer: InstanceOffer) -> bool:
    return mismatch_reason(spec, offer) is None


def shared_offer(offer: InstanceOffer, total_blocks: int, k: int) -> InstanceOffer:
    """k of T blocks of `offer` (generate_shared_offer): CPUs, memory and GPUs divided by T and
    times k (memory in whole MB), disk shared in full."""
    if not 0 <= offer.gpu_count <= MAX_GPUS:
        raise ValidationError(f"gpu_count: {offer.gpu_count} is out of range 0..{MAX_GPUS}")
    gpu_ids = [str(i) for i in range(offer.gpu_count)]
    part = share(offer.cpu_count, gb_to_mb(offer.memory_gb), gpu_ids, total_blocks, k)
    gpus = len(part.gpu_ids)
    return InstanceOffer(
        cpu_count=part.cpu,
        cpu_arch=offer.cpu_arch,
        memory_gb=part.memory_mb / MB_PER_GB,
        disk_gb=offer.disk_gb,
        gpu_count=gpus,
        gpu_name=offer.gpu_name if gpus else None,
        gpu_vendor=offer.gpu_vendor if gpus else None,
        gpu_memory_gb=offer.gpu_memory_gb if gpus else 0.0,
        gpu_compute_capability=offer.gpu_compute_capability if gpus else None,
    )


def smallest_fitting_blocks(
    spec: ResourcesSpec,
    offer: InstanceOffer,
    total_blocks: int,
    busy_blocks: int,
    multinode: bool,
) -> int | None:
    """The k blocks a job would take on this instance, or None when it cannot be placed there:
    multinode jobs try only k = T and only on a fully idle instance; others take the smallest
    k in 1..T whose share matches, and only if k <= T - busy_blocks."""
    if not 1 <= total_blocks <= MAX_BLOCKS:
        raise ValidationError(f"total_blocks: {total_blocks} is out of range 1..{MAX_BLOCKS}")
    if not 0 <= busy_blocks <= total_blocks:
        raise ValidationError(f"busy_blocks: {busy_blocks} is out of range 0..{total_blocks}")
    if multinode and busy_blocks > 0:
        return None
    first = total_blocks if multinode else 1
    for k in range(first, total_blocks + 1):
        if matches(spec, shared_offer(offer, total_blocks, k)):
            return k if k <= total_blocks - busy_blocks else None
    return None


@dataclass(frozen=True, slots=True)
class HostState:
    """An instance as the planner sees it: its full offer and its block counters."""

    offer: InstanceOffer
    total_blocks: int | None = 1  # None: not yet known (`blocks: auto` before discovery)
    busy_blocks: int = 0


def plan_blocks(
    spec: ResourcesSpec, hosts: Sequence[HostState], nodes: int
) -> list[tuple[int, int]]:
    """(host index, k) for every host that can take one job now, at most one offer per host.
    A multinode task (nodes > 1) needs that many distinct fully idle hosts; with fewer, the
    plan is empty (blocks never count as nodes: dstack test_multinode_does_not_count_blocks)."""
    if not 1 <= nodes <= MAX_BLOCKS:
        raise ValidationError(f"nodes: {nodes} is out of range 1..{MAX_BLOCKS}")
    multinode = nodes > 1
    plan: list[tuple[int, int]] = []
    for index, host in enumerate(hosts):
        if host.total_blocks is None:
            continue
        k = smallest_fitting_blocks(
            spec, host.offer, host.total_blocks, host.busy_blocks, multinode
        )
        if k is not None:
            plan.append((index, k))
    return plan if len(plan) >= nodes else []


install_fast_inits(__name__)
