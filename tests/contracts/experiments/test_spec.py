"""Experiment files: every policy kind and trace source parsed into typed records, defaults,
sweeps, errors that name the field path and the value, bounds, and (property) that no input
raises anything but ValidationError."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from contracts.errors import ValidationError
from contracts.experiments import (
    MAX_RUNS,
    ClusterSettings,
    DelaySamples,
    DstackSettings,
    HpaSettings,
    HybridSettings,
    KeepAliveSettings,
    LiveSettings,
    NodeShapeSpec,
    NomadSettings,
    PolicyFileSettings,
    PythonSettings,
    QueueSettings,
    RequestLog,
    SeriesFile,
    Synthetic,
    TargetValueSettings,
    ThresholdSettings,
    load_experiment,
    parse_experiment,
)

POLICY_FILE = """
scaling "web" {
  enabled = true
  min     = 2
  max     = 12
  type    = "horizontal"
  policy {
    cooldown = "1m"
    check "util" {
      query    = "utilisation"
      strategy "target-value" { target = 60 }
    }
    target "nomad-target" {
      Job   = "web"
      Group = "api"
    }
  }
}
"""

NOMAD_BODY = {
    "cooldown": "30s",
    "check": {"util": {"query": "utilisation", "strategy": {"target-value": {"target": 65}}}},
}


def base(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "demo",
        "traces": [
            {
                "name": "spike",
                "synthetic": "spike",
                "base": 5,
                "peak": 40,
                "at_s": "10m",
                "width_s": 300,
                "duration_s": "1h",
            }
        ],
        "policies": [{"name": "tv", "kind": "target-value"}],
    }
    doc.update(extra)
    return doc


def problems_of(doc: Any, base_dir: str = ".") -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse_experiment(doc, base_dir=base_dir)
    return info.value.problems


def test_every_kind_and_source(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "load.csv").write_text("timestamp,value\n0,1\n300,2\n")
    (tmp_path / "traces" / "req.csv").write_text("ts,dur\n0,1\n5,2\n")
    (tmp_path / "web.hcl").write_text(POLICY_FILE)
    doc = {
        "name": "all-kinds",
        "description": "every kind",
        "traces": [
            {
                "name": "nab",
                "file": "traces/load.csv",
                "values": "count",
                "window": {"duration_s": "10m"},
            },
            {
                "name": "req",
                "requests": "traces/req.csv",
                "columns": {"timestamp": "ts", "time_format": "s", "duration": "dur"},
                "bucket_s": 10,
                "time_scale": 0.5,
                "value_scale": 2,
            },
            {
                "name": "wave",
                "synthetic": "diurnal",
                "mean": 10,
                "amplitude": 5,
                "duration_s": "2h",
                "seed": 3,
            },
        ],
        "policies": [
            {
                "name": "tv",
                "kind": "target-value",
                "target": 60,
                "cooldown": "1m",
                "sweep": {"target": [50, 70]},
            },
            {"name": "th", "kind": "threshold", "upper": 90, "lower": 20, "percentage": 50},
            {"name": "hpa", "kind": "hpa", "stabilization_window": "2m"},
            {"name": "ds", "kind": "dstack", "target": 8, "scale_up_delay": 0},
            {"name": "ka", "kind": "keep-alive", "keep_alive": "20m"},
            {"name": "hh", "kind": "hybrid-histogram", "range": "2h", "bin": "1m"},
            {"name": "raw", "kind": "nomad", "policy": NOMAD_BODY, "max": 30},
            {"name": "file", "kind": "policy-file", "file": "web.hcl", "max": 8},
            {
                "name": "mine",
                "kind": "python",
                "class": "my_policies:Hold",
                "args": {"count": 3},
                "sweep": {"count": [1, 2]},
            },
        ],
        "parameters": {"start_delay_s": [0, "25s"], "per_alloc_rps": 10, "start_count": ["min", 2]},
        "seeds": [7, 9],
        "until_s": "30m",
        "cost": {"metric": "idle-memory", "memory_mb": 2048},
        "slo": "cold-start-share",
    }
    spec = parse_experiment(doc, base_dir=str(tmp_path))
    nab, req, wave = spec.traces
    assert nab.source == SeriesFile(str(tmp_path / "traces" / "load.csv"), "count")
    assert nab.duration_s == 600
    assert isinstance(req.source, RequestLog) and req.source.demand == "concurrency"
    assert req.source.layout.duration == "dur" and req.source.bucket_s == 10
    assert (req.time_scale, req.value_scale) == (0.5, 2)
    assert (
        wave.source == Synthetic("diurnal", (("mean", 10), ("amplitude", 5)), 7200, seed=3)
        and not wave.uses_run_seed()
    )
    tv, th, hpa, ds, ka, hh, raw, file, mine = spec.policies
    assert tv.settings == TargetValueSettings(target=60, cooldown_s=60)
    assert [v.target for v, _ in tv.variants()] == [50, 70]  # type: ignore[union-attr]
    assert th.settings == ThresholdSettings(upper=90, lower=20, percentage=50)
    assert hpa.settings == HpaSettings(stabilization_window_s=120)
    assert ds.settings == DstackSettings(target=8, scale_up_delay_s=0)
    assert ka.settings == KeepAliveSettings(keep_alive_s=1200)
    assert hh.settings == HybridSettings(range_s=7200, bin_s=60)
    assert isinstance(raw.settings, NomadSettings) and raw.settings.max == 30
    assert isinstance(file.settings, PolicyFileSettings) and file.settings.parsed is not None
    assert (file.settings.parsed.min, file.settings.parsed.max) == (2, 8)
    assert file.settings.parsed.enabled and file.settings.parsed.cooldown_s == 60
    assert isinstance(mine.settings, PythonSettings)
    assert mine.settings.search_path == str(tmp_path)
    assert [dict(v.args) for v, _ in mine.variants()] == [{"count": 1}, {"count": 2}]  # type: ignore[union-attr]
    assert [a.labels for a in spec.parameters] == [("0", "25s"), ("10",), ("min", "2")]
    assert spec.parameter("start_delay_s").values == (0, 25)
    assert spec.parameter("start_count").values == (None, 2)
    assert spec.seeds == (7, 9) and spec.until_s == 1800 and spec.interval_s is None
    assert (spec.pareto.cost, spec.pareto.memory_mb, spec.pareto.slo) == (
        "idle-memory",
        2048,
        "cold-start-share",
    )
    # 3 traces x (2 + 7 + 2 policy variants) x (2 x 1 x 2 parameters) x 2 seeds
    assert spec.runs == 3 * 11 * 4 * 2


def test_defaults_follow_the_tools(tmp_path: Path) -> None:
    spec = parse_experiment(base())
    assert spec.seeds == (0,) and spec.until_s is None
    assert [(a.name, a.values) for a in spec.parameters] == [
        ("start_delay_s", (0.0,)),
        ("per_alloc_rps", (1.0,)),
        ("start_count", (None,)),
    ]
    tv = spec.policies[0].settings
    assert isinstance(tv, TargetValueSettings)
    # Nomad Autoscaler's defaults: 10 s interval, 5 min cooldown, 1 min window, 0.01 threshold
    assert (tv.evaluation_interval_s, tv.cooldown_s, tv.query_window_s, tv.threshold) == (
        10,
        300,
        60,
        0.01,
    )
    assert parse_experiment(base(seeds=3)).seeds == (0, 1, 2)
    path = tmp_path / "my-run.yaml"
    doc = base()
    del doc["name"]
    path.write_text(yaml.safe_dump(doc))
    assert load_experiment(str(path)).name == "my-run"


def test_a_required_setting_may_come_from_its_sweep() -> None:
    doc = base(policies=[{"name": "ds", "kind": "dstack", "sweep": {"target": [5, 10]}}])
    policy = parse_experiment(doc).policies[0]
    assert [s.target for s, _ in policy.variants()] == [5, 10]  # type: ignore[union-attr]
    assert [labels for _, labels in policy.variants()] == [(("target", "5"),), (("target", "10"),)]


def mutate(path: str, value: Any) -> dict[str, Any]:
    """base() with the value at a dotted path (list indices as numbers) replaced."""
    doc = base()
    keys = path.split(".")
    here: Any = doc
    for key in keys[:-1]:
        here = here[int(key)] if isinstance(here, list) else here[key]
    last = keys[-1]
    if isinstance(here, list):
        here[int(last)] = value
    else:
        here[last] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            mutate("policies.0.kind", "foo"),
            "policies[0].kind: 'foo' is not one of target-value, threshold, hpa, dstack,"
            " keep-alive, hybrid-histogram, nomad, policy-file, python",
        ),
        (mutate("policies.0.target", -1), "policies[0].target: expected a number > 0, got -1"),
        (mutate("policies.0.cooldown", "5 minutes"), "policies[0].cooldown: expected seconds"),
        (mutate("policies.0.bogus", 1), "policies[0].bogus: unknown field 'bogus'"),
        (mutate("policies.0.min", 500), "policies[0]: min 500 is above max 100"),
        (mutate("policies.0.max", 0), "policies[0]: max 0 allows no allocation"),
        (mutate("policies.0.sweep", {"bogus": [1]}), "policies[0].sweep.bogus: 'bogus' is not a"),
        (
            mutate("policies.0.sweep", {"per_alloc_rps": [1]}),
            "policies[0].sweep.per_alloc_rps: a run parameter; sweep it under `parameters`",
        ),
        (
            mutate("policies.0.sweep", {"target": [50, "x"]}),
            "policies[0].sweep.target[1]: expected a number, got 'x'",
        ),
        (
            mutate("policies.0.sweep", {"min": [1, 200]}),
            "policies[0]: min 200 is above max 100 (sweep min=200)",
        ),
        (mutate("policies.0.name", "a b"), "policies[0].name: 'a b' is not a name of letters"),
        (mutate("policies.0", "tv"), "policies[0]: expected a mapping, got 'tv'"),
        (mutate("traces.0.peak", "high"), "traces[0].peak: expected a number, got 'high'"),
        (mutate("traces.0.synthetic", "square"), "traces[0].synthetic: 'square' is not one of"),
        (mutate("traces.0.noise", 1.5), "traces[0].noise: expected a fraction in [0, 1), got 1.5"),
        (mutate("traces.0.file", "x.csv"), "traces[0]: exactly one of file, requests, synthetic"),
        (mutate("traces.0.window", {"start": 1}), "traces[0].window.start: unknown field"),
        (mutate("parameters", {"per_alloc_rps": [1, -1]}), "parameters.per_alloc_rps[1]: expected"),
        (mutate("parameters", {"start_count": "max"}), "parameters.start_count: expected a whole"),
        (mutate("parameters", {"keep_alive": [1]}), "parameters.keep_alive: unknown parameter"),
        (mutate("seeds", [1, 1]), "seeds: seeds repeat: [1, 1]"),
        (mutate("seeds", 0), "seeds: expected a whole number >= 1, got 0"),
        (mutate("seeds", [-1]), "seeds[0]: expected a whole number >= 0, got -1"),
        (mutate("cost", "dollars"), "cost: 'dollars' is not one of allocation-hours, idle-memory"),
        (mutate("cost", {"metric": "idle-memory", "memory_mb": 0}), "cost.memory_mb: expected"),
        (mutate("slo", "p99"), "slo: 'p99' is not one of violation-minutes"),
        (mutate("until_s", "forever"), "until_s: expected seconds or a duration"),
        (mutate("colour", "red"), "colour: unknown field 'colour'"),
        (mutate("live", {"time_factor": 0}), "live.time_factor: expected a number > 0, got 0"),
        (mutate("live", {"until_s": "soon"}), "live.until_s: expected seconds or a duration"),
        (mutate("live", {"alloc_mhz": 0}), "live.alloc_mhz: expected a whole number >= 1"),
        (mutate("live", {"factor": 30}), "live.factor: unknown field 'factor'"),
        (mutate("live", 30), "live: expected a mapping, got 30"),
        (mutate("queue", {"slo_wait_s": -1}), "queue.slo_wait_s: expected"),
        (mutate("queue", {}), "queue.slo_wait_s: required"),
        (mutate("capacity", {"target_utilisation": 70}), "capacity.max_rps: required"),
        (mutate("capacity", {"max_rps": 10, "target_utilisation": [70, 0]}), "capacity.target_"),
        (
            base(capacity={"max_rps": 10}, parameters={"per_alloc_rps": 5}),
            "capacity: give parameters.per_alloc_rps or capacity, not both",
        ),
        (mutate("cluster", {"allocs_per_node": 0}), "cluster.allocs_per_node: expected a whole"),
        (mutate("cluster", {"node_delay_s": "soon"}), "cluster.node_delay_s: expected seconds"),
        (mutate("cluster", {"racks": 2}), "cluster.racks: unknown field 'racks'"),
        (
            mutate("cluster", {"initial_nodes": 5, "max_nodes": 2}),
            "cluster: expected min_nodes <= initial_nodes <= max_nodes, got 0, 5, 2",
        ),
        (mutate("cost", "node-hours"), "cost: node-hours needs a `cluster:`"),
        (mutate("cluster", {"placement": "spread"}), "cluster.placement: 'spread' is not one of"),
        (mutate("cluster", {"shapes": [{"cpu_mhz": 1}]}), "cluster: shapes and ask_* are for"),
        (
            mutate(
                "cluster", {"placement": "core", "shapes": [{"cpu_mhz": 2000, "load_cpu": 1500}]}
            ),
            "cluster.shapes[0]: 500 MHz and 8192 MB free after its load hold no allocation of"
            " 1000 MHz and 1024 MB",
        ),
        (
            mutate("cluster", {"placement": "core", "shapes": [{"disk_mb": 1}]}),
            "cluster.shapes[0].disk_mb: unknown field",
        ),
        (mutate("start_delays", {"x": {"file": "nope.csv"}}), "start_delays.x.file: no such file"),
        (mutate("start_delays", {"x": {}}), "start_delays.x.file: required"),
        (
            mutate("parameters", {"start_delay_s": [0, "load"]}),
            "parameters.start_delay_s[1]: expected seconds, a duration or a start_delays name"
            " (none defined), got 'load'",
        ),
        (mutate("traces", []), "traces: expected at least one item, got an empty list"),
        (mutate("policies", {"tv": {}}), "policies: expected a list, got {'tv': {}}"),
    ],
)
def test_errors_name_the_field_and_value(doc: dict[str, Any], expected: str) -> None:
    problems = problems_of(doc)
    assert any(p.startswith(expected) for p in problems), problems


def test_the_live_block() -> None:
    spec = parse_experiment(base())
    assert spec.live == LiveSettings(time_factor=30.0, until_s=None, alloc_mhz=100)
    doc = base(live={"time_factor": 60, "until_s": "15m", "alloc_mhz": 250, "max_real_s": "2h"})
    live = parse_experiment(doc).live
    assert live == LiveSettings(time_factor=60.0, until_s=900.0, alloc_mhz=250, max_real_s=7200.0)


def test_sampled_start_delays_and_the_queue(tmp_path: Path) -> None:
    (tmp_path / "loads.csv").write_text("value\n1000\n")
    doc = base(
        start_delays={"model-load": {"file": "loads.csv", "unit": "ms"}},
        parameters={"start_delay_s": [0, "30s", "model-load"]},
        queue={"slo_wait_s": "2s"},
    )
    spec = parse_experiment(doc, base_dir=str(tmp_path))
    load = DelaySamples("model-load", str(tmp_path / "loads.csv"), "value", "ms")
    assert spec.start_delays == (load,)
    axis = spec.parameter("start_delay_s")
    assert axis.values == (0.0, 30.0, load) and axis.labels == ("0", "30s", "model-load")
    assert spec.queue == QueueSettings(slo_wait_s=2.0)
    doc["start_delays"]["model-load"]["unit"] = "h"
    assert problems_of(doc, str(tmp_path)) == [
        "start_delays.model-load.unit: 'h' is not one of s, ms, us, ns, m"
    ]


def test_capacity_at_a_target_utilisation() -> None:
    spec = parse_experiment(base(capacity={"max_rps": 14, "target_utilisation": [50, 70, 100]}))
    axis = spec.parameter("per_alloc_rps")
    assert axis.values == pytest.approx((7.0, 9.8, 14.0))
    assert axis.labels == ("14 at 50%", "14 at 70%", "14 at 100%")
    assert spec.runs == 3


def test_the_cluster_block() -> None:
    doc = base(
        cluster={"allocs_per_node": 4, "max_nodes": 10, "node_delay_s": "2m", "node_idle_s": 0},
        cost="node-hours",
    )
    spec = parse_experiment(doc)
    assert spec.cluster == ClusterSettings(
        allocs_per_node=4, max_nodes=10, node_delay_s=120.0, node_idle_s=0.0
    )
    assert spec.pareto.cost == "node-hours"
    assert parse_experiment(base()).cluster is None
    core = {
        "placement": "core",
        "ask_cpu": 1300,
        "shapes": [{"cpu_mhz": 4000, "load_cpu": 1400}, {"cpu_mhz": 8000}],
    }
    settings = parse_experiment(base(cluster=core)).cluster
    assert settings is not None and settings.placement == "core" and settings.ask_cpu == 1300
    assert settings.shapes == (
        NodeShapeSpec(cpu_mhz=4000, load_cpu=1400),
        NodeShapeSpec(cpu_mhz=8000),
    )


def test_problems_are_reported_together() -> None:
    doc = mutate("policies.0.kind", "foo")
    doc["seeds"] = "many"
    doc["traces"][0]["base"] = -3
    problems = problems_of(doc)
    assert [p.split(":")[0] for p in problems] == ["traces[0].base", "policies[0].kind", "seeds"]


def test_names_are_unique_and_required() -> None:
    doc = base(policies=[{"name": "a", "kind": "hpa"}, {"name": "a", "kind": "dstack"}])
    problems = problems_of(doc)
    assert "policies[1].target: required" in problems
    doc["policies"][1]["target"] = 1
    assert problems_of(doc) == ["policies[1].name: 'a' is used twice"]
    assert problems_of(mutate("policies.0", {"kind": "hpa"})) == ["policies[0].name: required"]


def test_a_nomad_body_goes_through_the_autoscalers_parser() -> None:
    body = copy.deepcopy(NOMAD_BODY)
    body["check"]["util"]["strategy"] = {"target-value": {}}
    problems = problems_of(base(policies=[{"name": "raw", "kind": "nomad", "policy": body}]))
    assert problems == [
        'policies[0].policy > scaling > policy > check "util" > strategy "target-value":'
        " target is required"
    ]


def test_policy_files(tmp_path: Path) -> None:
    (tmp_path / "two.hcl").write_text(POLICY_FILE + POLICY_FILE.replace('"web"', '"batch"', 1))
    policy = {"name": "f", "kind": "policy-file", "file": "two.hcl"}
    problems = problems_of(base(policies=[policy]), str(tmp_path))
    assert problems == ["policies[0].file: 2 scaling blocks (web, batch); pick one with `policy`"]
    picked = parse_experiment(
        base(policies=[{**policy, "policy": "batch"}]), base_dir=str(tmp_path)
    )
    assert picked.policies[0].settings.parsed is not None  # type: ignore[union-attr]
    problems = problems_of(base(policies=[{**policy, "policy": "nope"}]), str(tmp_path))
    assert problems == ["policies[0].file: no scaling block 'nope' (the file has web, batch)"]
    (tmp_path / "bad.hcl").write_text('scaling "x" { min = 1 }')
    problems = problems_of(base(policies=[{**policy, "file": "bad.hcl"}]), str(tmp_path))
    assert problems[0].startswith(f"policies[0].file: {tmp_path}/bad.hcl")
    assert problems_of(base(policies=[{**policy, "file": "none.hcl"}]), str(tmp_path))[
        0
    ].startswith("policies[0].file: no such file 'none.hcl'")
    (tmp_path / "group.json").write_text(
        '{"Min": 1, "Max": 4, "Policy": {"check": {"c": {"query": "rps",'
        ' "strategy": {"target-value": {"target": 5}}}}}}'
    )
    spec = parse_experiment(
        base(policies=[{**policy, "file": "group.json"}]), base_dir=str(tmp_path)
    )
    parsed = spec.policies[0].settings.parsed  # type: ignore[union-attr]
    assert parsed is not None and (parsed.min, parsed.max) == (1, 4)


def test_request_traces(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("TIMESTAMP,x\n2024-01-01 00:00:00,1\n")
    trace = {"name": "r", "requests": "r.csv", "preset": "azure-llm"}
    spec = parse_experiment(base(traces=[trace]), base_dir=str(tmp_path))
    source = spec.traces[0].source
    assert isinstance(source, RequestLog) and source.demand == "arrivals"
    problems = problems_of(base(traces=[{**trace, "demand": "concurrency"}]), str(tmp_path))
    assert problems == [
        "traces[0].demand: concurrency needs execution times (a duration or end column)"
    ]
    both = {**trace, "columns": {"timestamp": "TIMESTAMP"}}
    assert problems_of(base(traces=[both]), str(tmp_path)) == [
        "traces[0]: exactly one of preset, columns is required"
    ]
    columns = {"timestamp": "t", "duration": "d", "end": "e"}
    problems = problems_of(
        base(traces=[{"name": "r", "requests": "r.csv", "columns": columns}]), str(tmp_path)
    )
    assert problems == ["traces[0].columns: give duration or end, not both"]


def test_bounds() -> None:
    many = base(seeds=1000, parameters={"start_delay_s": list(range(11))})
    with pytest.raises(ValidationError, match=f"11000 runs .*more than the {MAX_RUNS} allowed"):
        parse_experiment(many)
    traces = base()["traces"] * 33
    assert problems_of(base(traces=traces)) == ["traces: 33 items, more than the 32 allowed"]
    values = mutate("parameters", {"start_delay_s": list(range(101))})
    assert problems_of(values) == [
        "parameters.start_delay_s: 101 values, more than the 100 allowed"
    ]


def test_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ValidationError, match=r"^not YAML: "):
        load_experiment(str(bad))
    with pytest.raises(ValidationError, match=r"^cannot read"):
        load_experiment(str(tmp_path / "missing.yaml"))
    big = tmp_path / "big.yaml"
    big.write_text("#" * (1024 * 1024 + 1))
    with pytest.raises(ValidationError, match="more than the 1048576 allowed"):
        load_experiment(str(big))
    assert problems_of(["a list"]) == ["experiment: expected a mapping, got ['a list']"]


# -- any input: a spec or a ValidationError ---------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "x", "10m", "min", "spike", "hpa", "target-value", "nomad", "1h"]),
)
KEYS = st.sampled_from(
    [
        "name", "kind", "traces", "policies", "parameters", "seeds", "synthetic", "file",
        "requests", "target", "sweep", "cost", "slo", "base", "peak", "at_s", "width_s",
        "duration_s", "policy", "check", "window", "per_alloc_rps", "start_count", "min", "max",
        "until_s", "class", "args", "memory_mb", "metric", "preset", "columns",
    ]
)  # fmt: skip
plain_data = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(KEYS, st.integers(0, 3)), inner, max_size=5),
    ),
    max_leaves=30,
)


@given(
    doc=st.one_of(plain_data, st.fixed_dictionaries({}, optional={k: plain_data for k in (
        "name", "traces", "policies", "parameters", "seeds", "cost", "slo", "until_s")}))
)  # fmt: skip
def test_any_input_gives_a_spec_or_a_validation_error(doc: Any) -> None:
    try:
        spec = parse_experiment(doc, base_dir="/nonexistent")
    except ValidationError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
    else:
        assert spec.traces and spec.policies
