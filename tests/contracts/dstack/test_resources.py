"""GPU, CPU and resources specs (dstack core/models/test_resources.py::TestGpu,
TestComputeCapability; reference §2 and §7 item 2)."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.dstack import (
    DEFAULT_RESOURCES,
    NO_GPU_SPEC,
    CPUSpec,
    GPUSpec,
    Range,
    ResourcesSpec,
    infer_vendor,
    parse_cpu,
    parse_gpu,
    parse_resources,
)
from contracts.dstack.gpu import parse_compute_capability
from contracts.errors import ValidationError

ANY = Range(1, None)


def problems(parse: Any, value: object) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse(value)
    return info.value.problems


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", GPUSpec(vendor="nvidia", count=Range(1, 1))),
        (2, GPUSpec(vendor="nvidia", count=Range(2, 2))),
        (0, GPUSpec(vendor=None, count=Range(0, 0))),
        ("A100", GPUSpec(vendor="nvidia", names=("A100",), count=ANY)),
        ("16GB", GPUSpec(vendor="nvidia", memory=Range(16.0, 16.0), count=ANY)),
        ("A10,A10G:2", GPUSpec(vendor="nvidia", names=("A10", "A10G"), count=Range(2, 2))),
        ("16GB..32", GPUSpec(vendor="nvidia", memory=Range(16.0, 32.0), count=ANY)),
        ("24GB..", GPUSpec(vendor="nvidia", memory=Range(24.0, None), count=ANY)),
        ("MI300X:AMD", GPUSpec(vendor="amd", names=("MI300X",), count=ANY)),
        ("tpu:v5p-1024", GPUSpec(vendor="google", names=("v5p-1024",), count=ANY)),
        ("tpu-v5p-8", GPUSpec(vendor="google", names=("v5p-8",), count=ANY)),
        (
            "A100:80GB:8",
            GPUSpec(vendor="nvidia", names=("A100",), memory=Range(80.0, 80.0), count=Range(8, 8)),
        ),
        ("H100,A100:4", GPUSpec(vendor="nvidia", names=("H100", "A100"), count=Range(4, 4))),
        ("8:h100", GPUSpec(vendor="nvidia", names=("h100",), count=Range(8, 8))),
        ("NVIDIA:80GB:8", GPUSpec(vendor="nvidia", memory=Range(80.0, 80.0), count=Range(8, 8))),
        ("1..2", GPUSpec(vendor="nvidia", count=Range(1, 2))),
        ("0..8", GPUSpec(vendor="nvidia", count=Range(0, 8))),
        ("MI300X,H100:2", GPUSpec(vendor=None, names=("MI300X", "H100"), count=Range(2, 2))),
        ("FancyGPU", GPUSpec(vendor=None, names=("FancyGPU",), count=ANY)),
        ("tt:2", GPUSpec(vendor="tenstorrent", count=Range(2, 2))),
        ("Gaudi2:8", GPUSpec(vendor="intel", names=("Gaudi2",), count=Range(8, 8))),
        (" A100 : 2 ", GPUSpec(vendor="nvidia", names=("A100",), count=Range(2, 2))),
    ],
)
def test_gpu_shorthand_parses(value: object, expected: GPUSpec) -> None:
    assert parse_gpu(value) == expected


@pytest.mark.parametrize(
    ("shorthand", "mapping"),
    [
        ("1", {"count": 1}),
        ("A100", {"name": ["A100"]}),
        ("A100", {"name": "A100"}),
        ("16GB", {"memory": "16GB"}),
        ("A10,A10G:2", {"name": ["A10", "A10G"], "count": 2}),
        ("16GB..32", {"memory": {"min": 16, "max": 32}}),
        ("MI300X:AMD", {"name": "MI300X", "vendor": "amd"}),
        ("tpu:v5p-1024", {"vendor": "tpu", "name": "v5p-1024"}),
    ],
)
def test_gpu_shorthand_equals_object_form(shorthand: str, mapping: dict[str, Any]) -> None:
    assert parse_gpu(shorthand) == parse_gpu(mapping)


def test_gpu_object_form_with_every_field() -> None:
    spec = parse_gpu(
        {
            "count": "2..",
            "name": ["H100"],
            "memory": "80GB",
            "total_memory": "160GB..",
            "vendor": "Nvidia",
            "compute_capability": 9.0,
        }
    )
    assert spec == GPUSpec(
        vendor="nvidia",
        names=("H100",),
        memory=Range(80.0, 80.0),
        count=Range(2, None),
        total_memory=Range(160.0, None),
        compute_capability=(9, 0),
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("Nvidia:A100:2:AMD", "vendor conflict in 'Nvidia:A100:2:AMD' (nvidia and amd)"),
        ("A100:2:3", "count conflict in 'A100:2:3' (2 and 3)"),
        ("A100:", "empty token in 'A100:'"),
        ("A100,:2", "empty GPU name in 'A100,:2'"),
        ("A100:H100", "name conflict in 'A100:H100' (a100 and h100)"),
        ("16GB:24GB", "memory conflict in '16GB:24GB' (16gb and 24gb)"),
    ],
)
def test_gpu_shorthand_rejects(value: str, problem: str) -> None:
    assert problems(parse_gpu, value) == [f"resources.gpu: {problem}"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("3..1", "resources.gpu.count: min 3 is greater than max 1 in '3..1'"),
        ("A100:1.5", "resources.gpu.count: expected a non-negative integer, got '1.5'"),
        ("A100:1xGB", "resources.gpu.memory: expected a size such as 512MB, 16GB or 1TB, got '1x"),
        ("A100:xGB", "resources.gpu: name conflict in 'A100:xGB' (a100 and xgb)"),
        (True, "resources.gpu: expected a count, a string or a mapping, got True"),
        (1.5, "resources.gpu: expected a count, a string or a mapping, got 1.5"),
        ({"vendor": "ibm"}, "resources.gpu.vendor: unknown vendor 'ibm'"),
        ({"compute_capability": "3.x"}, "resources.gpu.compute_capability: expected a compute"),
        ({"name": ["A100", ""]}, "resources.gpu.name: GPU names cannot be empty"),
        ({"size": 1}, "resources.gpu.size: unknown field (allowed: compute_capability, count,"),
    ],
)
def test_gpu_problems_name_the_field_and_value(value: object, problem: str) -> None:
    (found,) = problems(parse_gpu, value)
    assert found.startswith(problem)


def test_gpu_shorthand_reports_all_problems() -> None:
    assert problems(parse_gpu, "A100::2:3") == [
        "resources.gpu: empty token in 'A100::2:3'",
        "resources.gpu: count conflict in 'A100::2:3' (2 and 3)",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3.5", (3, 5)),
        (8.0, (8, 0)),
        (7.5, (7, 5)),
        ((7, 5), (7, 5)),
        ([9, 0], (9, 0)),
        (8, (8, 0)),
    ],
)
def test_compute_capability(value: object, expected: tuple[int, int]) -> None:
    assert parse_compute_capability(value, "cc") == expected


@pytest.mark.parametrize("value", ["3.5.1", "3.x", (1, 2, 3), "", True])
def test_compute_capability_rejects(value: object) -> None:
    with pytest.raises(ValidationError, match=r"^cc: expected a compute capability"):
        parse_compute_capability(value, "cc")


def test_vendor_inference_rules() -> None:
    assert infer_vendor(GPUSpec(vendor="amd", names=("H100",))) == "amd"  # explicit wins
    assert infer_vendor(GPUSpec(count=Range(0, 0))) is None  # count.max == 0
    assert infer_vendor(GPUSpec()) == "nvidia"  # no names: the default image's vendor
    assert infer_vendor(GPUSpec(names=("MI325X", "MI250"))) == "amd"
    assert infer_vendor(GPUSpec(names=("v5e-4", "v4"))) == "google"
    assert infer_vendor(GPUSpec(names=("L40S", "Unknown"))) is None  # not all known


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (8, CPUSpec(count=Range(8, 8))),
        ("2..", CPUSpec(count=Range(2, None))),
        ("arm:8", CPUSpec(arch="arm", count=Range(8, 8))),
        ("8:ARM", CPUSpec(arch="arm", count=Range(8, 8))),
        ("x86", CPUSpec(arch="x86", count=Range(2, None))),
        ("aarch64:4..", CPUSpec(arch="arm", count=Range(4, None))),
        ({"arch": "x86", "count": "4..16"}, CPUSpec(arch="x86", count=Range(4, 16))),
        ({"arch": "arm"}, CPUSpec(arch="arm", count=Range(2, None))),
    ],
)
def test_cpu_parses(value: object, expected: CPUSpec) -> None:
    assert parse_cpu(value) == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("arm:x86", "resources.cpu: arch conflict in 'arm:x86' (arm and x86)"),
        ("8:4", "resources.cpu: count conflict in '8:4' (8 and 4)"),
        ("arm:", "resources.cpu: empty token in 'arm:'"),
        ("mips:4", "resources.cpu.arch: unknown CPU architecture 'mips' (x86 or arm)"),
        ({"cores": 4}, "resources.cpu.cores: unknown field (allowed: arch, count)"),
        (-2, f"resources.cpu: -2 is out of range 0..{10**15}"),
    ],
)
def test_cpu_rejects(value: object, problem: str) -> None:
    assert problems(parse_cpu, value) == [problem]


def test_resources_defaults() -> None:
    spec = parse_resources({})
    assert spec == DEFAULT_RESOURCES == ResourcesSpec()
    assert spec.cpu == CPUSpec(arch=None, count=Range(2, None))
    assert spec.memory == Range(8.0, None)
    assert spec.disk == Range(100.0, None)
    assert spec.gpu == NO_GPU_SPEC == GPUSpec(vendor=None, count=Range(0, None))
    assert spec.shm_size is None


def test_unconstrained_resources() -> None:
    spec = ResourcesSpec.unconstrained()
    assert spec.cpu.count == Range(1, None)
    assert spec.memory == Range(0.0, None)
    assert spec.gpu.count == Range(0, None) and spec.gpu.vendor is None
    assert spec.disk is None


def test_resources_full_document() -> None:
    spec = parse_resources(
        {"cpu": "arm:16", "memory": "64GB..", "shm_size": "1GB", "gpu": "H100:8", "disk": "1TB"}
    )
    assert spec == ResourcesSpec(
        cpu=CPUSpec(arch="arm", count=Range(16, 16)),
        memory=Range(64.0, None),
        shm_size=1.0,
        gpu=GPUSpec(vendor="nvidia", names=("H100",), count=Range(8, 8)),
        disk=Range(1024.0, 1024.0),
    )


def test_disk_forms() -> None:
    short = parse_resources({"disk": "100GB.."})
    assert short == parse_resources({"disk": {"size": "100GB.."}})
    assert short.disk == Range(100.0, None)
    assert parse_resources({"disk": None}).disk is None
    assert parse_resources({"gpu": None, "cpu": None}) == DEFAULT_RESOURCES


def test_resources_report_every_problem_with_its_path() -> None:
    found = problems(
        parse_resources,
        {
            "cpu": "2..1",
            "memory": "lots",
            "gpu": "A100:",
            "disk": {"size": "big"},
            "network": 1,
            "shm_size": -1,
        },
    )
    assert found == [
        "resources.network: unknown field (allowed: cpu, disk, gpu, memory, shm_size)",
        "resources.cpu.count: min 2 is greater than max 1 in '2..1'",
        "resources.memory: expected a size such as 512MB, 16GB or 1TB, got 'lots'",
        f"resources.shm_size: -1 is out of range 0..{10**15}",
        "resources.gpu: empty token in 'A100:'",
        "resources.disk.size: expected a size such as 512MB, 16GB or 1TB, got 'big'",
    ]


def test_inputs_are_bounded() -> None:
    assert problems(parse_gpu, "A" * 1001) == ["resources.gpu: at most 1000 characters, got 1001"]
    assert problems(parse_gpu, {"name": ["A100"] * 1001}) == [
        "resources.gpu.name: at most 1000 items, got 1001"
    ]
    (found,) = problems(parse_resources, {f"k{i}": 1 for i in range(1001)})
    assert found == "resources: at most 1000 keys, got 1001"
