"""Usage reports on the wire: Nomad-style names, chunks of at most MAX_SAMPLES_PER_REPORT,
and a decoder that names the field it refuses."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from contracts.codec import CodecError
from contracts.usage import (
    MAX_SAMPLES_PER_REPORT,
    AllocUsage,
    UsageReport,
    decode_report,
    encode_report,
    usage_reports,
)


def sample(alloc_id: str = "a1", **changes: Any) -> AllocUsage:
    base = AllocUsage(
        alloc_id=alloc_id,
        namespace="default",
        job_id="web",
        task_group="g",
        node_id="n1",
        time_ns=1_700_000_000_000_000_000,
        cpu_mhz=250.5,
        cpu_percent=25.05,
        memory_mb=64.0,
        allocated_cpu_mhz=500,
        allocated_memory_mb=256,
    )
    return dataclasses.replace(base, **changes)


def test_a_report_round_trips_with_nomads_names() -> None:
    report = UsageReport("agent-1", (sample("a1"), sample("a2", cpu_mhz=0.0)))
    body = encode_report(report)
    assert decode_report(body) == report
    wire = orjson.loads(body)
    assert sorted(wire) == ["AgentID", "Samples"]
    assert sorted(wire["Samples"][0]) == sorted(
        [
            "AllocID",
            "Namespace",
            "JobID",
            "TaskGroup",
            "NodeID",
            "TimeNs",
            "CPUMHz",
            "CPUPercent",
            "MemoryMB",
            "AllocatedCPUMHz",
            "AllocatedMemoryMB",
        ]
    )


def test_samples_are_split_into_reports_of_at_most_the_limit() -> None:
    samples = [sample(f"a{i}") for i in range(7)]
    reports = usage_reports("agent-1", samples, limit=3)
    assert [len(r.samples) for r in reports] == [3, 3, 1]
    assert [s for r in reports for s in r.samples] == samples
    assert {r.agent_id for r in reports} == {"agent-1"}
    assert usage_reports("agent-1", []) == []
    assert len(usage_reports("agent-1", [sample()] * (MAX_SAMPLES_PER_REPORT + 1))) == 2
    with pytest.raises(ValueError, match="limit must be at least 1"):
        usage_reports("agent-1", samples, limit=0)


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        (lambda s: s.pop("CPUMHz"), "$.Samples[0].CPUMHz", "required field is missing"),
        (lambda s: s.update(CPUMHz="lots"), "$.Samples[0].CPUMHz", 'got "lots"'),
        (lambda s: s.update(MemoryMB=-1), "$.Samples[0].MemoryMB", "finite number >= 0"),
        (lambda s: s.update(TimeNs=-5), "$.Samples[0].TimeNs", "finite number >= 0"),
        (lambda s: s.update(JobID=3), "$.Samples[0].JobID", "expected a string"),
        (lambda s: s.update(Extra=1), "$.Samples[0].Extra", "unknown field"),
    ],
)
def test_a_bad_sample_is_refused_naming_its_field(
    change: Callable[[dict[str, Any]], object], path: str, message: str
) -> None:
    wire = orjson.loads(encode_report(UsageReport("agent-1", (sample(),))))
    change(wire["Samples"][0])
    with pytest.raises(CodecError) as refused:
        decode_report(orjson.dumps(wire))
    assert refused.value.path == path and message in refused.value.message


def test_a_report_too_large_or_not_json_is_refused() -> None:
    too_many = UsageReport("agent-1", (sample(),) * (MAX_SAMPLES_PER_REPORT + 1))
    with pytest.raises(CodecError, match=r"\$\.Samples: at most 10000 samples per report"):
        decode_report(encode_report(too_many))
    with pytest.raises(CodecError, match="not valid JSON"):
        decode_report(b"{")
    with pytest.raises(CodecError, match=r"\$\.AgentID: required field is missing"):
        decode_report(b'{"Samples": []}')
