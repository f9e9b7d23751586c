"""`drover experiment run EXP.yaml` and `drover experiment report DIR`: autoscaling-policy
experiments in the simulator (contracts/experiments for the file, actors/experiments for the
runs), no running drover needed.

`run` expands the grid (policies x traces x parameters x seeds), runs it as Ray tasks (a local
Ray of `-parallel` CPUs, or the cluster at `-ray-address`; `-no-ray` runs in this process), and
writes results.csv, results.json and the plots into `-output`; it prints the table (means over
seeds) or, with `-json`, the rows. `report` prints a results folder's table again and redraws
its plots.

`run -live` replays the experiment's traces through a running drover instead (the one at
`-address`, or one started here on a simulated fleet), time compressed, and writes the live
count trajectories against the simulated ones (launch/live_experiment.py): live.csv,
live.json and live_counts.png."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
from typing import Any

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
from contracts.experiments import ExperimentSpec, LiveSettings, load_experiment
from contracts.experiments.fields import Bad, duration
from launch import live_experiment
from launch.cli.client import CliError
from launch.cli.output import print_json, table

# Runs a grid: (the experiment, its runs in grid order, a progress callback) -> records in
# the same order.
Executor = Callable[[ExperimentSpec, list[RunSpec], Progress], list[RunRecord]]
DEFAULT_OUTPUT = "results"


def _plots() -> ModuleType:
    """The plotting module, imported when a command draws: it loads matplotlib, which every
    other `drover` command (and a program importing `launch.cli`) need not pay for."""
    from actors.experiments import plots

    return plots


def _load(path: str) -> ExperimentSpec:
    try:
        spec = load_experiment(path)
        validate(spec.policies, spec.parameter("per_alloc_rps").values[0])
        check_traces(spec)
    except ValidationError as exc:
        raise CliError(f"{path}: {exc}") from None
    return spec


def _executor(args: argparse.Namespace) -> Executor:
    """How the simulated runs run: in this process (-no-ray) or as Ray tasks. (`-live`
    replays through a running drover instead: run_live.)"""
    if args.no_ray:
        return lambda spec, runs, progress: run_sequential(runs, progress)
    if args.parallel is not None and args.parallel < 1:
        raise CliError(f"-parallel: expected a number of CPUs >= 1, got {args.parallel}")

    def on_ray(spec: ExperimentSpec, runs: list[RunSpec], progress: Progress) -> list[RunRecord]:
        return run_ray(runs, address=args.ray_address, num_cpus=args.parallel, progress=progress)

    return on_ray


def _live_settings(args: argparse.Namespace, spec: ExperimentSpec) -> LiveSettings:
    live = spec.live
    if args.time_factor is not None:
        if not args.time_factor > 0:
            raise CliError(f"-time-factor: expected a number > 0, got {args.time_factor}")
        live = replace(live, time_factor=args.time_factor)
    if args.until is not None:
        try:
            live = replace(live, until_s=duration(positive=True)(args.until))
        except Bad as exc:
            raise CliError(f"-until: {exc}") from None
    return live


def _print_live(doc: dict[str, Any], as_json: bool, directory: str, files: list[str]) -> None:
    if as_json:
        print_json({**doc, "Output": directory, "Files": [os.path.basename(f) for f in files]})
        return
    headers, rows = live_experiment.summary(doc)
    print(table(headers, rows))
    for reason in doc["skipped"]:
        print(f"skipped {reason}")
    names = ", ".join(os.path.basename(f) for f in files)
    print(f"\n{len(doc['rows'])} live replays; results in {directory}: {names}")


def run_live(args: argparse.Namespace, spec: ExperimentSpec) -> int:
    try:
        plan = live_experiment.plan(spec, _live_settings(args, spec))
    except ValidationError as exc:
        raise CliError(f"{args.file}: {exc}") from None
    directory = args.output or os.path.join(DEFAULT_OUTPUT, spec.name)
    address = args.address or os.environ.get("DROVER_ADDR")
    where = address or "a drover started here"
    print(
        f"live: {len(plan.replays)} replays on {where}, about {plan.real_seconds:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    with progress_bar(len(plan.replays), f"{spec.name} (live)", enabled=not args.json) as bar:
        done: dict[str, float] = {}

        def progress(name: str, fraction: float) -> None:
            if fraction >= 1.0 and name not in done:
                done[name] = fraction
                bar(1)

        results = live_experiment.run(plan, address=address, token=args.token, progress=progress)
    doc = live_experiment.document(spec, plan, results)
    try:
        files = live_experiment.write(doc, directory)
        files += _plots().draw_live(doc, directory)
    except OSError as exc:
        raise CliError(f"-output {directory}: {exc.strerror or exc}") from None
    _print_live(doc, args.json, directory, files)
    return 0


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
    if args.live:
        return run_live(args, spec)
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
        files += _plots().draw_all(results, directory)
    except OSError as exc:
        raise CliError(f"-output {directory}: {exc.strerror or exc}") from None
    _print(results, args.json, directory, files)
    return 0


def report(args: argparse.Namespace) -> int:
    """The simulated results' table and plots, then the live replays' (whichever the folder
    holds; at least one)."""
    try:
        live = live_experiment.read(args.directory)
        has_sim = live is None or os.path.exists(os.path.join(args.directory, "results.json"))
        results = results_io.read(args.directory) if has_sim else None
    except ValidationError as exc:
        raise CliError(str(exc)) from None
    try:
        if results is not None:
            _print(results, args.json, args.directory, _plots().draw_all(results, args.directory))
        if live is not None:
            files = _plots().draw_live(live, args.directory)
            _print_live(live, args.json, args.directory, files)
    except OSError as exc:
        raise CliError(f"{args.directory}: {exc.strerror or exc}") from None
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
    flag(
        p,
        "-live",
        action="store_true",
        help="replay through a running drover (-address, default: one started here)",
    )
    flag(p, "-time-factor", type=float, default=None, help="-live: simulated s per real s")
    flag(p, "-until", default=None, help="-live: replay this much of each trace (e.g. 15m)")
    p.set_defaults(handler=run, needs_client=False)
    p = sub.add_parser("report", help="print a results folder's table and redraw its plots")
    p.add_argument("directory", help="the folder `experiment run` wrote")
    flag(p, "-json", action="store_true", help="print the rows as JSON")
    p.set_defaults(handler=report, needs_client=False)
