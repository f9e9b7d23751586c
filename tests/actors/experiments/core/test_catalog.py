"""The catalog: every policy kind of an experiment file built as a fresh SimPolicy that runs as
the tool it names (the Nomad kinds through the autoscaler's own handler, the HPA as hpa_like,
threshold tiers that scale both ways), user classes imported beside the experiment file, and
problems that name the policy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from actors.experiments.core.catalog import build, go_duration, validate
from actors.experiments.core.demand import from_series
from actors.experiments.core.metrics import Scaling
from actors.experiments.core.policies import (
    DstackPolicy,
    KeepAlivePolicy,
    NomadPolicy,
    hpa_like,
    nomad_policy_dict,
)
from actors.experiments.core.simulator import simulate
from actors.experiments.core.state import METRICS
from contracts.errors import ValidationError
from contracts.experiments import SIM_METRICS, PolicySpec, parse_experiment

SPIKE = {
    "name": "s",
    "synthetic": "step",
    "base": 1,
    "peak": 2,
    "at_s": 60,
    "duration_s": 600,
}


def policies(*items: dict[str, Any], base_dir: str = ".") -> tuple[PolicySpec, ...]:
    doc = {"name": "c", "traces": [SPIKE], "policies": list(items)}
    return parse_experiment(doc, base_dir=base_dir).policies


def one(item: dict[str, Any], base_dir: str = ".") -> PolicySpec:
    return policies({"name": "p", **item}, base_dir=base_dir)[0]


def test_the_contracts_know_the_simulators_metrics() -> None:
    assert set(SIM_METRICS) == set(METRICS)


def test_go_durations() -> None:
    assert [go_duration(s) for s in (0, 90, 0.5, 1e-5)] == ["0s", "90s", "0.5s", "0.00001s"]


def test_target_value_is_the_nomad_policy_with_its_settings() -> None:
    spec = one({"kind": "target-value", "target": 10, "metric": "rps_per_alloc", "cooldown": "1m"})
    built = build(spec, per_alloc_rps=10)
    assert isinstance(built.policy, NomadPolicy) and built.min == 1
    demand = from_series([0, 60, 80, 300], [5, 40, 80, 10], span_s=400)
    body = nomad_policy_dict(
        query="rps_per_alloc", strategy="target-value", settings={"target": 10}, cooldown="1m"
    )
    reference = NomadPolicy.from_dict(body, min=1, max=100)
    ours = simulate(demand, built.policy, start_count=1, per_alloc_rps=10)
    theirs = simulate(demand, reference, start_count=1, per_alloc_rps=10)
    assert (
        ours.actions
        == theirs.actions
        == [
            Scaling(60, 1, 4),
            Scaling(130, 4, 8),
            Scaling(300, 8, 1),
        ]
    )


def test_a_zero_cooldown_means_none() -> None:
    spec = one({"kind": "target-value", "cooldown": 0})
    policy = build(spec, per_alloc_rps=1).policy
    assert isinstance(policy, NomadPolicy) and policy.policy.cooldown_s == 0
    assert policy.policy.cooldown_on_scale_up_s == 0


def test_threshold_tiers_scale_up_and_down() -> None:
    spec = one({"kind": "threshold", "upper": 80, "lower": 40, "cooldown": "1m"})
    built = build(spec, per_alloc_rps=10)
    demand = from_series([0, 600], [60, 10], span_s=1200)
    result = simulate(demand, built.policy, start_count=1, per_alloc_rps=10)
    counts = [a.to_count for a in result.actions]
    peak = max(counts)
    assert counts[: peak - 1] == list(range(2, peak + 1))  # +1 a minute while >= 80 %
    assert result.actions[-1].to_count < peak  # and -1 once below 40 %
    assert all(a.time_s >= 600 for a in result.actions if not a.up)


def test_hpa_defaults_are_hpa_like() -> None:
    spec = one({"kind": "hpa", "target": 10, "metric": "rps_per_alloc"})
    built = build(spec, per_alloc_rps=10)
    dip = from_series([0, 300, 420, 700], [40, 10, 40, 5], span_s=1500)
    ours = simulate(dip, built.policy, start_count=4, per_alloc_rps=10)
    reference = hpa_like(query="rps_per_alloc", target=10, min=1, max=100)
    theirs = simulate(dip, reference, start_count=4, per_alloc_rps=10)
    assert ours.actions == theirs.actions and ours.actions
    short = one({"kind": "hpa", "target": 10, "metric": "rps_per_alloc", "stabilization_window": 0})
    quick = simulate(dip, build(short, per_alloc_rps=10).policy, start_count=4, per_alloc_rps=10)
    assert quick.actions[0] == Scaling(300, 4, 1)  # no stabilisation: down at the dip


def test_dstack_and_keep_alive() -> None:
    dstack, keep = policies(
        {"name": "d", "kind": "dstack", "target": 7, "scale_up_delay": "1m", "max": 9},
        {"name": "k", "kind": "keep-alive", "keep_alive": "20m"},
    )
    built = build(dstack, per_alloc_rps=10)
    assert built.policy == DstackPolicy(target_rps=7, min=0, max=9, scale_up_delay_s=60)
    assert built.min == 0
    built = build(keep, per_alloc_rps=4)
    assert built.policy == KeepAlivePolicy(keep_alive_s=1200, per_alloc_rps=4, max=100)
    own = one({"kind": "keep-alive", "per_alloc_rps": 2})
    assert build(own, per_alloc_rps=4).policy == KeepAlivePolicy(per_alloc_rps=2, max=100)


def test_every_run_gets_a_fresh_policy() -> None:
    spec = one({"kind": "hpa"})
    first, second = build(spec, per_alloc_rps=1).policy, build(spec, per_alloc_rps=1).policy
    assert first is not second
    assert first.handler is not second.handler  # type: ignore[attr-defined]


def test_sweep_variants_build_their_own_settings() -> None:
    spec = one({"kind": "target-value", "sweep": {"target": [50, 90], "max": [3, 4]}})
    built = [build(spec, settings, per_alloc_rps=1) for settings, _ in spec.variants()]
    got = [(b.policy.policy.checks[0].strategy.config.target, b.policy.policy.max) for b in built]  # type: ignore[attr-defined]
    assert got == [(50, 3), (50, 4), (90, 3), (90, 4)]


def test_raw_nomad_bodies_and_policy_files(tmp_path: Path) -> None:
    body = {"check": {"c": {"query": "rps", "strategy": {"target-value": {"target": 5}}}}}
    raw = build(one({"kind": "nomad", "policy": body, "min": 2, "max": 6}), per_alloc_rps=1)
    assert isinstance(raw.policy, NomadPolicy) and raw.min == 2
    assert (raw.policy.policy.min, raw.policy.policy.max) == (2, 6)
    (tmp_path / "p.hcl").write_text(
        'scaling "web" {\n  min = 3\n  max = 9\n  policy {\n'
        '    check "c" {\n      query = "utilisation"\n'
        '      strategy "target-value" { target = 60 }\n    }\n'
        '    target "fleet" { fleet = "gpu" }\n  }\n}\n'
    )
    spec = one({"kind": "policy-file", "file": "p.hcl", "sweep": {"max": [5, 7]}}, str(tmp_path))
    built = [build(spec, s, per_alloc_rps=1) for s, _ in spec.variants()]
    assert [(b.min, b.policy.policy.max, b.policy.policy.enabled) for b in built] == [  # type: ignore[attr-defined]
        (3, 5, True),
        (3, 7, True),
    ]


def test_a_check_must_query_a_simulated_metric() -> None:
    body = {"check": {"q": {"query": "avg(up)", "strategy": {"target-value": {"target": 5}}}}}
    spec = one({"kind": "nomad", "policy": body})
    with pytest.raises(ValidationError) as info:
        build(spec, per_alloc_rps=1)
    assert str(info.value).startswith(
        "policies[0]: check \"q\" queries 'avg(up)'; the simulator has avg_cpu-allocated"
    )


HOLD = '''
class Hold:
    """Holds `count` allocations."""

    wakes_on_demand = False

    def __init__(self, count, interval_s=30.0, min=0):
        if count < 0:
            raise ValueError("count must not be negative")
        self.count, self.interval_s, self.min = count, interval_s, min

    def decide(self, now, state):
        return self.count if state.count != self.count else None


class NoDecide:
    interval_s = 10.0
    wakes_on_demand = False
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the catalog adds the file's folder
    name = f"user_policies_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(HOLD)
    return name


def test_a_python_class_beside_the_experiment(tmp_path: Path, user_module: str) -> None:
    spec = one(
        {"kind": "python", "class": f"{user_module}:Hold", "args": {"count": 3, "min": 1}},
        str(tmp_path),
    )
    built = build(spec, per_alloc_rps=1)
    assert built.min == 1 and built.policy.interval_s == 30
    result = simulate(from_series([0], [1], span_s=100), built.policy)
    assert result.actions == [Scaling(0, 0, 3)]


@pytest.mark.parametrize(
    ("target", "args", "message"),
    [
        ("missing_module_xyz:Hold", {}, "class: cannot import 'missing_module_xyz'"),
        ("{m}:Nope", {}, "class: '{m}' has no class 'Nope'"),
        ("{m}:NoDecide", {}, "class: {m}:NoDecide lacks decide (see SimPolicy)"),
        ("{m}:Hold", {"count": -1}, "args: {m}:Hold(count=-1) failed: count must not be"),
        ("{m}:Hold", {"colour": 1}, "args: {m}:Hold(colour=1) failed: "),
    ],
)
def test_python_class_problems_name_the_policy(
    tmp_path: Path, user_module: str, target: str, args: dict[str, Any], message: str
) -> None:
    spec = one(
        {"kind": "python", "class": target.format(m=user_module), "args": args}, str(tmp_path)
    )
    with pytest.raises(ValidationError) as info:
        validate([spec], per_alloc_rps=1)
    assert str(info.value).startswith("policies[0]: " + message.format(m=user_module))


def test_hybrid_histogram() -> None:
    from actors.experiments.core.hybrid import HybridHistogramPolicy

    spec = one({"kind": "hybrid-histogram", "range": "2h", "bin": "2m", "max": 5})
    built = build(spec, per_alloc_rps=3)
    assert isinstance(built.policy, HybridHistogramPolicy) and built.min == 0
    assert built.policy.histogram.range_s == 7200 and built.policy.histogram.bin_s == 120
    assert (built.policy.per_alloc_rps, built.policy.max) == (3, 5)
    bad = one({"kind": "hybrid-histogram", "range": "1m", "bin": "1m"})
    with pytest.raises(ValidationError, match=r"^policies\[0\]: range_s and bin_s must be"):
        build(bad, per_alloc_rps=1)
