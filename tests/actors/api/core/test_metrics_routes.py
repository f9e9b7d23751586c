"""`/v1/metrics`: Nomad's JSON body, the Prometheus text exposition format (escaping, one
HELP/TYPE per metric), per-allocation usage from the usage stream (newest sample, age limit,
stopped allocations left out) and the cluster gauges from the replica."""

from __future__ import annotations

import re
import time
from typing import Any

from actors.api.core.metrics_routes import (
    PROMETHEUS_CONTENT_TYPE,
    Gauge,
    _ClusterCache,
    escape_label_value,
    prometheus_name,
    render_json,
    render_prometheus,
    usage_gauges,
)
from contracts.usage import AllocUsage, UsageReport
from tests.actors.api.core.conftest import Client, MemoryBackend

JOB = {
    "Job": {
        "ID": "web",
        "Type": "service",
        "TaskGroups": [
            {
                "Name": "api",
                "Count": 2,
                "Tasks": [
                    {"Name": "t", "Driver": "mock", "Resources": {"CPU": 250, "MemoryMB": 64}}
                ],
            }
        ],
    }
}


def sample(alloc: str, time_ns: int, cpu: float, node_id: str = "node-1") -> AllocUsage:
    """A sample of job web's group api: `cpu` percent of a core, 32 of 64 MB."""
    return AllocUsage(
        alloc, "default", "web", "api", node_id, time_ns, cpu * 10, cpu, 32.0, 250, 64
    )


def series(text: str, name: str) -> dict[str, float]:
    """name{labels} value lines of one metric, keyed by the label text."""
    found = {}
    for line in text.splitlines():
        m = re.fullmatch(rf"{name}(\{{.*\}})? (\S+)", line)
        if m:
            found[m.group(1) or ""] = float(m.group(2))
    return found


def test_prometheus_text_escapes_label_values_and_groups_each_metric() -> None:
    gauges = [
        Gauge("nomad.client.allocs.cpu.total_percent", 1.5, (("job", 'a"b\\c\nd'),)),
        Gauge("drover.nodes", 3, (("status", "ready"),)),
        Gauge("nomad.client.allocs.cpu.total_percent", float("nan"), (("job", "x"),)),
        Gauge("custom-metric.x", float("inf")),
    ]
    text = render_prometheus(gauges)
    lines = text.splitlines()
    assert lines == [
        "# HELP nomad_client_allocs_cpu_total_percent CPU used by the allocation, percent of"
        " one core.",
        "# TYPE nomad_client_allocs_cpu_total_percent gauge",
        'nomad_client_allocs_cpu_total_percent{job="a\\"b\\\\c\\nd"} 1.5',
        'nomad_client_allocs_cpu_total_percent{job="x"} NaN',
        "# HELP drover_nodes Client nodes by status.",
        "# TYPE drover_nodes gauge",
        'drover_nodes{status="ready"} 3.0',
        "# HELP custom_metric_x custom-metric.x",
        "# TYPE custom_metric_x gauge",
        "custom_metric_x +Inf",
    ]
    assert text.endswith("\n")
    assert render_prometheus([]) == ""
    assert escape_label_value('q"\\\n') == 'q\\"\\\\\\n'
    assert prometheus_name("nomad.nomad.job_status.dead") == "nomad_nomad_job_status_dead"


def test_json_is_nomads_shape() -> None:
    body = render_json([Gauge("drover.nodes", 2, (("status", "down"),))], 1_700_000_000.7)
    assert body == {
        "Timestamp": "2023-11-14 22:13:20 +0000 UTC",
        "Gauges": [{"Name": "drover.nodes", "Value": 2, "Labels": {"status": "down"}}],
        "Counters": [],
        "Samples": [],
    }


def test_usage_keeps_each_allocations_newest_fresh_sample(backend: MemoryBackend) -> None:
    now = 1_000.0
    ns = 1_000_000_000
    reports = [  # newest first, as the stream is read
        UsageReport("agent", (sample("a1", 999 * ns, 40.0), sample("a2", 998 * ns, 10.0))),
        UsageReport("agent", (sample("a1", 997 * ns, 90.0),)),
        UsageReport("agent", (sample("old", 900 * ns, 5.0),)),  # older than 30 s
    ]
    gauges = usage_gauges(reports, backend.snapshot(), now)
    cpu = {
        dict(g.labels)["alloc_id"]: g.value
        for g in gauges
        if g.name == "nomad.client.allocs.cpu.total_percent"
    }
    assert cpu == {"a1": 40.0, "a2": 10.0}
    memory = [g for g in gauges if g.name == "nomad.client.allocs.memory.usage"]
    assert {g.value for g in memory} == {32.0 * 1024 * 1024}
    labels = dict(memory[0].labels)
    assert labels == {
        "alloc_id": "a1",
        "job": "web",
        "task_group": "api",
        "namespace": "default",
        "node_id": "node-1",
        "host": "node-1",  # no such node in the replica: its id
    }
    allocated = [g.value for g in gauges if g.name == "nomad.client.allocs.memory.allocated"]
    assert allocated == [64 * 1024 * 1024] * 2
    # The samples looked at are bounded: past the limit, later (older) reports are not read.
    capped = usage_gauges(reports, backend.snapshot(), now, max_samples=1)
    assert {dict(g.labels)["alloc_id"] for g in capped} == {"a1"}


