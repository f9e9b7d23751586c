"""dstack's fleet and task configuration semantics, block math and resource matching, as pure
Python over documents already loaded (e.g. by `yaml.safe_load`). No Ray and no Redis here.

The rules are ported from dstack at commit 511c318c8 (see shared/reference/dstack.md):
- `ranges`: `Range[T]` syntax, `intersect` (core/models/resources.py; test_intersect_ranges).
- `sizes`: `Memory` in GB with MB/GB/TB suffixes (core/models/resources.py).
- `gpu`: `GPUSpec` shorthand and object forms, conflicts, vendor inference
  (core/models/resources.py, services/resources.py::set_gpu_vendor_default; gpuhunt tables).
- `resources`: `CPUSpec`, `ResourcesSpec`, defaults and `unconstrained()` (reference §2).
- `nodes`: `FleetNodesSpec` (core/models/fleets.py; test_parses_nodes / test_rejects_nodes).
- `blocks`: divisibility, `auto`, shares and block counters (services/offers.py, §3).
- `matching`: offer matching (gpuhunt.matches) and the smallest fitting share, with the
  multinode whole-host rule of PR #2651 (§2 Matching, §3 Offer generation, §4).
- `fleet`, `task`, `config`: configurations with drover's extensions (§1, §4, §5).
Every error is a `contracts.errors.ValidationError` whose problems name the field path and the
bad value; parsers report all problems of a document at once, and bound the work any input asks.
"""

from contracts.dstack.blocks import (
    Blocks,
    Share,
    assign_blocks,
    auto_blocks,
    blocks_problem,
    parse_blocks,
    release_blocks,
    resolve_blocks,
    share,
)
from contracts.dstack.config import parse_configuration
from contracts.dstack.fleet import (
    FleetConfiguration,
    InstanceShape,
    instance_shape,
    instance_total_blocks,
    parse_fleet,
)
from contracts.dstack.gpu import NO_GPU_SPEC, GPUSpec, Vendor, infer_vendor, parse_gpu
from contracts.dstack.matching import (
    HostState,
    InstanceOffer,
    matches,
    mismatch_reason,
    plan_blocks,
    shared_offer,
    smallest_fitting_blocks,
)
from contracts.dstack.nodes import FleetNodesSpec, parse_nodes
from contracts.dstack.ranges import Range, intersect, parse_int_range
from contracts.dstack.resources import (
    DEFAULT_RESOURCES,
    CpuArch,
    CPUSpec,
    ResourcesSpec,
    parse_cpu,
    parse_resources,
)
from contracts.dstack.sizes import parse_memory, parse_memory_range
from contracts.dstack.task import RetryPolicy, TaskConfiguration, parse_retry, parse_task

__all__ = [
    "DEFAULT_RESOURCES",
    "NO_GPU_SPEC",
    "Blocks",
    "CPUSpec",
    "CpuArch",
    "FleetConfiguration",
    "FleetNodesSpec",
    "GPUSpec",
    "HostState",
    "InstanceOffer",
    "InstanceShape",
    "Range",
    "ResourcesSpec",
    "RetryPolicy",
    "Share",
    "TaskConfiguration",
    "Vendor",
    "assign_blocks",
    "auto_blocks",
    "blocks_problem",
    "infer_vendor",
    "instance_shape",
    "instance_total_blocks",
    "intersect",
    "matches",
    "mismatch_reason",
    "parse_blocks",
    "parse_configuration",
    "parse_cpu",
    "parse_fleet",
    "parse_gpu",
    "parse_int_range",
    "parse_memory",
    "parse_memory_range",
    "parse_nodes",
    "parse_resources",
    "parse_retry",
    "parse_task",
    "plan_blocks",
    "release_blocks",
    "resolve_blocks",
    "share",
    "shared_offer",
    "smallest_fitting_blocks",
]
