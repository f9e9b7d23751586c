"""`/v1/client/stats` and `/v1/client/allocation/:id/stats` from a node's fingerprint and the
usage its agent measured: measured figures where a sample exists, zeros with empty
`Measured` where none does, 404s for unknown nodes and allocations."""

from __future__ import annotations

import time

from actors.agent.core import FleetSpec
from actors.api.core import Api
from bench.python_nomad_files import example_job
from contracts.usage import AllocUsage, UsageReport

from .conftest import Client, MemoryBackend

MB = 1024 * 1024


def placed(backend: MemoryBackend, call: Client) -> dict:
    assert call("POST", "/v1/jobs", example_job()).status == 200
    backend.schedule_pending()
    (alloc,) = call("GET", "/v1/job/example/allocations").body
    return dict(alloc)


def measure(backend: MemoryBackend, alloc: dict, cpu_mhz: float, memory_mb: float) -> int:
    now_ns = time.time_ns()
    sample = AllocUsage(
        alloc["ID"],
        "default",
        "example",
        "cache",
        alloc["NodeID"],
        now_ns,
        cpu_mhz,
        12.5,
        memory_mb,
    )
    backend.publish_usage(UsageReport("agent-1", (sample,)), now_ns // 1_000_000)
    return now_ns


def test_an_allocations_stats_are_its_newest_measured_sample(
    backend: MemoryBackend, call: Client
) -> None:
    alloc = placed(backend, call)
    unmeasured = call("GET", f"/v1/client/allocation/{alloc['ID']}/stats").body
    memory = unmeasured["ResourceUsage"]["MemoryStats"]
    assert memory["RSS"] == 0 and memory["Measured"] == []
    assert list(unmeasured["Tasks"]) == ["redis"]
    taken_at = measure(backend, alloc, cpu_mhz=250.0, memory_mb=64.0)
    stats = call("GET", f"/v1/client/allocation/{alloc['ID']}/stats").body
    usage = stats["ResourceUsage"]
    assert usage["MemoryStats"]["RSS"] == 64 * MB and "RSS" in usage["MemoryStats"]["Measured"]
    assert usage["CpuStats"]["TotalTicks"] == 250.0 and usage["CpuStats"]["Percent"] == 12.5
    assert stats["Timestamp"] == taken_at
    assert stats["Tasks"]["redis"]["ResourceUsage"] == usage  # the group's only task
    missing = call("GET", "/v1/client/allocation/nope/stats")
    assert (missing.status, missing.body) == (404, 'Unknown allocation "nope"')


def test_a_nodes_stats_are_its_fingerprint_less_what_its_allocations_use(
    backend: MemoryBackend, call: Client
) -> None:
    alloc = placed(backend, call)
    measure(backend, alloc, cpu_mhz=300.0, memory_mb=100.0)
    stats = call("GET", "/v1/client/stats", node_id=alloc["NodeID"]).body
    assert stats["Memory"]["Total"] == 8192 * MB
    assert stats["Memory"]["Used"] == 100 * MB
    assert stats["Memory"]["Available"] == (8192 - 100) * MB
    assert stats["CPUTicksConsumed"] == 300.0
    # Four simulated nodes: which one must be said.
    many = call("GET", "/v1/client/stats")
    assert many.status == 400 and "node_id" in many.body
    unknown = call("GET", "/v1/client/stats", node_id="nope")
    assert (unknown.status, unknown.body) == (404, 'Unknown node "nope"')


def test_the_only_node_is_the_default_and_its_disk_is_reported() -> None:
    backend = MemoryBackend()
    fleet = FleetSpec(
        name="one",
        count=1,
        cpu_mhz=2000,
        memory_mb=1024,
        attributes={
            "unique.storage.volume": "/dev/sda1",
            "unique.storage.bytestotal": "1000",
            "unique.storage.bytesfree": "250",
        },
    )
    backend.apply_fleet(fleet)
    stats = Client(Api(backend))("GET", "/v1/client/stats").body
    assert stats["Memory"] == {
        "Total": 1024 * MB,
        "Available": 1024 * MB,
        "Used": 0,
        "Free": 1024 * MB,
    }
    (disk,) = stats["DiskStats"]
    assert (disk["Device"], disk["Size"], disk["Used"], disk["Available"]) == (
        "/dev/sda1",
        1000,
        750,
        250,
    )
    assert disk["UsedPercent"] == 75.0
