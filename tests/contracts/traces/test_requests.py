"""Per-request logs: arrivals per bucket, and concurrency by Little's law."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from bench.shared import shared_traces
from contracts.errors import ValidationError
from contracts.traces.requests import (
    AZURE_LLM,
    GENAI,
    OPENB_PODS,
    RequestLayout,
    arrivals,
    concurrency,
    read_requests,
)

SHARED = shared_traces()


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


GENAI_HEADER = "gmt_create,predict_type,predict_status,exec_time_seconds,groupId\n"


def test_genai_arrivals_and_concurrency_by_littles_law(tmp_path: Path) -> None:
    # Requests (start, duration) from 00:00:00: (0, 2.5), (1, 0.5), (3, 10) — unsorted rows.
    path = write(
        tmp_path / "g.csv",
        GENAI_HEADER + "2024-11-15 00:00:01,T,SUCCEED,0.5,G1\n"
        "2024-11-15 00:00:00,T,SUCCEED,2.5,G0\n"
        "2024-11-15 00:00:03,T,FAILED,10,G2\n",
    )
    requests = read_requests(path, GENAI)
    assert list(requests.starts) == [0, 1, 3] and list(requests.durations or []) == [2.5, 0.5, 10]
    per_s = arrivals(requests)
    assert list(per_s.offsets) == [0, 1, 2, 3] and list(per_s.values) == [1, 1, 0, 1]
    # Buckets of 2 s: [0,2): 2 s of the first + 0.5 s of the second = 2.5 s -> 1.25;
    # [2,4): 0.5 s of the first + 1 s of the third -> 0.75; [4,6), [6,8), [8,10), [10,12): 1;
    # [12,14): 1 s of the third (it ends at 13) -> 0.5.
    mean = concurrency(requests, bucket_s=2.0)
    assert list(mean.offsets) == [0, 2, 4, 6, 8, 10, 12]
    assert list(mean.values) == pytest.approx([1.25, 0.75, 1, 1, 1, 1, 0.5])
    # Little's law over the whole trace: the integral of concurrency is the sum of durations.
    assert sum(mean.values) * 2.0 == pytest.approx(13.0)
    succeeded = read_requests(path, replace(GENAI, where={"predict_status": "SUCCEED"}))
    assert len(succeeded) == 2


def test_azure_llm_arrivals_per_minute_without_durations(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "2023-11-16 18:17:04.0319600,3180,8\n"
        "2023-11-16 18:18:05.0000000,10,1\n",
    )
    requests = read_requests(path, AZURE_LLM)
    assert requests.durations is None
    assert list(arrivals(requests, bucket_s=60.0).values) == [2, 1]
    with pytest.raises(ValidationError, match="names no execution time"):
        concurrency(requests)


def test_openb_pods_end_column_in_seconds(tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.csv",
        "name,creation_time,deletion_time\np0,0,10\np1,5,5\n",
    )
    requests = read_requests(path, OPENB_PODS)
    assert list(requests.durations or []) == [10, 0]
    assert list(concurrency(requests, bucket_s=5.0).values) == [1, 1, 0]


def test_millisecond_timestamps_and_a_duration_scale(tmp_path: Path) -> None:
    path = write(tmp_path / "m.csv", "ts,ms\n1000,500\n2500,1000\n")
    layout = RequestLayout(timestamp="ts", time_format="ms", duration="ms", duration_scale=1e-3)
    requests = read_requests(path, layout)
    assert list(requests.starts) == [0, 1.5] and list(requests.durations or []) == [0.5, 1]
    assert list(concurrency(requests).values) == pytest.approx([0.5, 0.5, 0.5])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("when,exec_time_seconds\n", "line 1: no column 'gmt_create' (columns: when,"),
        (GENAI_HEADER + "yesterday,T,S,1,G\n", "line 2: gmt_create 'yesterday' is not an ISO 8601"),
        (GENAI_HEADER + "2024-11-15 00:00:00,T,S,-1,G\n", "line 2: exec_time_seconds '-1' is not"),
        (GENAI_HEADER + "2024-11-15 00:00:00,T,S\n", "line 2: expected 5 columns, got 3"),
        (GENAI_HEADER, "has no requests"),
    ],
)
def test_bad_request_logs_name_file_line_and_field(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(ValidationError) as error:
        read_requests(path, GENAI)
    assert str(error.value).startswith(repr(path)) and problem in str(error.value), error.value


def test_end_before_start_and_bounds(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "creation_time,deletion_time\n5,4\n")
    with pytest.raises(ValidationError, match="line 2: deletion_time '4' is before creation_time"):
        read_requests(path, OPENB_PODS)
    many = write(tmp_path / "m.csv", "creation_time,deletion_time\n0,1\n1,2\n2,3\n")
    with pytest.raises(ValidationError, match="more than the 2 points"):
        read_requests(many, OPENB_PODS, max_rows=2)
    assert len(read_requests(many, OPENB_PODS, limit=2)) == 2
    with pytest.raises(ValidationError, match="more than the 1 points"):
        arrivals(read_requests(many, OPENB_PODS), max_points=1)


def test_the_real_genai_trace() -> None:
    """Reads the first 2,000 requests of the shared GenAI trace (../shared/data/traces)."""
    path = SHARED / "alibaba-gentd26" / "lora_request_trace.csv"
    if not path.is_file():
        message = f"the shared GenAI trace is missing: {path}"
        if os.environ.get("CI") == "true":  # the repo's rule: CI runs what the README promises
            pytest.fail(message)
        pytest.skip(message)
    requests = read_requests(str(path), GENAI, limit=2000)
    assert len(requests) == 2000 and requests.starts[0] == 0
    assert requests.durations is not None and min(requests.durations) >= 0
    per_minute = arrivals(requests, bucket_s=60.0)
    assert sum(per_minute.values) == 2000 and max(per_minute.values) <= 64
    mean = concurrency(requests, bucket_s=60.0)
    assert sum(mean.values) * 60.0 == pytest.approx(sum(requests.durations))
