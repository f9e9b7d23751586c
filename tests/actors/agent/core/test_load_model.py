"""The mock tasks' load model: shapes over simulated time, noise, the clock factor, trace
replay, configs refused with the field named, and each group's demand shared out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from actors.agent.core.load_model import (
    GroupLoads,
    LoadModel,
    load_problems,
    noise_factor,
    parse_load,
)
from actors.agent.core.load_trace import MAX_TRACE_POINTS, load_trace

# -- shapes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"shape": "constant", "base": 250}, {0: 250, 100: 250}),
        ({"base": 80}, {0: 80, 5: 80}),  # constant is the default shape
        (
            {"shape": "step", "base": 100, "peak": 400, "at": "30s"},
            {0: 100, 29.9: 100, 30: 400, 1000: 400},
        ),
        (
            {"shape": "ramp", "base": 100, "peak": 400, "at": "10s", "duration": "1m"},
            {5: 100, 10: 100, 40: 250, 70: 400, 500: 400},
        ),
        (
            {"shape": "ramp", "base": 400, "peak": 100, "duration": 30},  # ramps go down too
            {0: 400, 15: 250, 30: 100},
        ),
        (
            {"shape": "spike", "base": 100, "peak": 900, "at": "1m", "duration": "30s"},
            {59: 100, 60: 900, 89: 900, 90: 100},
        ),
        (
            {"shape": "sine", "base": 300, "peak": 100, "duration": "40s"},
            {0: 300, 10: 400, 20: 300, 30: 200, 40: 300},
        ),
        (  # never below zero
            {"shape": "sine", "base": 50, "peak": 100, "at": 0, "duration": 4},
            {1: 150, 3: 0},
        ),
    ],
)
def test_each_shape_gives_the_demand_at_chosen_times(
    config: dict[str, Any], expected: dict[float, float]
) -> None:
    model = parse_load(config)
    assert {t: model.demand(t) for t in expected} == pytest.approx(expected, abs=1e-9)


def test_defaults_of_a_load_block() -> None:
    assert parse_load({"base": 10}) == LoadModel(shape="constant", base=10.0)
    model = parse_load({"shape": "step", "base": 1, "peak": 2, "memory_mb": 64})
    assert (model.at, model.noise, model.memory_mb, model.time_factor) == (0.0, 0.0, 64.0, 1.0)


# -- bad configs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ("fast", "load: expected a map, got 'fast'"),
        ({"shape": "square", "base": 1}, "load.shape: expected one of constant, step, ramp, "),
        ({"shape": "step", "base": 1}, 'load.peak: required by shape "step"'),
        ({"shape": "ramp", "base": 1, "peak": 2}, 'load.duration: required by shape "ramp"'),
        ({"shape": "trace"}, 'load.trace: required by shape "trace"'),
        ({"base": 1, "bass": 2}, 'load: unknown key "bass"'),
        ({"base": 1, "peak": 2}, 'load.peak: not used by shape "constant"'),
        ({"base": -5}, "load.base: expected a number >= 0, got -5"),
        ({"base": "lots"}, "load.base: expected a number >= 0, got 'lots'"),
        ({"base": True}, "load.base: expected a number >= 0, got True"),
        ({"base": float("inf")}, "load.base: expected a finite number, got inf"),
        ({"base": 1, "noise": 1.5}, "load.noise: expected a fraction below 1, got 1.5"),
        ({"base": 1, "time_factor": 0}, "load.time_factor: expected a number > 0, got 0"),
        ({"base": 1, "memory_mb": "64"}, "load.memory_mb: expected a number >= 0, got '64'"),
        (
            {"shape": "step", "base": 1, "peak": 2, "at": "soon"},
            "load.at: invalid duration 'soon'",
        ),
        (
            {"shape": "spike", "base": 1, "peak": 2, "duration": 0},
            'load.duration: must be more than 0 for shape "spike"',
        ),
        ({"shape": "trace", "trace": ""}, "load.trace: expected a file path, got ''"),
        (
            {"shape": "trace", "trace": "/no/such/series.csv"},
            "load.trace: cannot read '/no/such/series.csv': No such file or directory",
        ),
    ],
)
def test_bad_configs_are_refused_naming_the_field_and_value(config: Any, problem: str) -> None:
    problems = load_problems(config)
    assert any(p.startswith(problem) for p in problems), problems
    with pytest.raises(ValueError, match="load"):
        parse_load(config)


def test_every_problem_is_listed() -> None:
    assert load_problems({"shape": "step", "base": -1, "noise": 2}) == [
        'load.peak: required by shape "step"',
        "load.base: expected a number >= 0, got -1",
        "load.noise: expected a fraction below 1, got 2",
    ]


# -- noise and the clock factor -------------------------------------------------------------


def test_noise_stays_in_bounds_is_repeatable_and_varies() -> None:
    factors = [noise_factor(0.05, "a1", 1000.0 + i) for i in range(500)]
    assert all(0.95 <= f <= 1.05 for f in factors)
    assert factors == [noise_factor(0.05, "a1", 1000.0 + i) for i in range(500)]
    assert len(set(factors)) > 400  # it is noise, not a constant
    assert noise_factor(0.05, "a2", 1000.0) != noise_factor(0.05, "a1", 1000.0)
    assert noise_factor(0.0, "a1", 1000.0) == 1.0
    mean = sum(factors) / len(factors)
    assert 0.99 < mean < 1.01


def test_time_factor_runs_the_shape_faster_than_real_time() -> None:
    loads = GroupLoads()
    group = ("default", "web", "g")
    fast = parse_load({"shape": "step", "base": 100, "peak": 400, "at": "60s", "time_factor": 10})
    loads.begin(group, "t", "a1", now=5000.0)
    assert loads.simulated_time(fast, group, 5003.0) == 30.0
    assert loads.share(fast, group, "t", "a1", 5005.9) == 100.0
    assert loads.share(fast, group, "t", "a1", 5006.0) == 400.0  # 60 s simulated in 6 s


# -- traces ---------------------------------------------------------------------------------


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_a_nab_trace_replays_from_its_first_timestamp(tmp_path: Path) -> None:
    csv = write(
        tmp_path / "nab.csv",
        "timestamp,value\n"
        "2014-04-01 00:00:00,100\n"
        "2014-04-01 00:05:00,250.5\n"
        "\n"
        "2014-04-01 00:10:00,40\n",
    )
    model = parse_load({"shape": "trace", "trace": csv, "noise": 0.0})
    at = {0: 100, 299: 100, 300: 250.5, 600: 40, 86_400: 40}
    assert {t: model.demand(t) for t in at} == at
    assert model.trace is not None and model.trace.span_s == 600


def test_a_trace_in_seconds_works_too_and_is_parsed_once(tmp_path: Path) -> None:
    csv = write(tmp_path / "s.csv", "1700000000,10\n1700000002,20\n")
    first = load_trace(csv)
    assert load_trace(csv) is first  # cached
    assert [first.value_at(t) for t in (0, 1, 2, 3)] == [10, 10, 20, 20]
    # Rewritten: read again.
    write(tmp_path / "s.csv", "0,1\n5,2\n10,3\n")
    stat = os.stat(csv)
    os.utime(csv, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert len(load_trace(csv)) == 3


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "has no `timestamp,value` points"),
        ("timestamp,value\n", "has no `timestamp,value` points"),
        ("0,1\n1,abc\n", "line 2: value 'abc' is not a number >= 0"),
        ("0,1\n1,-3\n", "line 2: value '-3' is not a number >= 0"),
        ("0,1\nyesterday,3\n", "line 2: timestamp 'yesterday' is neither seconds"),
        ("0,1\n1,2,3\n", "line 2: expected `timestamp,value`"),
        ("5,1\n4,2\n", "line 2: timestamps go back in time"),
    ],
)
def test_bad_traces_are_refused_saying_where(tmp_path: Path, text: str, problem: str) -> None:
    csv = write(tmp_path / "bad.csv", text)
    (found,) = load_problems({"shape": "trace", "trace": csv})
    assert found.startswith(f"load.trace: {csv!r}") and problem in found, found


def test_a_trace_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv = write(tmp_path / "long.csv", "".join(f"{i},1\n" for i in range(11)))
    monkeypatch.setattr("actors.agent.core.load_trace.MAX_TRACE_POINTS", 10)
    with pytest.raises(ValueError, match="more than the 10 points a trace may have"):
        load_trace(csv)
    monkeypatch.setattr("actors.agent.core.load_trace.MAX_TRACE_BYTES", 8)
    with pytest.raises(ValueError, match="more than the 8 a trace may have"):
        load_trace(csv)
    assert MAX_TRACE_POINTS == 1_000_000


# -- the group's demand, shared -------------------------------------------------------------


def test_the_demand_is_shared_by_the_groups_running_allocations() -> None:
    loads = GroupLoads()
    web, api = ("default", "web", "g"), ("default", "api", "g")
    model = parse_load({"base": 400})
    loads.begin(web, "t", "w1", 0.0)
    loads.begin(web, "t", "w2", 1.0)
    loads.begin(api, "t", "x1", 1.0)
    assert [loads.share(model, web, "t", a, 2.0) for a in ("w1", "w2")] == [200.0, 200.0]
    assert loads.share(model, api, "t", "x1", 2.0) == 400.0  # another group: its own demand
    loads.end(web, "t", "w1")
    assert loads.share(model, web, "t", "w2", 3.0) == 400.0
    assert loads.share(model, web, "t", "w1", 3.0) == 0.0  # no longer running
    assert loads.running(web, "t") == 1


def test_the_origin_is_the_groups_first_allocation_on_this_agent() -> None:
    loads = GroupLoads()
    group = ("default", "web", "g")
    step = parse_load({"shape": "step", "base": 100, "peak": 400, "at": "10s"})
    loads.begin(group, "t", "a1", 100.0)
    loads.end(group, "t", "a1")
    loads.begin(group, "t", "a2", 105.0)  # a later allocation does not restart the clock
    assert loads.simulated_time(step, group, 110.0) == 10.0
    assert loads.share(step, group, "t", "a2", 110.0) == 400.0


def test_per_minute_counts_replay_a_minute_each_at_per_unit_mhz(tmp_path: Path) -> None:
    counts = write(tmp_path / "counts.txt", "3\n0\n\n12\n")
    model = parse_load({"shape": "trace", "trace": counts, "per_unit_mhz": 50})
    at = {0: 150, 59: 150, 60: 0, 120: 600, 10_000: 600}
    assert {t: model.demand(t) for t in at} == at
    (bad,) = load_problems({"shape": "trace", "trace": write(tmp_path / "b.txt", "3\nmany\n")})
    assert "line 2: count 'many' is not a number >= 0" in bad


def test_the_azure_functions_per_minute_format_sums_its_rows(tmp_path: Path) -> None:
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(map(str, range(1, 1441)))
    minutes_a = [0] * 1440
    minutes_b = [0] * 1440
    minutes_a[0], minutes_a[1], minutes_b[1] = 4, 1, 2
    rows = [
        "o1,a1,f1,http," + ",".join(map(str, minutes_a)),
        "o1,a1,f2,timer," + ",".join(map(str, minutes_b)),
    ]
    trace = write(tmp_path / "invocations_per_function_md.anon.d01.csv", "\n".join([header, *rows]))
    model = parse_load({"shape": "trace", "trace": trace, "per_unit_mhz": 10})
    assert [model.demand(t) for t in (0, 60, 120, 86_399)] == [40, 30, 0, 0]
    short = write(tmp_path / "short.csv", header + "\no1,a1,f1,http,1,2\n")
    (bad,) = load_problems({"shape": "trace", "trace": short})
    assert "line 2: expected 1444 columns" in bad
