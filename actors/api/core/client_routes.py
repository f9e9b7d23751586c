"""`GET /v1/client/stats` and `GET /v1/client/allocation/:id/stats` (Nomad's client stats
endpoints), from what drover knows of a node and its allocations: the node's fingerprint and
the usage its agent measured (the usage stream `/v1/metrics` reads, contracts/usage.py).

Nomad's client samples its whole host (every core, every disk, uptime); drover's agents
measure their allocations only. So a node's stats are its fingerprinted totals with what its
allocations were measured using, and an allocation's are its newest sample (per allocation,
not per task: a group of one task gets it on the task too). What nobody measured is zero and
absent from `Measured`, as in Nomad's ResourceUsage.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from actors.api.core.call import Call
from actors.api.core.errors import ApiError, bad_request
from actors.api.core.http_types import ApiResponse
from actors.state import StateReader
from contracts.allocation import Allocation
from contracts.node import Node
from contracts.usage import AllocUsage, UsageReport

MB = 1024 * 1024
USAGE_MAX_AGE_S = 60.0  # older samples describe an allocation no longer
USAGE_ENTRIES = 1_000  # newest usage stream entries read per request


def newest_samples(reports: Iterable[UsageReport], oldest_ns: int) -> dict[str, AllocUsage]:
    """Each allocation's newest sample taken at or after `oldest_ns`."""
    newest: dict[str, AllocUsage] = {}
    for report in reports:
        for sample in report.samples:
            kept = newest.get(sample.alloc_id)
            if sample.time_ns >= oldest_ns and (kept is None or sample.time_ns > kept.time_ns):
                newest[sample.alloc_id] = sample
    return newest


def resource_usage(sample: AllocUsage | None) -> dict[str, Any]:
    """Nomad's ResourceUsage: memory in bytes, CPU as MHz used (TotalTicks) and percent of
    one core; `Measured` names the figures that were measured."""
    memory = int(sample.memory_mb * MB) if sample else 0
    return {
        "MemoryStats": {
            "RSS": memory,
            "Cache": 0,
            "Swap": 0,
            "Usage": memory,
            "MaxUsage": 0,
            "KernelUsage": 0,
            "KernelMaxUsage": 0,
            "Measured": ["RSS", "Usage"] if sample else [],
        },
        "CpuStats": {
            "SystemMode": 0.0,
            "UserMode": 0.0,
            "TotalTicks": sample.cpu_mhz if sample else 0.0,
            "ThrottledPeriods": 0,
            "ThrottledTime": 0,
            "Percent": sample.cpu_percent if sample else 0.0,
            "Measured": ["Percent", "Total Ticks"] if sample else [],
        },
        "DeviceStats": None,
    }


def alloc_stats_json(
    state: StateReader, alloc: Allocation, sample: AllocUsage | None, now_ns: int
) -> dict[str, Any]:
    timestamp = sample.time_ns if sample else now_ns
    job = state.job_version(alloc.namespace, alloc.job_id, alloc.job_version) or state.job(
        alloc.namespace, alloc.job_id
    )
    group = next((g for g in job.task_groups if g.name == alloc.task_group), None) if job else None
    tasks = [t.name for t in group.tasks] if group else []
    per_task = sample if len(tasks) == 1 else None
    return {
        "ResourceUsage": resource_usage(sample),
        "Tasks": {
            name: {"ResourceUsage": resource_usage(per_task), "Timestamp": timestamp, "Pids": None}
            for name in tasks
        },
        "Timestamp": timestamp,
    }


def host_stats_json(
    node: Node, allocs: list[Allocation], samples: dict[str, AllocUsage], now_ns: int
) -> dict[str, Any]:
    """A node's HostStats: its fingerprinted memory less what its running allocations were
    measured using, their CPU (MHz) as CPUTicksConsumed, and the data directory's file system
    where the node fingerprinted one (unique.storage.*)."""
    measured = [samples[a.id] for a in allocs if a.id in samples and not a.client_terminal()]
    total = node.node_resources.memory_mb * MB
    used = min(total, int(sum(s.memory_mb for s in measured) * MB))
    attributes = node.attributes
    disks = []
    size, free = (
        attributes.get("unique.storage.bytestotal"),
        attributes.get("unique.storage.bytesfree"),
    )
    if size and free and size.isdigit() and free.isdigit():
        taken = int(size) - int(free)
        disks.append(
            {
                "Device": attributes.get("unique.storage.volume", ""),
                "Mountpoint": attributes.get("unique.storage.volume", ""),
                "Size": int(size),
                "Used": taken,
                "Available": int(free),
                "UsedPercent": 100.0 * taken / int(size) if int(size) else 0.0,
                "InodesUsedPercent": 0.0,
            }
        )
    return {
        "Memory": {"Total": total, "Available": total - used, "Used": used, "Free": total - used},
        "CPU": [],
        "CPUTicksConsumed": sum(s.cpu_mhz for s in measured),
        "DiskStats": disks,
        "AllocDirStats": disks[0] if disks else None,
        "DeviceStats": [],
        "Timestamp": now_ns,
    }


def _samples(call: Call, now_s: float) -> dict[str, AllocUsage]:
    reports = call.backend.recent_usage(int((now_s - USAGE_MAX_AGE_S) * 1000), USAGE_ENTRIES)
    return newest_samples(reports, int((now_s - USAGE_MAX_AGE_S) * 1e9))


def client_stats(call: Call) -> ApiResponse:
    """`?node_id=` names the node (Nomad forwards to that client); without it, the cluster's
    only node (drover's API is no client of its own)."""
    state = call.backend.snapshot()
    node_id = call.query("node_id")
    if node_id:
        node = state.node(node_id)
        if node is None:
            raise ApiError(404, f'Unknown node "{node_id}"')
    else:
        nodes = list(state.nodes())
        if len(nodes) != 1:
            raise bad_request(f"node_id: required with {len(nodes)} nodes in the cluster")
        node = nodes[0]
    now_s = time.time()
    body = host_stats_json(
        node, state.allocs_by_node(node.id), _samples(call, now_s), int(now_s * 1e9)
    )
    return ApiResponse(200, body)


def client_alloc_stats(call: Call) -> ApiResponse:
    state = call.backend.snapshot()
    alloc = state.alloc(call.params["id"])
    if alloc is None:
        raise ApiError(404, f'Unknown allocation "{call.params["id"]}"')
    now_s = time.time()
    sample = _samples(call, now_s).get(alloc.id)
    return ApiResponse(200, alloc_stats_json(state, alloc, sample, int(now_s * 1e9)))


ROUTES = [
    ("GET", "/v1/client/stats", client_stats),
    ("GET", "/v1/client/allocation/:id/stats", client_alloc_stats),
]
