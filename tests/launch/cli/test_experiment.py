"""`drover experiment run|report`: the synthetic example run in process (results.csv and .json,
PNG plots, the table), a local Ray run, `-json`, `report` printing the same table, one-line
errors naming the field with a non-zero exit, and every example in examples/experiments parsing
(the ones on the shared traces need ../shared/data/traces)."""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import ray
import yaml

from actors.experiments.core.catalog import validate
from bench.shared import shared_traces
from contracts.experiments import load_experiment, parse_experiment

Cli = Callable[..., tuple[int, str, str]]
ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "experiments"
SYNTHETIC = EXAMPLES / "synthetic-shapes.yaml"
PNG = b"\x89PNG\r\n\x1a\n"
SHARED = shared_traces() if shared_traces().is_dir() else None

TINY = """
name: tiny
traces:
  - {name: step, synthetic: step, base: 5, peak: 30, at_s: 5m, duration_s: 20m}
policies:
  - {name: tv, kind: target-value, cooldown: 1m}
  - {name: ka, kind: keep-alive, keep_alive: 2m}
parameters: {per_alloc_rps: 10, start_delay_s: [0, 20]}
seeds: 2
"""


def table_of(out: str) -> str:
    """The table part of `run`'s or `report`'s output (without the closing line)."""
    return out.split("\n\n")[0]


