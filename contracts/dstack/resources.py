"""dstack's `ResourcesSpec` and `CPUSpec` (core/models/resources.py).

`resources: {cpu, memory, shm_size, gpu, disk}`; any key may be left out:
- `cpu`: a count range (`8`, `"2.."`), `"arch:count"` in any order (`"arm:8"`), or
  `{arch, count}`; arch is x86 or arm. Default count `2..`.
- `memory`: a memory range, default `8GB..`; `shm_size`: one size, optional.
- `gpu`: see `gpu.py`; omitted means any number of GPUs (`0..`, HEAD's DEFAULT_GPU_SPEC).
- `disk`: `{size: range}` or the range itself (`"100GB.."`), default `100GB..`; null means no
  disk constraint.
HEAD fleets with no `resources` at all use `ResourcesSpec.unconstrained()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from contracts.dstack.fields import (
    Problems,
    check_keys,
    expect_mapping,
    expect_str,
    join,
    optional,
    show,
)
from contracts.dstack.gpu import NO_GPU_SPEC, GPUSpec, parse_gpu
from contracts.dstack.ranges import Range, parse_int_range
from contracts.dstack.sizes import parse_memory, parse_memory_range
from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits

CpuArch = Literal["x86", "arm"]

CPU_ARCH_ALIASES: Mapping[str, CpuArch] = {
    "x86": "x86",
    "x86_64": "x86",
    "amd64": "x86",
    "arm": "arm",
    "arm64": "arm",
    "aarch64": "arm",
}

DEFAULT_CPU_COUNT: Range[int] = Range(2, None)
DEFAULT_MEMORY: Range[float] = Range(8.0, None)
DEFAULT_DISK: Range[float] = Range(100.0, None)
_RESOURCE_KEYS = ("cpu", "memory", "shm_size", "gpu", "disk")


@dataclass(frozen=True, slots=True)
class CPUSpec:
    arch: CpuArch | None = None
    count: Range[int] = DEFAULT_CPU_COUNT


@dataclass(frozen=True, slots=True)
class ResourcesSpec:
    """What a run asks of one node; memory and disk in GB. `disk` None: not constrained."""

    cpu: CPUSpec = CPUSpec()
    memory: Range[float] = DEFAULT_MEMORY
    shm_size: float | None = None
    gpu: GPUSpec = NO_GPU_SPEC
    disk: Range[float] | None = DEFAULT_DISK

    @classmethod
    def unconstrained(cls) -> ResourcesSpec:
        """HEAD's fleet default: cpu 1.., memory 0.., gpu 0.., no disk constraint."""
        return cls(
            cpu=CPUSpec(count=Range(1, None)),
            memory=Range(0.0, None),
            gpu=NO_GPU_SPEC,
            disk=None,
        )


DEFAULT_RESOURCES = ResourcesSpec()
"""dstack's normal defaults: cpu 2.., memory 8GB.., disk 100GB.., any number of GPUs."""


def parse_cpu_arch(value: object, where: str) -> CpuArch:
    text = expect_str(value, where).lower()
    if text not in CPU_ARCH_ALIASES:
        raise ValidationError(f"{where}: unknown CPU architecture {show(value)} (x86 or arm)")
    return CPU_ARCH_ALIASES[text]


def _parse_cpu_shorthand(value: str, where: str) -> CPUSpec:
    text = expect_str(value, where).replace(" ", "")
    problems = Problems()
    arch: CpuArch | None = None
    count: Range[int] | None = None
    seen: dict[str, str] = {}
    for token in text.split(":"):
        if not token:
            problems.add(f"{where}: empty token in {show(value)}")
            continue
        kind = "arch" if token[0].isalpha() else "count"
        if kind in seen:
            problems.add(f"{where}: {kind} conflict in {show(value)} ({seen[kind]} and {token})")
            continue
        seen[kind] = token
        if kind == "arch":
            arch = problems.run(parse_cpu_arch, token, join(where, "arch"))
        else:
            count = problems.run(parse_int_range, token, join(where, "count"))
    problems.raise_if_any()
    return CPUSpec(arch=arch, count=count or DEFAULT_CPU_COUNT)


def parse_cpu(value: object, where: str = "resources.cpu") -> CPUSpec:
    """`8`, `"2.."`, `"arm:8"`, `"x86"` or `{arch, count}`; the count defaults to `2..`."""
    if isinstance(value, str):
        return _parse_cpu_shorthand(value, where)
    if isinstance(value, Mapping):
        data = expect_mapping(value, where)
        problems = Problems()
        for problem in check_keys(data, ("arch", "count"), where):
            problems.add(problem)
        spec = CPUSpec(
            arch=optional(data, "arch", where, parse_cpu_arch, problems),
            count=optional(data, "count", where, parse_int_range, problems) or DEFAULT_CPU_COUNT,
        )
        problems.raise_if_any()
        return spec
    return CPUSpec(count=parse_int_range(value, where))


def parse_disk(value: object, where: str = "resources.disk") -> Range[float]:
    """`{size: "100GB.."}` or the size range itself."""
    if isinstance(value, Mapping):
        data = expect_mapping(value, where)
        unknown = check_keys(data, ("size",), where)
        if unknown:
            raise ValidationError(unknown)
        if data.get("size") is None:
            raise ValidationError(f"{join(where, 'size')}: required, got {show(value)}")
        return parse_memory_range(data["size"], join(where, "size"))
    return parse_memory_range(value, where)


def parse_resources(value: object, where: str = "resources") -> ResourcesSpec:
    """A ResourcesSpec with dstack's defaults for the keys left out; every problem at once."""
    data = expect_mapping(value, where)
    problems = Problems()
    for problem in check_keys(data, _RESOURCE_KEYS, where):
        problems.add(problem)
    cpu = optional(data, "cpu", where, parse_cpu, problems)
    memory = optional(data, "memory", where, parse_memory_range, problems)
    shm_size = optional(data, "shm_size", where, parse_memory, problems)
    gpu = optional(data, "gpu", where, parse_gpu, problems)
    disk = optional(data, "disk", where, parse_disk, problems)
    problems.raise_if_any()
    return ResourcesSpec(
        cpu=cpu or CPUSpec(),
        memory=memory or DEFAULT_MEMORY,
        shm_size=shm_size,
        gpu=gpu or NO_GPU_SPEC,
        disk=None if "disk" in data and data["disk"] is None else disk or DEFAULT_DISK,
    )


install_fast_inits(__name__)
