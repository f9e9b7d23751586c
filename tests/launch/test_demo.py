"""`drover demo` (the README's first command) end to end, through the real schedulers."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from launch.demo import run_demo


@pytest.fixture(scope="module")
def output() -> str:
    """One demo run shared by the module's tests."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert run_demo(nodes=40, workers=4, seed=1) == 0
    return buffer.getvalue()


def test_concurrent_workers_collide_and_retry(output: str) -> None:
    match = re.search(
        r"(\d+) plans applied, (\d+) partially rejected \((\d+) node conflicts\)", output
    )
    assert match is not None, output
    assert int(match.group(2)) >= 1 and int(match.group(3)) >= 1
    assert "refreshed and retried" in output


def test_preserve_counts_keeps_the_autoscaled_count(output: str) -> None:
    counts = re.findall(r"after (.+?): frontend=(\d+)", output)
    steps = dict(counts)
    assert steps["job run (changed file)"] == "3"  # reset to the file's count
    assert steps["job run -preserve-counts"] == steps["scale frontend to 5"] == "5"


def test_stop_then_revert_reads_v1_dead_and_v2_running(output: str) -> None:
    assert "web-1 versions: v2 running, v1 dead, v0 running" in output


def test_every_job_is_placed(output: str) -> None:
    table = output.split("3. Stop and revert")[1]
    for job in ("web", "web-1", "web-2", "web-3", "node-exporter", "nightly-report", "train"):
        row = re.search(rf"^  {re.escape(job)}\s+\w+\s+(\w+)\s+(\d+)", table, re.MULTILINE)
        assert row is not None, job
        assert row.group(1) == "running" and int(row.group(2)) > 0, row.group(0)
