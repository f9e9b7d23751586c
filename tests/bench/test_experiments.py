"""bench.experiments with small arguments: the speed run covers the slice it was given (one
evaluation every 10 s), the grid sweeps as many targets as runs asked for and Ray gives the
sequential records, a missing trace stops the bench (exit 2) unless a synthetic stand-in is
asked for. No timings: speeds and durations are only positive."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from bench import experiments
from bench.experiments import DAY_S, grid_targets, trace_doc
from bench.keepalive import TRACE
from bench.shared import shared_traces


def genai_traces() -> Path:
    traces = shared_traces()
    if not (traces / TRACE).is_file():
        message = f"the shared GenAI trace is missing: {traces / TRACE}"
        if os.environ.get("CI") == "true":  # CI runs what the README promises
            pytest.fail(message)
        pytest.skip(message)
    return traces


@pytest.fixture
def no_ray() -> Iterator[None]:
    # The grid starts its own Ray (its start is measured): none from another module, none left.
    if ray.is_initialized():
        ray.shutdown()
    yield
    if ray.is_initialized():
        ray.shutdown()


def test_the_grid_sweeps_distinct_targets_around_70() -> None:
    assert grid_targets(1) == [70.0]
    targets = grid_targets(100)
    assert len(set(targets)) == 100 and (targets[0], targets[-1]) == (40.0, 95.0)
    assert targets == sorted(targets)
    for bad in (0, 101):
        with pytest.raises(ValueError):
            grid_targets(bad)
    for argv in (["--grid-runs", "101"], ["--days", "0"], ["--cpus", "0"]):
        with pytest.raises(SystemExit):
            experiments.parse_args(argv)


def test_one_day_of_the_genai_trace_every_10_s() -> None:
    line = experiments.speed(trace_doc(genai_traces(), 1.0))
    assert line["trace"] == "genai" and line["interval_s"] == 10.0
    assert line["sim_span_s"] == DAY_S and line["evaluations"] == DAY_S / 10
    assert line["sim_wall_s"] > 0 and line["sim_seconds_per_wall_second"] > 0
    assert line["trace_load_s"] >= 0 and line["scaling_actions"] >= 0


def test_ray_gives_the_sequential_records(no_ray: None) -> None:
    line = experiments.grid(trace_doc(genai_traces(), 0.1), runs=8, cpus=2)
    assert (line["grid_runs"], line["ray_cpus"]) == (8, 2)
    assert line["grid_span_s"] == pytest.approx(0.1 * DAY_S)
    assert line["grid_records_equal"] is True
    for key in ("grid_sequential_s", "grid_ray_s", "grid_ray_warm_s", "grid_speedup"):
        assert line[key] > 0
    assert line["ray_start_s"] >= 0 and not ray.is_initialized()  # the bench's Ray is gone


def test_a_missing_trace_stops_the_bench_unless_synthetic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DROVER_SHARED_TRACES", str(tmp_path))
    with pytest.raises(SystemExit) as stopped:
        experiments.main(["--days", "0.5", "--no-grid"])
    assert stopped.value.code == 2 and "GenAI trace is missing" in capsys.readouterr().err
    line = experiments.run(experiments.parse_args(["--days", "0.5", "--no-grid", "--synthetic"]))
    assert line["trace"] == "genai-like" and line["sim_span_s"] == DAY_S / 2
    assert line["evaluations"] == DAY_S / 20 and "grid_runs" not in line
