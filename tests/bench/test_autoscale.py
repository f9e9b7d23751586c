"""bench.autoscale: its job template carries the policy the bench reasons with, crossings
and their scalings are matched as the docstring says, and a tiny run through the real
system prints every figure with the loop closed (every crossing scaled, every level settled
where its demand puts it). No timings."""

from __future__ import annotations

import math

import pytest

from bench import autoscale
from bench.autoscale import Scaling, Seen, find_crossings, measure, percentile_s, reversals
from contracts.jobspec import parse_json_with_warnings

FIGURES = (
    "bench",
    "crossings_planned",
    "crossings",
    "up_crossings",
    "evaluation_interval_s",
    "unscaled",
    *(f"{n}_{p}_s" for n in ("decision", "scale_call") for p in ("p50", "p99", "max")),
    "running_p50_s",
    "running_p99_s",
    "overshoot",
    "overshoot_max",
    "overshoot_mean",
    "levels_off_target",
    "noise_evaluations",
    "noise_scalings",
    "reversals_under_noise",
    "noise_max_deviation",
    "wall_s",
    "python",
)


def test_the_template_has_the_policy_the_bench_assumes() -> None:
    args = autoscale.parse_args(["--interval", "2", "--cooldown", "4"])
    load = {"shape": "constant", "base": 150.0, "noise": 0.05}
    job, _ = parse_json_with_warnings({"Job": autoscale.job_json("j-1", 3, load, args)})
    (group,) = job.task_groups
    assert (job.id, group.name, group.count) == ("j-1", autoscale.GROUP, 3)
    assert group.tasks[0].resources.cpu == autoscale.ALLOC_MHZ
    assert group.tasks[0].config["load"] == load
    assert group.scaling is not None and group.scaling.max == autoscale.MAX_COUNT
    policy = group.scaling.policy
    assert (policy["evaluation_interval"], policy["cooldown"]) == ("2.0s", "4.0s")
    check = policy["check"][0]["cpu"]
    assert check["query"] == "avg_cpu-allocated"
    strategy = check["strategy"][0]["target-value"]
    assert (strategy["target"], strategy["threshold"]) == (
        autoscale.TARGET_PCT,
        autoscale.THRESHOLD,
    )


def test_noise_that_could_leave_the_tolerance_is_refused() -> None:
    with pytest.raises(SystemExit):
        autoscale.parse_args(["--noise-level", "1.06"])


def test_crossings_are_matched_with_their_scalings() -> None:
    seen = Seen()
    # Samples every second: 100 MHz, 200 from t=3, 100 from t=13 (ns keys).
    seen.totals["j"] = {t * 10**9: 200.0 if 3 <= t < 13 else 100.0 for t in range(1, 20)}
    seen.scalings["j"] = [
        Scaling(3.5, 3.4, 2, 4, "e1"),
        Scaling(5.0, 4.9, 4, 5, "e2"),  # one too many: overshoot 1
        Scaling(9.0, 8.9, 5, 4, "e3"),
        Scaling(13.6, math.nan, 4, 2, "e4"),  # the decision's time unknown
    ]
    seen.placed["e1"] = ["a1", "a2"]
    seen.running |= {"a1": 3.6, "a2": 3.7}
    assert find_crossings(seen.totals["j"], [200.0, 100.0]) == [3.0, 13.0]
    up, down = measure(seen, "j", [200.0, 100.0], initial=2, level_s=10.0)
    assert up.up and not down.up
    assert up.decision_s == pytest.approx(0.4) and up.scale_call_s == pytest.approx(0.5)
    assert up.running_s == pytest.approx(0.7)
    assert (up.overshoot, up.settled) == (1, 4)
    assert down.scale_call_s == pytest.approx(0.6) and math.isinf(down.decision_s)
    assert math.isinf(down.running_s) and (down.overshoot, down.settled) == (0, 2)
    # A crossing never scaled is infinite; a level without scalings keeps the count before.
    (late,) = measure(seen, "j", [200.0], initial=2, level_s=0.1)
    assert math.isinf(late.scale_call_s) and late.settled == 2


def test_reversals_and_percentiles() -> None:
    assert reversals([]) == reversals([1]) == reversals([1, 1]) == 0
    assert reversals([1, -1, -1, 1]) == 2
    assert percentile_s([], 50) is None
    values = [i / 100 for i in range(1, 101)]
    assert (percentile_s(values, 50), percentile_s(values, 99)) == (0.5, 0.99)
    assert percentile_s([*values[:99], math.inf], 99) == 0.99
    assert percentile_s([*values[:98], math.inf, math.inf], 99) is None


def test_a_tiny_run_closes_the_loop_and_prints_every_figure() -> None:
    # 6 s levels: a crossing's scaling lands well under a second after it (decision and
    # running p99 about 0.6 s here), and the cooldown (3 s) still ends within its level.
    args = autoscale.parse_args(
        ["--crossings", "4", "--jobs", "2", "--level-s", "6", "--noise-evaluations", "8"]
    )
    line = autoscale.run(args)
    assert [f for f in FIGURES if f not in line] == []
    assert line["bench"] == "autoscale" and line["evaluation_interval_s"] == 1.0
    assert line["crossings_planned"] == line["crossings"] == 4 and line["up_crossings"] == 2
    assert line["unscaled"] == 0 and line["levels_off_target"] == 0
    for name in ("decision", "scale_call"):
        p50, p99, top = (line[f"{name}_{p}_s"] for p in ("p50", "p99", "max"))
        assert 0 <= p50 <= p99 <= top
    # Per crossing the decision comes before its Scale call, so every rank does too.
    assert line["decision_p50_s"] <= line["scale_call_p50_s"]
    assert 0 < line["running_p50_s"] <= line["running_p99_s"]
    assert 0 <= line["overshoot_mean"] <= line["overshoot_max"] == line["overshoot"]
    assert line["noise_evaluations"] == 8
    assert 0 <= line["reversals_under_noise"] <= max(0, line["noise_scalings"] - 1)
    assert 0 < line["noise_max_deviation"] < autoscale.THRESHOLD