def test_endpoint_serves_usage_and_cluster_gauges(backend: MemoryBackend, call: Client) -> None:
    assert call("POST", "/v1/jobs", JOB).status == 200
    backend.schedule_pending()
    allocs = sorted(backend.store.allocs(), key=lambda a: a.id)
    assert len(allocs) == 2
    now_ns = time.time_ns()
    samples = tuple(sample(a.id, now_ns, 30.0 + i, node_id=a.node_id) for i, a in enumerate(allocs))
    backend.publish_usage(UsageReport("agent", samples), now_ns // 1_000_000)
    backend.publish_usage(  # published long ago: outside the stream read
        UsageReport("agent", (sample("gone", now_ns - 120 * 10**9, 1.0),)),
        now_ns // 1_000_000 - 120_000,
    )

    text = call("GET", "/v1/metrics", format="prometheus")
    assert text.status == 200 and text.content_type == PROMETHEUS_CONTENT_TYPE
    cpu = series(text.body, "nomad_client_allocs_cpu_total_percent")
    by_alloc = {re.findall(r'alloc_id="([^"]+)"', k)[0]: v for k, v in cpu.items()}
    assert by_alloc == {allocs[0].id: 30.0, allocs[1].id: 31.0}
    node = backend.store.node(allocs[0].node_id)
    assert node is not None and node.name
    assert any(f'host="{node.name}"' in labels for labels in cpu)
    assert series(text.body, "nomad_nomad_job_status_running") == {"": 1.0}
    assert series(text.body, "nomad_nomad_job_status_dead") == {"": 0.0}
    assert series(text.body, "drover_nodes")['{status="ready"}'] == 4.0
    assert sum(series(text.body, "drover_allocations").values()) == 2.0
    assert series(text.body, "nomad_nomad_blocked_evals_total_blocked") == {"": 0.0}
    assert text.body.count("# TYPE nomad_client_allocs_cpu_total_percent gauge") == 1

    body = call("GET", "/v1/metrics").body
    assert set(body) == {"Timestamp", "Gauges", "Counters", "Samples"}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for gauge in body["Gauges"]:
        by_name.setdefault(gauge["Name"], []).append(gauge)
    assert len(by_name["nomad.client.allocs.cpu.total_percent"]) == 2
    evals = {g["Labels"]["status"]: g["Value"] for g in by_name["drover.evaluations"]}
    assert evals["complete"] == 1 and evals["pending"] == 0

    # A stopped allocation's last sample is left out at once.
    assert call("POST", f"/v1/allocation/{allocs[0].id}/stop").status == 200
    backend.schedule_pending()  # the scheduler marks it to stop (and places a replacement)
    text = call("GET", "/v1/metrics", format="prometheus").body
    cpu = series(text, "nomad_client_allocs_cpu_total_percent")
    assert len(cpu) == 1 and f'alloc_id="{allocs[1].id}"' in next(iter(cpu))


def test_metrics_need_no_acl_token() -> None:
    from actors.api.core import Api

    backend = MemoryBackend(acl_enabled=True)
    anonymous = Client(Api(backend))
    assert anonymous("GET", "/v1/jobs").status == 403
    assert anonymous("GET", "/v1/metrics", format="prometheus").status == 200


def test_cluster_counts_are_recomputed_at_most_once_per_refresh(
    backend: MemoryBackend, call: Client
) -> None:
    cache = _ClusterCache(refresh_s=1.0)
    first = cache.get(backend, backend.snapshot(), now_s=100.0)
    assert call("POST", "/v1/jobs", JOB).status == 200  # the replica moves: one more job
    assert cache.get(backend, backend.snapshot(), now_s=100.5) is first  # within the refresh
    later = cache.get(backend, backend.snapshot(), now_s=101.0)
    pending = {g.name: g.value for g in later}["nomad.nomad.job_status.pending"]
    assert later is not first and pending == 1
    assert cache.get(backend, backend.snapshot(), now_s=500.0) is later  # nothing moved
