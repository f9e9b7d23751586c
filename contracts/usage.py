"""What allocations use, as client agents measure it: the `drover` metric source.

Agents sample each running allocation's CPU and memory (raw_exec: the task's processes, read
from the OS; mock: the load model its task declares; ray: the task's Ray worker process, read
from the OS) and publish one UsageReport per interval on the usage stream
(`StreamNames.usage`, XADD MAXLEN ~ USAGE_STREAM_MAXLEN), split into several past
MAX_SAMPLES_PER_REPORT samples. An allocation none of whose tasks can be measured (a mock task
without a load) is left out, not reported as idle. The autoscaler aggregates them per task
group (Nomad APM's `avg_cpu`, `max_memory`, `avg_cpu-allocated`...); the API serves the
latest as `/v1/metrics`. Usage is telemetry, not state: it never enters the state log, and a
lost report only leaves a gap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.codec import CodecError, dumps, json_name, loads
from contracts.fast_init import install_fast_inits

# Bounds on what one report may carry and the stream keeps (usage.py readers rely on them).
MAX_SAMPLES_PER_REPORT = 10_000
USAGE_STREAM_MAXLEN = 5_000  # about 1 report a second per agent: minutes of history


@dataclass(frozen=True, slots=True)
class AllocUsage:
    """One allocation's use at `time_ns` (unix ns). CPU in MHz, as Nomad's allocated CPU
    (`cpu_percent` is of one core, Nomad's `cpu.total_percent`); memory in MB (resident)."""

    alloc_id: str
    namespace: str
    job_id: str
    task_group: str
    node_id: str
    time_ns: int
    cpu_mhz: float
    cpu_percent: float
    memory_mb: float
    allocated_cpu_mhz: int = 0
    allocated_memory_mb: int = 0


@dataclass(frozen=True, slots=True)
class UsageReport:
    agent_id: str
    samples: tuple[AllocUsage, ...] = ()


# -- the stream entry --------------------------------------------------------------------------
# An entry of the usage stream is an ordinary envelope (actors/streams/envelope.py): field `t`
# is REPORT_TYPE and field `b` the report's codec JSON (`encode_report`: {"AgentID": ...,
# "Samples": [{"AllocID", "Namespace", "JobID", "TaskGroup", "NodeID", "TimeNs", "CPUMHz",
# "CPUPercent", "MemoryMB", "AllocatedCPUMHz", "AllocatedMemoryMB"}, ...]}), read back with
# `decode_report`; there is no trace context.

REPORT_TYPE = "UsageReport"


def usage_reports(
    agent_id: str, samples: Sequence[AllocUsage], limit: int = MAX_SAMPLES_PER_REPORT
) -> list[UsageReport]:
    """`samples` as reports of at most `limit` samples each (none for no samples)."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    return [
        UsageReport(agent_id, tuple(samples[start : start + limit]))
        for start in range(0, len(samples), limit)
    ]


def encode_report(report: UsageReport) -> bytes:
    return dumps(report)


def decode_report(body: bytes | str) -> UsageReport:
    """A report from its JSON; raises CodecError naming the JSON path of anything bad
    (`$.Samples[3].CPUMHz: expected a finite number >= 0, got -1.0`)."""
    report = loads(UsageReport, body)
    if len(report.samples) > MAX_SAMPLES_PER_REPORT:
        raise CodecError(
            "$.Samples",
            f"at most {MAX_SAMPLES_PER_REPORT} samples per report, got {len(report.samples)}",
        )
    for i, sample in enumerate(report.samples):
        for name in _MEASURED:
            value = getattr(sample, name)
            if not math.isfinite(value) or value < 0:
                path = f"$.Samples[{i}].{json_name(name)}"
                raise CodecError(path, f"expected a finite number >= 0, got {value!r}")
    return report


_MEASURED = (
    "time_ns",
    "cpu_mhz",
    "cpu_percent",
    "memory_mb",
    "allocated_cpu_mhz",
    "allocated_memory_mb",
)


install_fast_inits(__name__)
