"""An experiment's results: one record per run (its grid point, metrics and a downsampled
trajectory), written as `results.csv` (one row per run) and `results.json` (the experiment
as loaded, the rows and the trajectories), read back by `drover experiment report`, and the
table printed at the end (means over seeds).

Numbers are kept to 6 significant digits and written in the grid's order, so that the same
experiment gives the same bytes."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts.errors import ValidationError
from contracts.experiments import RUN_PARAMETERS, Pareto

CSV_NAME = "results.csv"
JSON_NAME = "results.json"
FORMAT_VERSION = 1

METRICS = (
    "theta_u",
    "theta_o",
    "tau_u",
    "tau_o",
    "slack",
    "slo_violation_min",
    "violated_requests",
    "requests",
    "cold_starts",
    "cold_start_share",
    "allocation_hours",
    "idle_allocation_hours",
    "idle_memory_gb_hours",
    "scaling_actions",
    "reversals",
)
# Metrics of runs with a `queue:` or a `cluster:` only (every run of such an experiment has
# them).
QUEUE_METRICS = ("mean_wait_s", "max_backlog")
CLUSTER_METRICS = ("node_hours", "peak_nodes", "blocked_allocation_hours")
OPTIONAL_METRICS = (*CLUSTER_METRICS, *QUEUE_METRICS)
COST_COLUMN = {
    "allocation-hours": "allocation_hours",
    "idle-memory": "idle_memory_gb_hours",
    "node-hours": "node_hours",
}
SLO_COLUMN = {
    "violation-minutes": "slo_violation_min",
    "cold-start-share": "cold_start_share",
    "violated-requests": "violated_requests",
}


def rounded(value: float) -> float:
    return float(f"{value:.6g}")


@dataclass(frozen=True, slots=True)
class Trajectory:
    """Time-weighted means over equal buckets: demand and capacity (requests/s) and the
    allocations asked for, from each bucket's start time."""

    times: tuple[float, ...] = ()
    demand: tuple[float, ...] = ()
    capacity: tuple[float, ...] = ()
    count: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class RunRecord:
    index: int
    trace: str
    policy: str
    kind: str
    seed: int
    parameters: tuple[tuple[str, str], ...]
    sweep: tuple[tuple[str, str], ...]
    metrics: Mapping[str, float]
    trajectory: Trajectory = field(default_factory=Trajectory)

    def labels(self) -> dict[str, str]:
        return {**dict(self.parameters), **dict(self.sweep)}


