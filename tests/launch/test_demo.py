"""`drover demo` (the README's first command): the real system, driven through its API."""

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
        assert run_demo(nodes=40, workers=4) == 0
    return buffer.getvalue()


def test_fleets_are_declared(output: str) -> None:
    assert re.findall(r'fleet "([\w-]+)": (\d+) nodes', output) == [
        ("std-dc1", "18"),
        ("std-dc2", "18"),
        ("gpu", "4"),
    ]


def test_plans_are_counted_and_every_rejection_retried(output: str) -> None:
    match = re.search(
        r"(\d+) allocations placed by (\d+) plans; (\d+) plans partially rejected at the leader "
        r"\((\d+) node conflicts\) -> refreshed and retried (\d+) times; (\d+) moved off nodes "
        r"filled meanwhile before submission; every evaluation finished",
        output,
    )
    assert match is not None, output
    placed, plans, partial, conflicts, retries, rebased = map(int, match.groups())
    assert placed > 0 and plans >= 10
    assert conflicts >= partial and retries >= partial
    assert 0 <= rebased <= plans


def test_preserve_counts_keeps_the_autoscaled_count(output: str) -> None:
    steps = dict(re.findall(r"after (.+?): frontend=\d+, api=(\d+)", output))
    assert steps["job run (changed file)"] == "2"  # reset to the file's count
    assert steps["job run -preserve-counts"] == steps["scale api to 10"] == "10"


def test_stop_then_revert_reads_v1_dead_and_v2_running(output: str) -> None:
    assert "web-1 versions: v2 running, v1 dead" in output


def test_every_job_is_placed_and_everything_stops(output: str) -> None:
    for job in ("web", "web-1", "web-6", "node-exporter", "nightly-report", "train"):
        row = re.search(rf"^{re.escape(job)}\s+\w+\s+(\w+)\s+(\d+)", output, re.MULTILINE)
        assert row is not None, job
        assert row.group(1) == "running" and int(row.group(2)) > 0, row.group(0)
    assert "everything it started is stopped" in output
