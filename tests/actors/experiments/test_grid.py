"""An experiment's grid and its runs: expansion in the file's order, traces turned into demand
(windows, scales, counts, request logs), trajectories downsampled by time-weighted means,
results written and read back, the Pareto front, and determinism: the same experiment gives
the same CSV bytes, in this process or as Ray tasks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from actors.experiments import plots
from actors.experiments import results as results_io
from actors.experiments.core.capacity import Segment
from actors.experiments.grid import expand, sweep_columns, trajectory_points
from actors.experiments.results import Results
from actors.experiments.runner import chunks, downsample, run_ray, run_sequential
from actors.experiments.traces import demand_for, trace_points
from contracts.experiments import ExperimentSpec, parse_experiment

ROOT = str(Path(__file__).resolve().parents[3])


def experiment(**extra: Any) -> ExperimentSpec:
    doc: dict[str, Any] = {
        "name": "grid",
        "traces": [
            {
                "name": "spike",
                "synthetic": "spike",
                "base": 10,
                "peak": 60,
                "at_s": "20m",
                "width_s": "10m",
                "duration_s": "1h",
                "noise": 0.2,
            },
            {"name": "step", "synthetic": "step", "base": 5, "peak": 30, "at_s": 600,
             "duration_s": 1800},
        ],
        "policies": [
            {"name": "tv", "kind": "target-value", "cooldown": "1m", "sweep": {"target": [60, 80]}},
            {"name": "ds", "kind": "dstack", "target": 7},
            {"name": "ka", "kind": "keep-alive", "keep_alive": "5m"},
        ],
        "parameters": {"start_delay_s": [0, 30], "per_alloc_rps": 10},
        "seeds": 2,
    }  # fmt: skip
    doc.update(extra)
    return parse_experiment(doc)


def results_of(spec: ExperimentSpec, records: list[Any]) -> Results:
    return Results(
        name=spec.name,
        records=tuple(records),
        sweep_columns=tuple(sweep_columns(spec)),
        pareto=spec.pareto,
        experiment=spec.document,
    )


def test_the_grid_in_the_files_order() -> None:
    spec = experiment()
    runs = expand(spec)
    assert len(runs) == spec.runs == 2 * (2 + 1 + 1) * 2 * 2
    assert [r.index for r in runs] == list(range(len(runs)))
    first = [(r.trace.name, r.policy.name, r.sweep, r.start_delay_s, r.seed) for r in runs[:6]]
    assert first == [
        ("spike", "tv", (("target", "60"),), 0, 0),
        ("spike", "tv", (("target", "60"),), 0, 1),
        ("spike", "tv", (("target", "60"),), 30, 0),
        ("spike", "tv", (("target", "60"),), 30, 1),
        ("spike", "tv", (("target", "80"),), 0, 0),
        ("spike", "tv", (("target", "80"),), 0, 1),
    ]
    assert runs[-1].trace.name == "step" and runs[-1].policy.name == "ka"
    assert runs[0].parameters == (
        ("start_delay_s", "0"),
        ("per_alloc_rps", "10"),
        ("start_count", "min"),
    )
    assert sweep_columns(spec) == ["target"]
    assert [len(c) for c in chunks(runs, 2)] == [2] * 16


def test_trajectories_are_bounded() -> None:
    assert trajectory_points(10) == 2000 and trajectory_points(10_000) == 100
    assert trajectory_points(10**9) == 50


def test_downsampling_keeps_time_weighted_means() -> None:
    segments = [
        Segment(0, 30, 10, 20, 2, 2),
        Segment(30, 90, 40, 40, 4, 5),
        Segment(90, 120, 0, 0, 0, 0),
    ]
    trajectory = downsample(segments, 120, 2)
    assert trajectory.times == (0, 60)
    assert trajectory.demand == (25, 20)  # (10 x 30 + 40 x 30) / 60, (40 x 30 + 0) / 60
    assert trajectory.capacity == (30, 20)
    assert trajectory.count == (3.5, 2.5)
    assert len(downsample(segments, 120, 2000).times) == 120  # buckets of at least a second


def test_series_files_windows_and_scales(tmp_path: Path) -> None:
    path = tmp_path / "elb.csv"
    path.write_text("timestamp,value\n0,300\n300,600\n300,900\n600,0\n900,150\n")
    doc: dict[str, Any] = {"name": "nab", "file": str(path), "values": "count"}
    spec = experiment(traces=[doc])
    points = trace_points(spec.traces[0], 0)
    # counts per 5 minutes -> requests/s; the later of two points at 300 s holds
    assert points.times == (0, 300, 600, 900) and points.values == (1, 3, 0, 0.5)
    assert points.span_s == 1200
    spec = experiment(
        traces=[
            {
                **doc,
                "window": {"start_s": 450, "duration_s": 600},
                "time_scale": 0.5,
                "value_scale": 2,
            }
        ]
    )
    points = trace_points(spec.traces[0], 0)
    assert points.times == (0, 75, 225) and points.values == (6, 0, 1) and points.span_s == 300


def test_request_logs_become_requests_per_second(tmp_path: Path) -> None:
    path = tmp_path / "req.csv"
    path.write_text(
        "TIMESTAMP,x\n" + "".join(f"2024-01-01 00:00:{s:02d},1\n" for s in (0, 1, 2, 25))
    )
    spec = experiment(
        traces=[{"name": "r", "requests": str(path), "preset": "azure-llm", "bucket_s": 10}]
    )
    points = trace_points(spec.traces[0], 0)
    assert points.times == (0, 10, 20) and points.values == (0.3, 0, 0.1) and points.span_s == 30


def test_synthetic_noise_follows_the_runs_seed() -> None:
    spike = experiment().traces[0]
    assert trace_points(spike, 1) == trace_points(spike, 1) != trace_points(spike, 2)
    assert demand_for(spike, 1) is demand_for(spike, 1)  # loaded once per process


def test_the_same_experiment_gives_the_same_bytes(tmp_path: Path) -> None:
    spec = experiment()
    first = results_of(spec, run_sequential(expand(spec)))
    second = results_of(experiment(), run_sequential(expand(experiment())))
    assert results_io.csv_text(first) == results_io.csv_text(second)
    results_io.write(first, str(tmp_path / "a"))
    results_io.write(second, str(tmp_path / "b"))
    for name in ("results.csv", "results.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    seeds = {r.seed: r.metrics["requests"] for r in first.records[:2]}
    assert seeds[0] != seeds[1]  # the noise differs between seeds


def test_results_are_read_back(tmp_path: Path) -> None:
    spec = experiment(cost={"metric": "idle-memory", "memory_mb": 2048}, slo="cold-start-share")
    results = results_of(spec, run_sequential(expand(spec)))
    results_io.write(results, str(tmp_path))
    again = results_io.read(str(tmp_path))
    assert results_io.csv_text(again) == results_io.csv_text(results)
    assert again.pareto == results.pareto and again.records == results.records
    headers, rows = results_io.summary(again)
    assert headers[:5] == ["Trace", "Policy", "start_delay_s", "target", "Runs"]
    assert headers[-2:] == ["Idle-GBh", "Cold-%"]
    assert rows[0][:5] == ["spike", "tv", "0", "60", "2"] and len(rows) == len(results.records) // 2
    keep_alive = [r for r in results.records if r.policy == "ka"]
    assert keep_alive
    assert all(
        r.metrics["idle_memory_gb_hours"]
        == pytest.approx(r.metrics["idle_allocation_hours"] * 2, rel=1e-5)
        for r in keep_alive
    )
    paths = plots.draw_all(again, str(tmp_path))
    assert [Path(p).name for p in paths] == [
        "demand_capacity_spike.png",
        "demand_capacity_step.png",
        "pareto.png",
    ]
    assert all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_the_pareto_front_minimises_both() -> None:
    points = [(3, 1), (1, 5), (2, 2), (2, 4), (4, 0), (5, 0), (1, 6)]
    assert plots.front(points) == [(1, 5), (2, 2), (3, 1), (4, 0)]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    # A node of known size: any Ray left running by another module goes.
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": ROOT}},
    )
    yield
    ray.shutdown()


def test_ray_tasks_give_the_sequential_rows(local_ray: None) -> None:
    spec = experiment()
    runs = expand(spec)
    ticks: list[int] = []
    on_ray = run_ray(runs, progress=ticks.append)
    assert sum(ticks) == len(runs) and ray.is_initialized()  # a running Ray is left running
    sequential = run_sequential(runs)
    assert results_io.csv_text(results_of(spec, on_ray)) == results_io.csv_text(
        results_of(spec, sequential)
    )
    assert [r.trajectory for r in on_ray] == [r.trajectory for r in sequential]


STEP = {"name": "step", "synthetic": "step", "base": 5, "peak": 30, "at_s": 600, "duration_s": 1800}


def test_sampled_start_delays_and_a_queue_through_the_runner(tmp_path: Path) -> None:
    """A named start-delay distribution is drawn per start with the run's seed; with `queue:`
    the excess waits (late requests are the violations) and the rows carry the waits."""
    (tmp_path / "loads.csv").write_text("value\n90000\n120000\n")  # ms
    doc: dict[str, Any] = {
        "name": "queued",
        "traces": [
            {
                "name": "step",
                "synthetic": "step",
                "base": 5,
                "peak": 30,
                "at_s": 600,
                "duration_s": 1800,
            },
        ],
        "policies": [{"name": "tv", "kind": "target-value", "cooldown": "1m"}],
        "start_delays": {"load": {"file": "loads.csv", "unit": "ms"}},
        "parameters": {"start_delay_s": [40, "load"], "per_alloc_rps": 10},
    }
    lost = parse_experiment(doc, base_dir=str(tmp_path))
    fixed, sampled = run_sequential(expand(lost))
    assert sampled.parameters[0] == ("start_delay_s", "load")
    # 40 s starts leave the step unserved for 40 s; 90 or 120 s starts for 90 s at least
    assert fixed.metrics["slo_violation_min"] == pytest.approx(40 / 60)
    assert sampled.metrics["slo_violation_min"] >= 90 / 60
    assert "mean_wait_s" not in fixed.metrics
    queued_spec = parse_experiment({**doc, "queue": {"slo_wait_s": 5}}, base_dir=str(tmp_path))
    queued, _ = run_sequential(expand(queued_spec))
    assert queued.metrics["mean_wait_s"] > 0 and queued.metrics["max_backlog"] > 0
    assert queued.metrics["violated_requests"] > 0
    assert queued.metrics["requests"] == fixed.metrics["requests"]
    patient = parse_experiment({**doc, "queue": {"slo_wait_s": "1h"}}, base_dir=str(tmp_path))
    waited, _ = run_sequential(expand(patient))
    # the same queue, the same waits; none waits an hour
    assert waited.metrics["mean_wait_s"] == queued.metrics["mean_wait_s"]
    assert waited.metrics["violated_requests"] == 0 and waited.metrics["slo_violation_min"] == 0
    results = results_of(queued_spec, [queued])
    assert results.columns[-2:] == ["mean_wait_s", "max_backlog"]
    results_io.write(results, str(tmp_path / "out"))
    back = results_io.read(str(tmp_path / "out"))
    assert back.records[0].metrics == queued.metrics
    headers, _ = results_io.summary(back)
    assert headers[-1] == "Wait-s"


def test_a_cluster_of_nodes_through_the_runner() -> None:
    """With `cluster:`, allocations wait for nodes (provisioning) and the fleet limit blocks
    them: the step's violations grow, and the rows carry node-hours and blocked hours."""
    doc: dict[str, Any] = {
        "name": "nodes",
        "traces": [STEP],
        "policies": [{"name": "tv", "kind": "target-value", "cooldown": "1m"}],
        "parameters": {"per_alloc_rps": 10},
    }
    (free,) = run_sequential(expand(parse_experiment(doc)))
    cluster = {"allocs_per_node": 2, "max_nodes": 2, "node_delay_s": "2m"}
    spec = parse_experiment({**doc, "cluster": cluster, "cost": "node-hours"})
    (pooled,) = run_sequential(expand(spec))
    m = pooled.metrics
    assert m["peak_nodes"] == 2 and m["node_hours"] > 0
    # 30 rps at 70 % asks for 5 allocations; 2 nodes of 2 hold 4: one is blocked
    assert m["blocked_allocation_hours"] > 0
    assert m["slo_violation_min"] > free.metrics["slo_violation_min"]
    results = results_of(spec, [pooled])
    assert results.columns[-3:] == ["node_hours", "peak_nodes", "blocked_allocation_hours"]
    headers, _ = results_io.summary(results)
    assert headers[-2:] == ["Node-h", "Blocked-h"]


