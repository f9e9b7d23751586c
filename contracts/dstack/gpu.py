"""dstack's `GPUSpec` (core/models/resources.py) and vendor inference
(server/services/resources.py::set_gpu_vendor_default, plus inference from known names).

Shorthand: `:`-separated tokens in any order. A vendor token (nvidia, amd, google|tpu, intel,
tenstorrent|tt; any case) sets the vendor; another token starting with a letter is a name list
(`H100,A100`); a token with a unit is the per-GPU memory range (`24GB..`, `16GB..32`); anything
else is the count range (`8`, `1..2`). A repeated kind is a conflict; empty tokens and names are
errors. An int is a count (`gpu: 0` = GPU-less offers only). The object form has `count`,
`name` (a string or a list), `memory`, `total_memory`, `vendor` and `compute_capability` (the
minimum, e.g. `7.5`). The count defaults to `1..` when the GPU spec is given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

from contracts.dstack.fields import (
    Problems,
    check_keys,
    expect_mapping,
    expect_str,
    expect_str_list,
    join,
    optional,
    show,
)
from contracts.dstack.ranges import Range, parse_int_range
from contracts.dstack.sizes import has_unit, parse_memory_range
from contracts.errors import ValidationError
from contracts.fast_init import install_fast_inits

Vendor = Literal["nvidia", "amd", "google", "intel", "tenstorrent"]

VENDOR_ALIASES: Mapping[str, Vendor] = {
    "nvidia": "nvidia",
    "amd": "amd",
    "google": "google",
    "tpu": "google",
    "intel": "intel",
    "tenstorrent": "tenstorrent",
    "tt": "tenstorrent",
}

# Known accelerator names (lower case) -> vendor, after gpuhunt's KNOWN_* tables.
KNOWN_GPUS: Mapping[str, Vendor] = {
    **{n.lower(): "nvidia" for n in ("H100", "H100NVL", "H200", "A100", "A10", "A10G", "A40",
                                     "L4", "L40", "L40S", "T4", "V100", "P100", "RTX4090",
                                     "RTX3090", "RTX6000", "A6000", "B200", "GB200")},
    **{n.lower(): "amd" for n in ("MI100", "MI210", "MI250", "MI250X", "MI300A", "MI300X",
                                  "MI308X", "MI325X")},
    **{n.lower(): "intel" for n in ("Gaudi", "Gaudi2", "Gaudi3")},
}  # fmt: skip

# NVIDIA compute capabilities by name (lower case), after gpuhunt's KNOWN_NVIDIA_GPUS.
COMPUTE_CAPABILITY: Mapping[str, tuple[int, int]] = {
    "p100": (6, 0), "v100": (7, 0), "t4": (7, 5), "rtx6000": (7, 5), "a100": (8, 0),
    "a10": (8, 6), "a10g": (8, 6), "a40": (8, 6), "a6000": (8, 6), "rtx3090": (8, 6),
    "l4": (8, 9), "l40": (8, 9), "l40s": (8, 9), "rtx4090": (8, 9), "h100": (9, 0),
    "h100nvl": (9, 0), "h200": (9, 0), "b200": (10, 0), "gb200": (10, 0),
}  # fmt: skip

# TPU names: a version with an optional core count, e.g. v5p-1024, v4, v5litepod-8.
_TPU = re.compile(r"^(v2|v3|v4|v5p|v5e|v5litepod|v6e)(-\d{1,6})?$")
_CC = re.compile(r"^(\d{1,3})\.(\d{1,3})$")
_GPU_KEYS = ("count", "name", "memory", "total_memory", "vendor", "compute_capability")


ONE_OR_MORE: Range[int] = Range(1, None)
"""The GPU count when `gpu` is given without one: `1..`."""


@dataclass(frozen=True, slots=True)
class GPUSpec:
    """What a run asks of the GPUs of one node (or, for a fleet, of each instance)."""

    vendor: Vendor | None = None
    names: tuple[str, ...] = ()
    memory: Range[float] | None = None  # per GPU, GB
    count: Range[int] = ONE_OR_MORE
    total_memory: Range[float] | None = None  # count x per-GPU memory, GB
    compute_capability: tuple[int, int] | None = None  # minimum; NVIDIA only


NO_GPU_SPEC = GPUSpec(count=Range(0, None))
"""dstack HEAD's DEFAULT_GPU_SPEC, used when `gpu` is omitted: any number of GPUs, no vendor."""


def vendor_of_name(name: str) -> Vendor | None:
    """The vendor of a known accelerator name (any case), None when unknown."""
    lowered = name.lower()
    if _TPU.match(lowered):
        return "google"
    return KNOWN_GPUS.get(lowered)


def infer_vendor(spec: GPUSpec) -> Vendor | None:
    """dstack's defaulting: an explicit vendor wins; count.max == 0 sets none; names all known
    and of one vendor give that vendor; no names give NVIDIA (the default image's vendor)."""
    if spec.vendor is not None:
        return spec.vendor
    if spec.count.max == 0:
        return None
    if not spec.names:
        return "nvidia"
    vendors = {vendor_of_name(name) for name in spec.names}
    return vendors.pop() if len(vendors) == 1 else None


