"""`GET /v1/metrics`: Nomad's agent metrics endpoint, JSON by default and the Prometheus text
exposition format with `?format=prometheus`, so a Prometheus server can scrape drover.

What it exposes (JSON names are Nomad's dotted ones; Prometheus names replace `.` and `-`
with `_`):

- per allocation, from the newest sample the agents published on the usage stream no older
  than USAGE_MAX_AGE_S (labels alloc_id, job, task_group, namespace, node_id, host), named
  as Nomad's client names them: `nomad.client.allocs.cpu.total_percent` (percent of one
  core), `.cpu.total_ticks` (MHz used), `.cpu.allocated` (MHz), `.memory.usage` (bytes
  resident), `.memory.allocated` (bytes);
- from the API's replica: `nomad.nomad.job_status.{pending,running,dead}` (jobs by status,
  Nomad's names), `nomad.nomad.blocked_evals.total_blocked` (blocked evaluations),
  `nomad.nomad.broker.total_ready` (pending evaluations: the replica cannot tell the
  broker's ready ones from those a worker holds, so this is Nomad's ready + unacked), and
  drover's own `drover.allocations{client_status}`, `drover.nodes{status}` and
  `drover.evaluations{status}` (every status, zeros included, so series do not vanish).

Work per request is bounded: the usage stream is read newest first, at most USAGE_ENTRIES
entries and USAGE_MAX_SAMPLES samples; the replica's counts walk its tables, so they are
cached per backend and recomputed at most once per CLUSTER_REFRESH_S, and only when the
replica has moved. Nomad asks no ACL of this endpoint; neither does drover (api.py).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from actors.api.core.call import Call
from actors.api.core.http_types import ApiResponse
from actors.state import StateReader
from contracts.allocation import CLIENT_TERMINAL, ClientStatus, DesiredStatus
from contracts.evaluation import EvalStatus
from contracts.job import JobStatus
from contracts.node import NodeStatus
from contracts.usage import AllocUsage, UsageReport

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
USAGE_ENTRIES = 1_000  # newest usage stream entries read per request
USAGE_MAX_SAMPLES = 20_000  # samples looked at per request, over those entries
USAGE_MAX_AGE_S = 30.0  # an allocation's newest sample older than this is left out
CLUSTER_REFRESH_S = 1.0

MB = 1024 * 1024

HELP: dict[str, str] = {
    "nomad.client.allocs.cpu.total_percent": "CPU used by the allocation, percent of one core.",
    "nomad.client.allocs.cpu.total_ticks": "CPU used by the allocation, in MHz.",
    "nomad.client.allocs.cpu.allocated": "CPU allocated to the allocation, in MHz.",
    "nomad.client.allocs.memory.usage": "Resident memory used by the allocation, in bytes.",
    "nomad.client.allocs.memory.allocated": "Memory allocated to the allocation, in bytes.",
    "nomad.nomad.job_status.pending": "Jobs with status pending.",
    "nomad.nomad.job_status.running": "Jobs with status running.",
    "nomad.nomad.job_status.dead": "Jobs with status dead.",
    "nomad.nomad.blocked_evals.total_blocked": "Evaluations blocked for lack of capacity.",
    "nomad.nomad.broker.total_ready": (
        "Pending evaluations, waiting for or held by a worker (Nomad's ready + unacked)."
    ),
    "drover.allocations": "Allocations by client status.",
    "drover.nodes": "Client nodes by status.",
    "drover.evaluations": "Evaluations by status.",
}

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Gauge:
    name: str  # Nomad's dotted name
    value: float
    labels: Labels = ()


# -- the handler -------------------------------------------------------------------------------


def metrics(call: Call) -> ApiResponse:
    now_s = time.time()
    state = call.backend.snapshot()
    since_ms = int((now_s - USAGE_MAX_AGE_S) * 1000)
    reports = call.backend.recent_usage(since_ms, USAGE_ENTRIES)
    gauges = usage_gauges(reports, state, now_s) + _cluster_cache.get(call.backend, state, now_s)
    # Nomad switches on format=prometheus only; anything else answers JSON.
    if call.query("format") == "prometheus":
        return ApiResponse(200, render_prometheus(gauges), content_type=PROMETHEUS_CONTENT_TYPE)
    return ApiResponse(200, render_json(gauges, now_s))


# -- what is measured --------------------------------------------------------------------------


def usage_gauges(
    reports: Iterable[UsageReport],
    state: StateReader,
    now_s: float,
    max_age_s: float = USAGE_MAX_AGE_S,
    max_samples: int = USAGE_MAX_SAMPLES,
) -> list[Gauge]:
    """Each allocation's newest sample no older than `max_age_s`, as Nomad's client
    allocation gauges. Allocations the replica shows stopped are left out at once (a
    scale-down's stopped allocations would otherwise linger for `max_age_s`); those it does
    not know yet are kept (the replica may lag the agent)."""
    oldest_ns = int((now_s - max_age_s) * 1e9)
    newest: dict[str, AllocUsage] = {}
    seen = 0
    for report in reports:
        for sample in report.samples:
            seen += 1
            if seen > max_samples:
                break
            if sample.time_ns < oldest_ns:
                continue
            kept = newest.get(sample.alloc_id)
            if kept is None or sample.time_ns > kept.time_ns:
                newest[sample.alloc_id] = sample
        if seen > max_samples:
            break
    gauges: list[Gauge] = []
    hosts: dict[str, str] = {}
    for alloc_id in sorted(newest):
        s = newest[alloc_id]
        alloc = state.alloc(alloc_id)
        if alloc is not None and (
            alloc.client_status in CLIENT_TERMINAL or alloc.desired_status is not DesiredStatus.RUN
        ):
            continue
        host = hosts.get(s.node_id)
        if host is None:
            node = state.node(s.node_id)
            host = hosts[s.node_id] = node.name if node is not None and node.name else s.node_id
        labels: Labels = (
            ("alloc_id", s.alloc_id),
            ("job", s.job_id),
            ("task_group", s.task_group),
            ("namespace", s.namespace),
            ("node_id", s.node_id),
            ("host", host),
        )
        gauges.append(Gauge("nomad.client.allocs.cpu.total_percent", s.cpu_percent, labels))
        gauges.append(Gauge("nomad.client.allocs.cpu.total_ticks", s.cpu_mhz, labels))
        gauges.append(Gauge("nomad.client.allocs.memory.usage", s.memory_mb * MB, labels))
        if s.allocated_cpu_mhz:
            gauges.append(Gauge("nomad.client.allocs.cpu.allocated", s.allocated_cpu_mhz, labels))
        if s.allocated_memory_mb:
            memory = s.allocated_memory_mb * MB
            gauges.append(Gauge("nomad.client.allocs.memory.allocated", memory, labels))
    return gauges


def cluster_gauges(state: StateReader) -> list[Gauge]:
    """Counts over the replica's jobs, allocations, evaluations and nodes (one pass each)."""
    jobs = dict.fromkeys(JobStatus, 0)
    for job in state.jobs():
        jobs[job.status] += 1
    allocs = dict.fromkeys(ClientStatus, 0)
    for alloc in state.allocs():
        allocs[alloc.client_status] += 1
    evals = dict.fromkeys(EvalStatus, 0)
    for ev in state.evals():
        evals[ev.status] += 1
    nodes = dict.fromkeys(NodeStatus, 0)
    for node in state.nodes():
        nodes[node.status] += 1
    gauges = [Gauge(f"nomad.nomad.job_status.{s.value}", n) for s, n in jobs.items()]
    gauges.append(Gauge("nomad.nomad.blocked_evals.total_blocked", evals[EvalStatus.BLOCKED]))
    gauges.append(Gauge("nomad.nomad.broker.total_ready", evals[EvalStatus.PENDING]))
    gauges += [
        Gauge("drover.allocations", n, (("client_status", s.value),)) for s, n in allocs.items()
    ]
    gauges += [Gauge("drover.nodes", n, (("status", s.value),)) for s, n in nodes.items()]
    gauges += [Gauge("drover.evaluations", n, (("status", s.value),)) for s, n in evals.items()]
    return gauges


class _ClusterCache:
    """cluster_gauges per backend, recomputed when the replica moved and the last one is
    `refresh_s` old: scrapes, however frequent, walk the tables at most once a second."""

    def __init__(self, refresh_s: float = CLUSTER_REFRESH_S) -> None:
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._cached: weakref.WeakKeyDictionary[object, tuple[int, float, list[Gauge]]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, backend: object, state: StateReader, now_s: float) -> list[Gauge]:
        index = state.latest_index()
        with self._lock:
            cached = self._cached.get(backend)
            if cached is not None and (cached[0] == index or now_s - cached[1] < self.refresh_s):
                return cached[2]
        gauges = cluster_gauges(state)
        with self._lock:
            self._cached[backend] = (index, now_s, gauges)
        return gauges


_cluster_cache = _ClusterCache()


# -- rendering ---------------------------------------------------------------------------------


def render_json(gauges: Sequence[Gauge], now_s: float) -> dict[str, Any]:
    """Nomad's JSON body (go-metrics' in-memory summary): drover keeps no counters or
    timing samples, so those lists are empty."""
    stamp = datetime.fromtimestamp(math.floor(now_s), UTC)
    return {
        "Timestamp": stamp.strftime("%Y-%m-%d %H:%M:%S +0000 UTC"),
        "Gauges": [{"Name": g.name, "Value": g.value, "Labels": dict(g.labels)} for g in gauges],
        "Counters": [],
        "Samples": [],
    }


def render_prometheus(gauges: Sequence[Gauge]) -> str:
    """The text exposition format (0.0.4): one HELP and TYPE line per metric, then its
    series. Gauges of one name must be adjacent; they are grouped here whatever the order."""
    by_name: dict[str, list[Gauge]] = {}
    for gauge in gauges:
        by_name.setdefault(gauge.name, []).append(gauge)
    lines: list[str] = []
    for name, series in by_name.items():
        metric = prometheus_name(name)
        help_text = HELP.get(name, name).replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {metric} {help_text}")
        lines.append(f"# TYPE {metric} gauge")
        for gauge in series:
            lines.append(f"{metric}{_labels(gauge.labels)} {_number(gauge.value)}")
    return "\n".join(lines) + "\n" if lines else ""


def prometheus_name(name: str) -> str:
    """`nomad.client.allocs.cpu.total_percent` -> `nomad_client_allocs_cpu_total_percent`."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "_:") else "_" for c in name)


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels) + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))