def test_run_the_synthetic_example_then_report(cli: Cli, tmp_path: Path) -> None:
    output = tmp_path / "results"
    code, out, err = cli("experiment", "run", str(SYNTHETIC), "-output", str(output), "-no-ray")
    assert code == 0, err
    names = sorted(p.name for p in output.iterdir())
    assert names == [
        "demand_capacity_diurnal.png",
        "demand_capacity_spike.png",
        "demand_capacity_step.png",
        "pareto.png",
        "results.csv",
        "results.json",
    ]
    assert all((output / n).read_bytes()[:8] == PNG for n in names if n.endswith(".png"))
    with open(output / "results.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 60  # 3 traces x 5 policy variants x 2 start delays x 2 seeds
    assert {r["policy"] for r in rows} == {"target-value", "threshold", "hpa", "dstack"}
    assert {r["scale_up_delay"] for r in rows} == {"", "0", "5m"}
    assert float(rows[0]["allocation_hours"]) > 0
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["Trace", "Policy", "start_delay_s", "scale_up_delay", "Runs"]
    assert lines[1].split()[:5] == ["step", "target-value", "0", "-", "2"]
    assert out.rstrip().endswith("pareto.png")
    (output / "pareto.png").unlink()
    code, again, err = cli("experiment", "report", str(output))
    assert code == 0, err
    assert table_of(again) == table_of(out)
    assert (output / "pareto.png").read_bytes()[:8] == PNG  # redrawn


def test_run_on_a_local_ray_with_json(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    if ray.is_initialized():  # the command starts its own local Ray
        ray.shutdown()
    code, out, err = cli(
        "experiment", "run", str(path), "-output", str(tmp_path / "out"), "-parallel", "2", "-json"
    )
    assert code == 0, err
    assert not ray.is_initialized()  # the Ray it started is gone
    doc = orjson.loads(out)
    assert doc["Name"] == "tiny" and len(doc["Rows"]) == 8
    assert doc["Files"] == ["results.csv", "results.json", "demand_capacity_step.png", "pareto.png"]
    code, sequential, err = cli(
        "experiment", "run", str(path), "-output", str(tmp_path / "seq"), "-no-ray", "-json"
    )
    assert code == 0, err
    assert orjson.loads(sequential)["Rows"] == doc["Rows"]
    assert (tmp_path / "out" / "results.csv").read_bytes() == (
        tmp_path / "seq" / "results.csv"
    ).read_bytes()


def test_a_bad_file_is_one_line_naming_the_field(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TINY.replace("kind: keep-alive", "kind: keepalive"))
    code, out, err = cli("experiment", "run", str(path), "-no-ray")
    assert code == 1 and out == ""
    assert err == (
        f"drover: {path}: policies[1].kind: 'keepalive' is not one of target-value, threshold,"
        " hpa, dstack, keep-alive, hybrid-histogram, nomad, policy-file, python\n"
    )
    path.write_text(TINY + "seeds: [1, 2\n")
    code, _, err = cli("experiment", "run", str(path), "-no-ray")
    assert code == 1 and err.count("\n") == 1 and err.startswith(f"drover: {path}: not YAML: ")
    code, _, err = cli("experiment", "run", str(tmp_path / "none.yaml"), "-no-ray")
    assert code == 1 and err.startswith(f"drover: {tmp_path}/none.yaml: cannot read")
    (tmp_path / "load.csv").write_text("timestamp,value\n0,1\n60,lots\n")
    path.write_text(
        TINY.replace(
            "{name: step, synthetic: step, base: 5, peak: 30, at_s: 5m, duration_s: 20m}",
            "{name: load, file: load.csv}",
        )
    )
    code, _, err = cli("experiment", "run", str(path), "-no-ray")
    assert (code, err) == (
        1,
        f"drover: {path}: traces[0] (load): '{tmp_path}/load.csv' line 3: value 'lots' is not a"
        " number >= 0\n",
    )
    path.write_text(TINY)
    code, _, err = cli("experiment", "run", str(path), "-parallel", "0")
    assert (code, err) == (1, "drover: -parallel: expected a number of CPUs >= 1, got 0\n")
    code, _, err = cli("experiment", "report", str(tmp_path))
    assert (code, err) == (1, f"drover: no results.json in {tmp_path}: run the experiment first\n")


def test_every_example_parses() -> None:
    """The examples on the shared traces need ../shared/data/traces (see its SOURCES.md)."""
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert len(files) >= 3
    synthetic = load_experiment(str(SYNTHETIC))
    validate(synthetic.policies, 10)
    if SHARED is None:
        message = "the shared traces are missing: ../shared/data/traces beside the checkout"
        if os.environ.get("CI") == "true":  # the repo's rule: CI runs what the README promises
            pytest.fail(message)
        pytest.skip(message)
    for path in files:
        # The files reach the traces as ../shared beside the checkout; wherever this clone
        # is, read them from the folder found.
        text = path.read_text().replace("../../../shared/data/traces", str(SHARED))
        spec = parse_experiment(yaml.safe_load(text), base_dir=str(EXAMPLES), path=str(path))
        validate(spec.policies, spec.parameter("per_alloc_rps").values[0])
        assert spec.runs <= 100, f"{path.name}: keep the examples quick"


LIVE = """
name: live-step
traces:
  - {name: step, synthetic: step, base: 10, peak: 40, at_s: 200, duration_s: 1h}
policies:
  - {name: tv, kind: target-value, target: 70, cooldown: 1m}
  - {name: ka, kind: keep-alive, keep_alive: 2m}
parameters: {per_alloc_rps: 10, start_count: 2}
live: {time_factor: 30, until_s: 1h}
"""


def test_run_live_through_a_drover_started_for_it_then_report(cli: Cli, tmp_path: Path) -> None:
    """`-live` replays the step (10 -> 40 requests/s at 200 s) through a drover it starts:
    10 simulated minutes (`-until`) at 60x (`-time-factor`, over the file's 30x)."""
    path = tmp_path / "live.yaml"
    path.write_text(LIVE)
    output = tmp_path / "out"
    code, out, err = cli(
        "experiment", "run", "-live", str(path), "-output", str(output),
        "-time-factor", "60", "-until", "10m",
    )  # fmt: skip
    assert code == 0, err
    assert "live: 1 replays on a drover started here, about 10 s" in err
    assert sorted(p.name for p in output.iterdir()) == ["live.csv", "live.json", "live_counts.png"]
    doc = orjson.loads((output / "live.json").read_bytes())
    (row,) = doc["rows"]
    assert row["replay"] == "step/tv" and row["time_factor"] == 60 and row["until_s"] == 600
    # 10 rps on 2 allocations holds; 40 rps -> ceil(2 * (200 / 70)) = 6
    assert [c for _, c in row["simulated"]] == [2, 6]
    assert [c for _, c in row["live"]] == [2, 6], row["live"]
    assert row["time_share_differing"] < 0.2 and abs(row["allocation_hours_error"]) < 0.15
    assert doc["skipped"] == ["step/ka: a keep-alive policy runs in the simulator only"]
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["Replay", "Mean", "|count"]
    assert lines[1].startswith("step/tv ")
    assert "skipped step/ka: a keep-alive policy runs in the simulator only" in lines
    (output / "live_counts.png").unlink()
    code, again, err = cli("experiment", "report", str(output))
    assert code == 0, err
    assert table_of(again) == table_of(out)  # a folder of live results only: their table
    assert again.rstrip().endswith("live_counts.png")
    assert (output / "live_counts.png").read_bytes()[:8] == PNG


def test_live_refuses_what_it_cannot_replay(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "live.yaml"
    path.write_text(
        LIVE.replace("  - {name: tv, kind: target-value, target: 70, cooldown: 1m}\n", "")
    )
    code, out, err = cli("experiment", "run", "-live", str(path))
    assert code == 1 and out == ""
    assert err == (
        f"drover: {path}: no policy of this experiment can be replayed live"
        " (step/ka: a keep-alive policy runs in the simulator only)\n"
    )
    path.write_text(LIVE)
    code, _, err = cli("experiment", "run", "-live", str(path), "-time-factor", "0.5")
    assert code == 1 and "would take 7200 s of real time, more than live.max_real_s" in err
    code, _, err = cli("experiment", "run", "-live", str(path), "-until", "soon")
    assert code == 1 and err.startswith("drover: -until: expected seconds or a duration")