def parse_vendor(value: object, where: str) -> Vendor:
    text = expect_str(value, where).lower()
    if text not in VENDOR_ALIASES:
        raise ValidationError(
            f"{where}: unknown vendor {show(value)} (expected one of {', '.join(VENDOR_ALIASES)})"
        )
    return VENDOR_ALIASES[text]


def parse_compute_capability(value: object, where: str) -> tuple[int, int]:
    """`7.5`, `"7.5"`, `8` (= 8.0) or `[7, 5]`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value) if isinstance(value, float) else f"{value}.0"
    if isinstance(value, str):
        match = _CC.match(value.strip()) if len(value) < 20 else None
        if match:
            return int(match.group(1)), int(match.group(2))
    elif isinstance(value, list | tuple) and len(value) == 2:
        major, minor = value
        if all(type(v) is int and 0 <= v < 1000 for v in (major, minor)):
            return cast(int, major), cast(int, minor)
    raise ValidationError(f"{where}: expected a compute capability such as 7.5, got {show(value)}")


def _names(value: object, where: str) -> tuple[str, ...]:
    items = (expect_str(value, where),) if isinstance(value, str) else expect_str_list(value, where)
    if any(not name.strip() for name in items):
        raise ValidationError(f"{where}: GPU names cannot be empty, got {show(value)}")
    # dstack strips the deprecated `tpu-` prefix (`tpu-v5p-1024` == `v5p-1024`).
    return tuple(name.strip().removeprefix("tpu-") for name in items)


def _with_vendor(spec: GPUSpec) -> GPUSpec:
    vendor = infer_vendor(spec)
    if vendor == spec.vendor:
        return spec
    return GPUSpec(
        vendor, spec.names, spec.memory, spec.count, spec.total_memory, spec.compute_capability
    )


def _token_kind(token: str) -> str:
    if token.lower() in VENDOR_ALIASES:
        return "vendor"
    if token[0].isalpha():  # a GPU name always starts with a letter
        return "name"
    return "memory" if has_unit(token) else "count"


def _parse_shorthand(value: str, where: str) -> GPUSpec:
    text = expect_str(value, where).replace(" ", "")
    problems = Problems()
    found: dict[str, str] = {}
    vendor: Vendor | None = None
    names: tuple[str, ...] = ()
    memory: Range[float] | None = None
    count: Range[int] | None = None
    for token in text.split(":"):
        if not token:
            problems.add(f"{where}: empty token in {show(value)}")
            continue
        kind = _token_kind(token)
        if kind in found:
            problems.add(
                f"{where}: {kind} conflict in {show(value)} ({found[kind]} and {token.lower()})"
            )
            continue
        found[kind] = token.lower()
        if kind == "vendor":
            vendor = VENDOR_ALIASES[token.lower()]
        elif kind == "name" and "" in token.split(","):
            problems.add(f"{where}: empty GPU name in {show(value)}")
        elif kind == "name":
            names = tuple(name.removeprefix("tpu-") for name in token.split(","))
        elif kind == "memory":
            memory = problems.run(parse_memory_range, token, join(where, "memory"))
        else:
            count = problems.run(parse_int_range, token, join(where, "count"))
    problems.raise_if_any()
    return GPUSpec(vendor=vendor, names=names, memory=memory, count=count or ONE_OR_MORE)


def _parse_object(value: Mapping[str, object], where: str) -> GPUSpec:
    data = expect_mapping(value, where)
    problems = Problems()
    for problem in check_keys(data, _GPU_KEYS, where):
        problems.add(problem)
    spec = GPUSpec(
        vendor=optional(data, "vendor", where, parse_vendor, problems),
        names=optional(data, "name", where, _names, problems) or (),
        memory=optional(data, "memory", where, parse_memory_range, problems),
        count=optional(data, "count", where, parse_int_range, problems) or ONE_OR_MORE,
        total_memory=optional(data, "total_memory", where, parse_memory_range, problems),
        compute_capability=optional(
            data, "compute_capability", where, parse_compute_capability, problems
        ),
    )
    problems.raise_if_any()
    return spec


def parse_gpu(value: object, where: str = "resources.gpu") -> GPUSpec:
    """A GPUSpec from an int count, a shorthand string or an object; the vendor is inferred."""
    if isinstance(value, bool):
        raise ValidationError(f"{where}: expected a count, a string or a mapping, got {value!r}")
    if isinstance(value, int):
        return _with_vendor(GPUSpec(count=parse_int_range(value, join(where, "count"))))
    if isinstance(value, str):
        return _with_vendor(_parse_shorthand(value, where))
    if isinstance(value, Mapping):
        return _with_vendor(_parse_object(value, where))
    raise ValidationError(f"{where}: expected a count, a string or a mapping, got {show(value)}")


install_fast_inits(__name__)