def test_placement_by_the_real_scheduler_makes_fragmentation_real() -> None:
    """The same step on three nodes: counted in slots (2 a node) all 5 allocations would fit
    in 6 slots; placed by drover's scheduler, 1300 MHz asks on nodes with 2500 MHz free after
    their load hold only one each, so the fleet limit blocks two of them."""
    doc: dict[str, Any] = {
        "name": "core",
        "traces": [STEP],
        "policies": [{"name": "tv", "kind": "target-value", "cooldown": "1m"}],
        "parameters": {"per_alloc_rps": 10},
    }
    limits = {"initial_nodes": 1, "max_nodes": 3}
    slots = parse_experiment({**doc, "cluster": {**limits, "allocs_per_node": 2}})
    core = parse_experiment(
        {
            **doc,
            "cluster": {
                **limits,
                "placement": "core",
                "ask_cpu": 1300,
                "shapes": [{"cpu_mhz": 4000, "load_cpu": 1500}],
            },
        }
    )
    (counted,) = run_sequential(expand(slots))
    (placed,) = run_sequential(expand(core))
    assert counted.metrics["blocked_allocation_hours"] == 0
    assert placed.metrics["blocked_allocation_hours"] > 0
    # three ready allocations serve the 30 requests/s exactly, without the policy's headroom
    assert placed.metrics["theta_o"] < counted.metrics["theta_o"]
    assert placed.metrics["peak_nodes"] == counted.metrics["peak_nodes"] == 3
