"""Offer matching (reference §2 Matching) and block offers of shared instances (§3 Offer
generation, §4 whole-host rule), with §7 items 7-12 as pure tests."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.dstack import (
    HostState,
    InstanceOffer,
    ResourcesSpec,
    assign_blocks,
    matches,
    mismatch_reason,
    parse_resources,
    plan_blocks,
    shared_offer,
    smallest_fitting_blocks,
)
from contracts.errors import ValidationError

H100_HOST = InstanceOffer(
    cpu_count=64,
    memory_gb=128.0,
    disk_gb=500.0,
    gpu_count=8,
    gpu_name="H100",
    gpu_vendor="nvidia",
    gpu_memory_gb=80.0,
)
CPU_HOST = InstanceOffer(cpu_count=8, memory_gb=32.0, disk_gb=200.0)
SMALL_HOST = InstanceOffer(cpu_count=2, memory_gb=4.0, disk_gb=65.0)  # §7 item 10's hosts
SMALL_JOB = {"cpu": "1..", "memory": "1GB..", "gpu": 0, "disk": "1GB.."}


def spec(**resources: Any) -> ResourcesSpec:
    return parse_resources(resources)


@pytest.mark.parametrize(
    ("resources", "offer", "reason"),
    [
        ({"cpu": "arm:8.."}, H100_HOST, "cpu.arch: offer is x86, spec needs arm"),
        ({"cpu": "128.."}, H100_HOST, "cpu: offer has 64 CPUs, spec needs 128.."),
        ({"cpu": "..32"}, H100_HOST, "cpu: offer has 64 CPUs, spec needs ..32"),
        ({"memory": "256GB"}, H100_HOST, "memory: offer has 128GB, spec needs 256GB"),
        ({"gpu": "MI300X"}, H100_HOST, "gpu.vendor: offer has nvidia, spec needs amd"),
        ({"gpu": "1..4"}, H100_HOST, "gpu.count: offer has 8 GPUs, spec needs 1..4"),
        ({"gpu": 0}, H100_HOST, "gpu.count: offer has 8 GPUs, spec needs 0"),
        ({"gpu": "A100:8"}, H100_HOST, "gpu.name: offer has H100, spec needs one of A100"),
        ({"gpu": "H100"}, CPU_HOST, "gpu.count: offer has 0 GPUs, spec needs 1.."),
        ({"gpu": {"name": "H100", "count": "0.."}}, CPU_HOST, "gpu.name: offer has no GPUs,"),
        ({"gpu": "96GB..:8"}, H100_HOST, "gpu.memory: offer has 80GB per GPU, spec needs 96GB.."),
        ({"gpu": {"count": "0..", "memory": "1GB.."}}, CPU_HOST, "gpu.memory: offer has 0GB"),
        ({"gpu": {"total_memory": "1TB.."}}, H100_HOST, "gpu.total_memory: offer has 640GB,"),
        ({"gpu": {"compute_capability": "10.0"}}, H100_HOST, "gpu.compute_capability: offer"),
        ({"disk": "1TB.."}, H100_HOST, "disk: offer has 500GB, spec needs 1024GB.."),
    ],
)
def test_each_dimension_is_checked_and_named(
    resources: dict[str, Any], offer: InstanceOffer, reason: str
) -> None:
    found = mismatch_reason(spec(**resources), offer)
    assert found is not None and found.startswith(reason)
    assert not matches(spec(**resources), offer)


@pytest.mark.parametrize(
    ("resources", "offer"),
    [
        ({"cpu": "64", "memory": "128GB", "gpu": "H100:80GB:8", "disk": "500GB"}, H100_HOST),
        ({"cpu": "x86:1..", "memory": "..128GB"}, H100_HOST),
        ({"gpu": "h100,a100:8"}, H100_HOST),  # names are case-insensitive
        ({"gpu": "nvidia:8"}, H100_HOST),
        ({"gpu": {"total_memory": "640GB", "compute_capability": "9.0"}}, H100_HOST),
        ({"gpu": "0..8"}, CPU_HOST),  # an inferred vendor does not reject GPU-less offers
        ({"gpu": {"count": "0..", "memory": "..16GB"}}, CPU_HOST),  # per-GPU memory 0
        ({"gpu": {"count": "0..", "total_memory": "0GB"}}, CPU_HOST),
        ({"disk": "1TB.."}, InstanceOffer(cpu_count=4, memory_gb=16.0, disk_gb=0)),  # unknown
        ({}, CPU_HOST),
    ],
)
def test_matching_offers(resources: dict[str, Any], offer: InstanceOffer) -> None:
    assert mismatch_reason(spec(**resources), offer) is None
    assert matches(spec(**resources), offer)


def test_bounds_are_inclusive() -> None:
    assert matches(spec(cpu="8..64", memory="32GB..128GB"), H100_HOST)
    assert matches(spec(cpu="64..128"), H100_HOST)
    assert not matches(spec(cpu="65.."), H100_HOST)


def test_compute_capability_needs_a_known_nvidia_gpu() -> None:
    wants = spec(gpu={"compute_capability": "7.0", "count": "0.."})
    assert not matches(wants, CPU_HOST)
    unknown = InstanceOffer(
        cpu_count=8, memory_gb=32, gpu_count=1, gpu_name="X1", gpu_vendor="nvidia"
    )
    assert not matches(wants, unknown)
    assert matches(wants, InstanceOffer(**{**_fields(unknown), "gpu_compute_capability": (8, 0)}))


def _fields(offer: InstanceOffer) -> dict[str, Any]:
    return {name: getattr(offer, name) for name in offer.__slots__}


def test_shared_offer_divides_cpu_memory_and_gpus_but_not_disk() -> None:
    quarter = shared_offer(H100_HOST, 4, 1)
    assert (quarter.cpu_count, quarter.memory_gb, quarter.gpu_count) == (16, 32.0, 2)
    assert (quarter.disk_gb, quarter.gpu_name, quarter.gpu_memory_gb) == (500.0, "H100", 80.0)
    assert shared_offer(H100_HOST, 4, 4) == H100_HOST
    half_cpu = shared_offer(SMALL_HOST, 2, 1)
    assert (half_cpu.cpu_count, half_cpu.memory_gb, half_cpu.gpu_name) == (1, 2.0, None)


def test_item_7_single_job_takes_one_free_block() -> None:
    job = spec(cpu="1..", memory="1GB..", gpu="1..", disk="1GB..")
    k = smallest_fitting_blocks(job, H100_HOST, total_blocks=4, busy_blocks=1, multinode=False)
    assert k == 1
    assert assign_blocks(1, 4, k) == 2


def test_smallest_fitting_k_grows_with_the_ask() -> None:
    four_gpus = spec(cpu="1..", memory="1GB..", gpu="4..", disk="1GB..")
    assert smallest_fitting_blocks(four_gpus, H100_HOST, 4, 0, multinode=False) == 2
    # The first fitting k (2) needs more than the one free block: shown busy, never assigned.
    assert smallest_fitting_blocks(four_gpus, H100_HOST, 4, 3, multinode=False) is None


def test_item_8_multinode_takes_the_whole_idle_host() -> None:
    job = spec(cpu="1..", memory="1GB..", gpu="1..", disk="1GB..")
    k = smallest_fitting_blocks(job, H100_HOST, total_blocks=4, busy_blocks=0, multinode=True)
    assert k == 4
    assert assign_blocks(0, 4, k) == 4


def test_item_9_multinode_skips_a_partially_busy_host() -> None:
    job = spec(cpu="1..", memory="1GB..", gpu="1..", disk="1GB..")
    assert smallest_fitting_blocks(job, H100_HOST, 4, busy_blocks=1, multinode=True) is None


def test_item_10_issue_2650_multinode_on_two_split_hosts() -> None:
    hosts = [HostState(SMALL_HOST, total_blocks=2), HostState(SMALL_HOST, total_blocks=2)]
    assert plan_blocks(spec(**SMALL_JOB), hosts, nodes=2) == [(0, 2), (1, 2)]


def test_items_11_and_12_blocks_never_count_as_nodes() -> None:
    one_host = [HostState(SMALL_HOST, total_blocks=2)]
    assert plan_blocks(spec(**SMALL_JOB), one_host, nodes=2) == []
    # ... though the same host would take a single-node job on one block.
    assert plan_blocks(spec(**SMALL_JOB), one_host, nodes=1) == [(0, 1)]


def test_item_12_shared_block_offer_for_a_partly_busy_host() -> None:
    one_cpu = spec(cpu=1, memory="1GB..", gpu=0, disk="1GB..")
    busy = [HostState(SMALL_HOST, total_blocks=2, busy_blocks=1)]
    assert plan_blocks(one_cpu, busy, nodes=1) == [(0, 1)]


def test_requirement_below_the_host_does_not_match_multinode() -> None:
    one_cpu = spec(cpu=1, memory="1GB..", gpu=0, disk="1GB..")
    assert smallest_fitting_blocks(one_cpu, SMALL_HOST, 2, 0, multinode=False) == 1
    assert smallest_fitting_blocks(one_cpu, SMALL_HOST, 2, 0, multinode=True) is None


def test_negative_variant_one_host_with_a_busy_block() -> None:
    hosts = [HostState(SMALL_HOST, 2, busy_blocks=1), HostState(SMALL_HOST, 2)]
    assert plan_blocks(spec(**SMALL_JOB), hosts, nodes=2) == []


def test_unsplit_instances_must_be_idle_and_unknown_blocks_are_skipped() -> None:
    job = spec(**SMALL_JOB)
    assert smallest_fitting_blocks(job, SMALL_HOST, 1, 0, multinode=False) == 1
    assert smallest_fitting_blocks(job, SMALL_HOST, 1, 1, multinode=False) is None
    hosts = [HostState(SMALL_HOST, total_blocks=None), HostState(SMALL_HOST, 1, 1)]
    assert plan_blocks(job, hosts, nodes=1) == []


@pytest.mark.parametrize(("total", "busy"), [(0, 0), (2, 3), (2, -1)])
def test_counter_inputs_are_checked(total: int, busy: int) -> None:
    with pytest.raises(ValidationError):
        smallest_fitting_blocks(spec(), SMALL_HOST, total, busy, multinode=False)
