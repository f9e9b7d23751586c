"""`drover experiment run EXP.yaml` and `drover experiment report DIR`: autoscaling-policy
experiments in the simulator (contracts/experiments for the file, actors/experiments for the
runs), no running drover needed.

`run` expands the grid (policies x traces x parameters x seeds), runs it as Ray tasks (a local
Ray of `-parallel` CPUs, or the cluster at `-ray-address`; `-no-ray` runs in this process), and
writes results.csv, results.json and the plots into `-output`; it prints the table (means over
seeds) or, with `-json`, the rows. `report` prints a results folder's table again and redraws
its plots."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from actors.experiments import plots
from actors.experiments import results as results_io
from actors.experiments.core.catalog import validate
from actors.experiments.grid import RunSpec, expand, sweep_columns
from actors.experiments.results import Results, RunRecord
from actors.experiments.runner import (
    Progress,
    check_traces,
    progress_bar,
    run_ray,
    run_sequential,
)
from contracts.errors import ValidationError
from contracts.experiments import ExperimentSpec, load_experiment
from launch.cli.client import CliError
from launch.cli.output import print_json, table

# Runs a grid: (the experiment, its runs in grid order, a progress callback) -> records in
# the same order.
Executor = Callable[[ExperimentSpec, list[RunSpec], Progress], list[RunRecord]]
DEFAULT_OUTPUT = "results"


def _load(path: str) -> ExperimentSpec:
    try:
        spec = load_experiment(path)
        validate(spec.policies, spec.parameter("per_alloc_rps").values[0])
        check_traces(spec)
    except ValidationError as exc:
        raise CliError(f"{path}: {exc}") from None
    return spec


def _executor(args: argparse.Namespace) -> Executor:
    """How the runs run: the simulator, in this process (-no-ray) or as Ray tasks. A live
    mode (replaying the traces through a running drover, `-live`) adds its executor here."""
    if args.no_ray:
        return lambda spec, runs, progress: run_sequential(runs, progress)
    if args.parallel is not None and args.parallel < 1:
        raise CliError(f"-parallel: expected a number of CPUs >= 1, got {args.parallel}")

    def on_ray(spec: ExperimentSpec, runs: list[RunSpec], progress: Progress) -> list[RunRecord]:
        return run_ray(runs, address=args.ray_address, num_cpus=args.parallel, progress=progress)

    return on_ray


def _print(results: Results, as_json: bool, directory: str, files: list[str]) -> None:
    if as_json:
        print_json(
            {
                "Name": results.name,
                "Output": directory,
                "Files": [os.path.basename(f) for f in files],
                "Rows": results_io.rows(results),
            }
        )
        return
    headers, rows = results_io.summary(results)
    print(table(headers, rows))
    names = ", ".join(os.path.basename(f) for f in files)
    print(f"\n{len(results.records)} runs; results in {directory}: {names}")


def run(args: argparse.Namespace) -> int:
    spec = _load(args.file)
    execute = _executor(args)
    runs = expand(spec)
    directory = args.output or os.path.join(DEFAULT_OUTPUT, spec.name)
    with progress_bar(len(runs), spec.name) as progress:
        try:
            records = execute(spec, runs, progress)
        except ValidationError as exc:  # a trace file changed since check_traces read it
            raise CliError(f"{args.file}: {exc}") from None
    results = Results(
        name=spec.name,
        records=tuple(records),
        sweep_columns=tuple(sweep_columns(spec)),
        pareto=spec.pareto,
        description=spec.description,
        experiment=spec.document,
    )
    try:
        files = results_io.write(results, directory)
        files += plots.draw_all(results, directory)
    except OSError as exc:
        raise CliError(f"-output {directory}: {exc.strerror or exc}") from None
    _print(results, args.json, directory, files)
    return 0


def report(args: argparse.Namespace) -> int:
    try:
        results = results_io.read(args.directory)
    except ValidationError as exc:
        raise CliError(str(exc)) from None
    try:
        files = plots.draw_all(results, args.directory)
    except OSError as exc:
        raise CliError(f"{args.directory}: {exc.strerror or exc}") from None
    _print(results, args.json, args.directory, files)
    return 0


def add_parser(commands: Any, flag: Any) -> None:
    sub = commands.add_parser(
        "experiment", help="autoscaling-policy experiments in the simulator"
    ).add_subparsers(dest="experiment_command", required=True)
    p = sub.add_parser("run", help="run an experiment file's grid and write its results")
    p.add_argument("file", help="the experiment file (YAML)")
    flag(p, "-output", default=None, help=f"results folder (default: {DEFAULT_OUTPUT}/<name>)")
    flag(p, "-ray-address", default=None, help="a Ray cluster's address (default: a local Ray)")
    flag(p, "-parallel", type=int, default=None, help="CPUs of the local Ray (default: all)")
    flag(p, "-no-ray", action="store_true", help="run in this process, one run after another")
    flag(p, "-json", action="store_true", help="print the rows as JSON")
    p.set_defaults(handler=run, needs_client=False)
    p = sub.add_parser("report", help="print a results folder's table and redraw its plots")
    p.add_argument("directory", help="the folder `experiment run` wrote")
    flag(p, "-json", action="store_true", help="print the rows as JSON")
    p.set_defaults(handler=report, needs_client=False)