@dataclass(frozen=True, slots=True)
class Results:
    name: str
    records: tuple[RunRecord, ...]
    sweep_columns: tuple[str, ...] = ()
    pareto: Pareto = field(default_factory=Pareto)
    description: str = ""
    experiment: Mapping[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return [
            "run",
            "trace",
            "policy",
            "kind",
            *RUN_PARAMETERS,
            *self.sweep_columns,
            "seed",
            *METRICS,
            *(m for m in OPTIONAL_METRICS if self.records and m in self.records[0].metrics),
        ]


def _row(record: RunRecord, columns: Sequence[str]) -> dict[str, Any]:
    labels = record.labels()
    fixed: dict[str, Any] = {
        "run": record.index,
        "trace": record.trace,
        "policy": record.policy,
        "kind": record.kind,
        "seed": record.seed,
    }
    row: dict[str, Any] = {}
    for column in columns:
        if column in fixed:
            row[column] = fixed[column]
        elif column in record.metrics:
            row[column] = record.metrics[column]
        else:
            row[column] = labels.get(column, "")
    return row


def rows(results: Results) -> list[dict[str, Any]]:
    return [_row(r, results.columns) for r in results.records]


def _text(value: Any) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def csv_text(results: Results) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(results.columns)
    for row in rows(results):
        writer.writerow([_text(v) for v in row.values()])
    return out.getvalue()


def to_json(results: Results) -> dict[str, Any]:
    return {
        "format": FORMAT_VERSION,
        "name": results.name,
        "description": results.description,
        "experiment": results.experiment,
        "pareto": {
            "cost": results.pareto.cost,
            "memory_mb": results.pareto.memory_mb,
            "slo": results.pareto.slo,
        },
        "sweep_columns": list(results.sweep_columns),
        "columns": results.columns,
        "rows": rows(results),
        "trajectories": [
            {
                "run": r.index,
                "times": list(r.trajectory.times),
                "demand": list(r.trajectory.demand),
                "capacity": list(r.trajectory.capacity),
                "count": list(r.trajectory.count),
            }
            for r in results.records
        ],
    }


def write(results: Results, directory: str) -> list[str]:
    """results.csv and results.json in `directory` (made if missing); their paths."""
    os.makedirs(directory, exist_ok=True)
    csv_path = os.path.join(directory, CSV_NAME)
    json_path = os.path.join(directory, JSON_NAME)
    with open(csv_path, "w", encoding="utf-8", newline="") as file:
        file.write(csv_text(results))
    with open(json_path, "w", encoding="utf-8") as file:
        json.dump(to_json(results), file, separators=(",", ":"), allow_nan=False)
        file.write("\n")
    return [csv_path, json_path]


def read(directory: str) -> Results:
    """The results a run wrote into `directory`; ValidationError when there are none."""
    path = os.path.join(directory, JSON_NAME)
    try:
        with open(path, encoding="utf-8") as file:
            doc = json.load(file)
    except FileNotFoundError:
        raise ValidationError(f"no {JSON_NAME} in {directory}: run the experiment first") from None
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}") from None
    try:
        return _from_json(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(f"{path}: not a results file of drover experiment: {exc}") from None


def _from_json(doc: Mapping[str, Any]) -> Results:
    if doc["format"] != FORMAT_VERSION:
        raise ValueError(f"format {doc['format']!r}, expected {FORMAT_VERSION}")
    sweep_columns = tuple(str(c) for c in doc["sweep_columns"])
    trajectories = {
        int(t["run"]): Trajectory(
            times=tuple(t["times"]),
            demand=tuple(t["demand"]),
            capacity=tuple(t["capacity"]),
            count=tuple(t["count"]),
        )
        for t in doc["trajectories"]
    }
    records = []
    for row in doc["rows"]:
        index = int(row["run"])
        records.append(
            RunRecord(
                index=index,
                trace=str(row["trace"]),
                policy=str(row["policy"]),
                kind=str(row["kind"]),
                seed=int(row["seed"]),
                parameters=tuple((p, str(row[p])) for p in RUN_PARAMETERS),
                sweep=tuple((c, str(row[c])) for c in sweep_columns if row.get(c, "") != ""),
                metrics={m: row[m] for m in (*METRICS, *OPTIONAL_METRICS) if m in row},
                trajectory=trajectories.get(index, Trajectory()),
            )
        )
    pareto = doc["pareto"]
    return Results(
        name=str(doc["name"]),
        records=tuple(records),
        sweep_columns=sweep_columns,
        pareto=Pareto(cost=pareto["cost"], memory_mb=float(pareto["memory_mb"]), slo=pareto["slo"]),
        description=str(doc.get("description", "")),
        experiment=doc.get("experiment", {}),
    )


# -- the table --------------------------------------------------------------------------------

_SHOWN = (
    ("θU", "theta_u", "{:.3f}"),
    ("θO", "theta_o", "{:.3f}"),
    ("τU", "tau_u", "{:.3f}"),
    ("τO", "tau_o", "{:.3f}"),
    ("Slack", "slack", "{:.2f}"),
    ("Viol-min", "slo_violation_min", "{:.1f}"),
    ("Cold", "cold_starts", "{:.1f}"),
    ("Alloc-h", "allocation_hours", "{:.2f}"),
    ("Actions", "scaling_actions", "{:.1f}"),
    ("Reversals", "reversals", "{:.1f}"),
)


def summary(results: Results) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one row per grid point but the seed, metrics averaged over seeds;
    only the run parameters that vary get a column."""
    varying = [
        p for p in RUN_PARAMETERS if len({dict(r.parameters)[p] for r in results.records}) > 1
    ]
    shown = list(_SHOWN)
    if results.pareto.cost == "idle-memory":
        shown.append(("Idle-GBh", "idle_memory_gb_hours", "{:.2f}"))
    if results.pareto.slo == "cold-start-share":
        shown.append(("Cold-%", "cold_start_share", "{:.2%}"))
    if results.records and "node_hours" in results.records[0].metrics:
        shown.append(("Node-h", "node_hours", "{:.2f}"))
        shown.append(("Blocked-h", "blocked_allocation_hours", "{:.2f}"))
    if results.records and "mean_wait_s" in results.records[0].metrics:
        shown.append(("Wait-s", "mean_wait_s", "{:.3f}"))
    groups: dict[tuple[str, ...], list[RunRecord]] = {}
    for record in results.records:
        labels = record.labels()
        key = (
            record.trace,
            record.policy,
            *(labels.get(p, "") for p in varying),
            *(labels.get(c, "") for c in results.sweep_columns),
        )
        groups.setdefault(key, []).append(record)
    headers = ["Trace", "Policy", *varying, *results.sweep_columns, "Runs"]
    headers += [title for title, _, _ in shown]
    table: list[list[str]] = []
    for key, members in groups.items():
        cells = [*(k or "-" for k in key), str(len(members))]
        for _, metric, fmt in shown:
            mean = sum(float(m.metrics[metric]) for m in members) / len(members)
            cells.append(fmt.format(mean))
        table.append(cells)
    return headers, table
