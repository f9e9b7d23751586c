"""Which of an experiment's runs replay live and how (no system started here: the replays
themselves are tests/launch/test_live_replay.py and the `-live` CLI test), and the live
results' files: live.csv, live.json read back, live_counts.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.experiments import plots
from actors.experiments.core.live_compare import compare
from contracts.errors import ValidationError
from contracts.experiments import LiveSettings, parse_experiment
from launch import live_experiment
from launch.live_replay import LiveResult

STEP = {
    "name": "step",
    "synthetic": "step",
    "base": 10,
    "peak": 40,
    "at_s": 200,
    "duration_s": "30m",
}


def spec_of(policies: list[dict[str, Any]], **extra: Any) -> Any:
    doc = {"name": "live", "traces": [STEP], "policies": policies, **extra}
    return parse_experiment(doc)


def test_the_autoscalers_own_policies_replay_and_the_rest_are_skipped_with_the_reason() -> None:
    spec = spec_of(
        [
            {"name": "tv", "kind": "target-value", "sweep": {"target": [50, 70]}},
            {"name": "hpa", "kind": "hpa"},
            {"name": "ka", "kind": "keep-alive", "keep_alive": "10m"},
            {"name": "ds", "kind": "dstack", "target": 5},
            {"name": "rps", "kind": "target-value", "metric": "rps_per_alloc", "target": 8},
        ],
        parameters={"per_alloc_rps": [10, 20], "start_delay_s": [0, 30]},
        seeds=3,
    )
    plan = live_experiment.plan(spec, LiveSettings(time_factor=60, until_s=600))
    # one replay per policy variant: the first parameter combination and seed
    assert [r.name for r in plan.replays] == [
        "step/tv[target=50]",
        "step/tv[target=70]",
        "step/hpa",
    ]
    assert plan.skipped == [
        "step/ka: a keep-alive policy runs in the simulator only",
        "step/ds: a dstack policy runs in the simulator only",
        "step/rps: query 'rps_per_alloc' has no live counterpart (live replays read"
        " avg_cpu-allocated, utilisation)",
    ]
    first = plan.replays[0]
    assert first.setup.per_alloc_rps == 10 and first.setup.until_s == 600
    assert first.setup.start_count == 1  # the policy's min
    assert plan.real_seconds == pytest.approx(3 * 600 / 60)
    assert first.values[0] == 10 and max(first.values) == 40


def test_until_is_the_shortest_of_the_trace_the_experiment_and_the_live_block() -> None:
    tv = [{"name": "tv", "kind": "target-value"}]
    assert live_experiment.plan(spec_of(tv), LiveSettings()).replays[0].setup.until_s == 1800
    spec = spec_of(tv, until_s="20m", interval_s=30)
    (replay,) = live_experiment.plan(spec, LiveSettings(time_factor=100)).replays
    assert replay.setup.until_s == 1200
    assert replay.policy.evaluation_interval_s == 30  # the experiment's interval


def test_a_group_that_would_start_at_zero_starts_at_one() -> None:
    spec = spec_of([{"name": "tv", "kind": "target-value", "min": 0}])
    (replay,) = live_experiment.plan(spec, LiveSettings()).replays
    assert replay.setup.start_count == 1


def test_nothing_to_replay_and_too_long_are_refused() -> None:
    spec = spec_of([{"name": "ka", "kind": "keep-alive", "keep_alive": "10m"}])
    with pytest.raises(ValidationError) as info:
        live_experiment.plan(spec, LiveSettings())
    assert info.value.problems == [
        "no policy of this experiment can be replayed live"
        " (step/ka: a keep-alive policy runs in the simulator only)"
    ]
    spec = spec_of([{"name": "tv", "kind": "target-value"}])
    with pytest.raises(ValidationError, match=r"would take 1800 s of real time, more than"):
        live_experiment.plan(spec, LiveSettings(time_factor=1, max_real_s=600))


def test_results_files_read_back_and_plot(tmp_path: Path) -> None:
    spec = spec_of([{"name": "tv", "kind": "target-value"}])
    plan = live_experiment.plan(spec, LiveSettings(until_s=600))
    live = [(0.0, 1), (260.0, 4)]
    simulated = [(0.0, 1), (240.0, 4)]
    result = LiveResult("step/tv", live, simulated, compare(live, simulated, 600), 20.5)
    doc = live_experiment.document(spec, plan, [result])
    files = live_experiment.write(doc, str(tmp_path))
    files += plots.draw_live(doc, str(tmp_path))
    assert sorted(Path(f).name for f in files) == ["live.csv", "live.json", "live_counts.png"]
    assert (tmp_path / "live_counts.png").read_bytes()[:4] == b"\x89PNG"
    back = live_experiment.read(str(tmp_path))
    assert back == doc and back["rows"][0]["live"] == [[0.0, 1], [260.0, 4]]
    header, row = (tmp_path / "live.csv").read_text().splitlines()
    assert header.startswith("replay,mean_abs_count_error,") and "live" not in header.split(",")
    assert row.startswith("step/tv,")
    headers, rows = live_experiment.summary(doc)
    assert headers[0] == "Replay" and rows[0][0] == "step/tv"
    assert rows[0][headers.index("Live actions")] == "1"
    assert live_experiment.read(str(tmp_path / "none")) is None
    (tmp_path / "live.json").write_text("[1, 2]")
    with pytest.raises(ValidationError, match="expected an object with a rows list"):
        live_experiment.read(str(tmp_path))
