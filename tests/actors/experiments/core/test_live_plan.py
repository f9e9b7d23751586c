"""Live replay plans: the policy compressed in time as the autoscaler will parse it, the demand
as the mock load model's trace in MHz, and refusals naming what cannot be replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.agent.core.load_model import parse_load
from actors.experiments.core.live_plan import LiveSetup, compressed_policy, live_job, trace_csv
from actors.experiments.core.policies import HPA_BEHAVIOR, hpa_like, nomad_policy_dict
from contracts.autoscaling import parse_group_policy
from contracts.errors import ValidationError


def parsed(body: dict[str, object], lo: int = 1, hi: int = 10) -> object:
    return parse_group_policy(body, min=lo, max=hi, where="x")


def test_every_duration_is_divided_by_the_factor_and_the_query_is_the_live_one() -> None:
    body = nomad_policy_dict(
        query="utilisation",
        strategy="target-value",
        settings={"target": 70, "threshold": 0.05},
        interval="10s",
        cooldown="2m",
        behavior=HPA_BEHAVIOR,
    )
    body["check"][0]["sim"]["query_window"] = "5m"  # type: ignore[index]
    policy = parse_group_policy(body, min=1, max=10, where="x")
    live = parse_group_policy(compressed_policy(policy, 10), min=1, max=10, where="live")
    assert live.evaluation_interval_s == pytest.approx(1.0)
    assert live.cooldown_s == pytest.approx(12.0)
    assert live.cooldown_on_scale_up_s == pytest.approx(12.0)
    (check,) = live.checks
    assert (check.query, check.source, check.query_window_s) == ("avg_cpu-allocated", "drover", 30)
    assert check.strategy == policy.checks[0].strategy
    assert live.behavior.scale_down.stabilization_window_s == pytest.approx(30.0)
    assert [r.period_s for r in live.behavior.scale_up.rates] == [1.5, 1.5]
    assert [r.value for r in live.behavior.scale_up.rates] == [100, 4]


def test_a_zero_cooldown_stays_near_zero_and_a_window_keeps_two_agent_samples() -> None:
    hpa = hpa_like(query="utilisation", target=60, min=1, max=8).policy
    live = parse_group_policy(compressed_policy(hpa, 100), min=1, max=8, where="live")
    # 0 would read as "the default 5m" to the parser
    assert live.cooldown_s == pytest.approx(0.001)
    assert live.checks[0].query_window_s == 2.0  # 60 s / 100 is below the agents' sampling


@pytest.mark.parametrize(
    ("window", "factor", "trigger", "live_trigger", "live_window"),
    [
        ("1m", 30, 5, 2, 2.0),  # 6 sim points, 2 live: 5 of 6 -> 2 of 2
        ("1m", 6, 5, 9, 10.0),  # 6 sim points, 10 live: 5 of 6 -> 9 of 10
        ("2m", 10, 3, 3, 12.0),  # 12 and 12
        ("1m", 100, 1, 1, 2.0),  # never below one
    ],
)
def test_a_thresholds_trigger_asks_for_the_same_share_of_the_live_windows_points(
    window: str, factor: float, trigger: int, live_trigger: int, live_window: float
) -> None:
    body = nomad_policy_dict(
        query="utilisation",
        strategy="threshold",
        settings={"lower_bound": 80, "delta": 1, "within_bounds_trigger": trigger},
        interval="10s",
    )
    body["check"][0]["sim"]["query_window"] = window  # type: ignore[index]
    policy = parse_group_policy(body, min=1, max=10, where="x")
    live = parse_group_policy(compressed_policy(policy, factor), min=1, max=10, where="live")
    (check,) = live.checks
    assert check.query_window_s == pytest.approx(live_window)
    assert check.strategy.config.within_bounds_trigger == live_trigger  # type: ignore[union-attr]


def test_queries_without_a_live_counterpart_are_refused_naming_the_check() -> None:
    body = nomad_policy_dict(query="rps_per_alloc", strategy="target-value", settings={"target": 5})
    policy = parse_group_policy(body, min=1, max=10, where="x")
    with pytest.raises(ValidationError, match="check 'sim': query 'rps_per_alloc' has no live"):
        compressed_policy(policy, 10, where="policies[0]")


def test_the_trace_is_in_mhz_up_to_the_replay_and_the_job_is_a_valid_mock_load(
    tmp_path: Path,
) -> None:
    setup = LiveSetup(time_factor=20, until_s=300, per_alloc_rps=4, start_count=2, alloc_mhz=200)
    text = trace_csv([0, 100, 200, 400], [1, 2.5, 0, 9], setup)
    assert text == "timestamp,value\n0,50\n100,125\n200,0\n300,0\n"
    body = nomad_policy_dict(query="utilisation", strategy="target-value", settings={"target": 50})
    policy = parse_group_policy(body, min=1, max=5, where="x")
    trace = tmp_path / "t.csv"
    trace.write_text(text)
    job = live_job("j", policy, setup, str(trace))
    (group,) = job["TaskGroups"]
    assert (group["Count"], group["Scaling"]["Min"], group["Scaling"]["Max"]) == (2, 1, 5)
    load = parse_load(group["Tasks"][0]["Config"]["load"])
    assert (load.shape, load.time_factor) == ("trace", 20)
    assert load.demand(150) == 125 and load.demand(310) == 0
    assert group["Tasks"][0]["Resources"]["CPU"] == 200
    assert setup.real_seconds == 15


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"time_factor": 0}, "live.time_factor"),
        ({"until_s": -1}, "live.until_s"),
        ({"start_count": 0}, "start_count 0 must be at least 1"),
    ],
)
def test_bad_setups_name_the_field(kwargs: dict[str, float], problem: str) -> None:
    args = {"time_factor": 10.0, "until_s": 60.0, "per_alloc_rps": 1.0, "start_count": 1}
    with pytest.raises(ValidationError, match=problem):
        LiveSetup(**(args | kwargs))  # type: ignore[arg-type]
