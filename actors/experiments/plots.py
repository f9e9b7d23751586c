"""The experiment's plots, as PNG files drawn with matplotlib's Agg canvas (no display, no
pyplot state): per trace, demand against each policy's capacity over time; and the Pareto
front of cost against SLO violations, one panel per trace, every run a point; and for a live
replay, each replay's live count trajectory over the simulated one."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from actors.experiments.results import COST_COLUMN, SLO_COLUMN, Results, RunRecord

T = TypeVar("T")
MAX_PANELS = 4  # parameter combinations drawn side by side; more: only the first
MAX_LINES = 10  # policy variants drawn each; more: each policy's first variant
MAX_PARETO_PANELS = 12
COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
COST_TITLE = {
    "allocation-hours": "cost: allocation-hours",
    "idle-memory": "cost: idle memory (GB-hours)",
    "node-hours": "cost: node-hours",
}
SLO_TITLE = {
    "violation-minutes": "SLO violation (minutes with unserved demand)",
    "cold-start-share": "cold starts per request",
    "violated-requests": "requests not served in time",
}


def draw_all(results: Results, directory: str) -> list[str]:
    """Every plot of `results` into `directory`; their paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for trace in _unique(r.trace for r in results.records):
        path = os.path.join(directory, f"demand_capacity_{trace}.png")
        _save(demand_capacity(results, trace), path)
        paths.append(path)
    if results.records:
        path = os.path.join(directory, "pareto.png")
        _save(pareto(results), path)
        paths.append(path)
    return paths


def _save(figure: Figure, path: str) -> None:
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=100, metadata={"Software": None})


def _unique(items: Iterable[T]) -> list[T]:
    seen: list[T] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _variant(record: RunRecord) -> str:
    if not record.sweep:
        return record.policy
    return f"{record.policy} ({', '.join(f'{k}={v}' for k, v in record.sweep)})"


def _time_axis(until_s: float) -> tuple[float, str]:
    if until_s > 2 * 86400:
        return 86400.0, "days"
    if until_s > 3 * 3600:
        return 3600.0, "hours"
    return 60.0, "minutes"


def demand_capacity(results: Results, trace: str) -> Figure:
    records = [r for r in results.records if r.trace == trace]
    first_seed = records[0].seed
    combos = _unique(r.parameters for r in records)
    panels = combos if len(combos) <= MAX_PANELS else combos[:1]
    variants = _unique(_variant(r) for r in records)
    if len(variants) > MAX_LINES:  # each policy's first sweep point only
        firsts: dict[str, str] = {}
        for record in records:
            firsts.setdefault(record.policy, _variant(record))
        variants = list(firsts.values())
    figure = Figure(figsize=(10, 3.2 * len(panels) + 0.8), layout="constrained")
    axes = figure.subplots(len(panels), 1, squeeze=False)[:, 0]
    colours = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(variants)}
    for ax, combo in zip(axes, panels, strict=True):
        chosen = [r for r in records if r.parameters == combo and r.seed == first_seed]
        _demand_panel(ax, chosen, variants, colours)
        title = ", ".join(f"{k}={v}" for k, v in combo)
        ax.set_title(f"{title}, seed {first_seed}", fontsize=9)
    figure.suptitle(f"{results.name}: demand and capacity on trace {trace}")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(
        handles, labels, loc="outside lower center", ncols=min(4, len(labels)), fontsize=8
    )
    return figure


def _demand_panel(
    ax: Axes, records: Sequence[RunRecord], variants: Sequence[str], colours: dict[str, str]
) -> None:
    if not records or not records[0].trajectory.times:
        ax.text(0.5, 0.5, "no trajectory", ha="center", transform=ax.transAxes)
        return
    times = records[0].trajectory.times
    until = times[-1] + (times[1] - times[0] if len(times) > 1 else 1.0)
    unit, unit_name = _time_axis(until)
    xs = [t / unit for t in times]
    ax.fill_between(xs, records[0].trajectory.demand, step="post", color="#cccccc", label="demand")
    drawn: set[str] = set()
    for record in records:
        name = _variant(record)
        if name not in variants or name in drawn:
            continue
        drawn.add(name)
        ax.step(
            xs,
            record.trajectory.capacity,
            where="post",
            color=colours[name],
            linewidth=1.2,
            label=name,
        )
    ax.set_xlabel(unit_name)
    ax.set_ylabel("requests/s")
    ax.set_xlim(0, until / unit)
    ax.set_ylim(bottom=0)


def front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The Pareto front when both coordinates are to be minimised, by increasing cost."""
    best: list[tuple[float, float]] = []
    for x, y in sorted(set(points)):
        if not best or y < best[-1][1]:
            best.append((x, y))
    return best


def pareto(results: Results) -> Figure:
    cost = COST_COLUMN[results.pareto.cost]
    slo = SLO_COLUMN[results.pareto.slo]
    traces = _unique(r.trace for r in results.records)[:MAX_PARETO_PANELS]
    policies = _unique(r.policy for r in results.records)
    colours = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(policies)}
    cols = min(3, len(traces))
    rows = (len(traces) + cols - 1) // cols
    figure = Figure(figsize=(4.2 * cols + 1.8, 3.6 * rows + 0.6), layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False).ravel()
    for ax, trace in zip(axes, traces, strict=False):
        records = [r for r in results.records if r.trace == trace]
        for policy in policies:
            mine = [r for r in records if r.policy == policy]
            if mine:
                ax.scatter(
                    [float(r.metrics[cost]) for r in mine],
                    [float(r.metrics[slo]) for r in mine],
                    s=18,
                    color=colours[policy],
                    label=policy,
                    alpha=0.8,
                )
        best = front([(float(r.metrics[cost]), float(r.metrics[slo])) for r in records])
        ax.step(
            [x for x, _ in best],
            [y for _, y in best],
            where="post",
            color="black",
            linestyle="--",
            linewidth=1,
            marker="o",
            markersize=8,
            markerfacecolor="none",
            label="Pareto front",
        )
        ax.set_title(trace, fontsize=10)
        ax.set_xlabel(COST_TITLE[results.pareto.cost], fontsize=8)
        ax.set_ylabel(SLO_TITLE[results.pareto.slo], fontsize=8)
    for ax in axes[len(traces) :]:
        ax.set_visible(False)
    figure.suptitle(f"{results.name}: cost against SLO violations (every run a point)")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(
        handles, labels, loc="outside lower center", ncols=min(4, len(labels)), fontsize=8
    )
    return figure


def draw_live(doc: Mapping[str, Any], directory: str) -> list[str]:
    """live_counts.png of a live.json document (launch/live_experiment.py); its path."""
    if not doc.get("rows"):
        return []
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "live_counts.png")
    _save(live_counts(doc), path)
    return [path]


def live_counts(doc: Mapping[str, Any]) -> Figure:
    """Per replay, the live count trajectory over the simulated one, in trace time."""
    rows = list(doc["rows"])[:MAX_PARETO_PANELS]
    cols = min(2, len(rows))
    n = (len(rows) + cols - 1) // cols
    figure = Figure(figsize=(6 * cols, 3 * n + 0.8), layout="constrained")
    axes = figure.subplots(n, cols, squeeze=False).ravel()
    for ax, row in zip(axes, rows, strict=False):
        until = float(row["until_s"])
        unit, unit_name = _time_axis(until)
        for key, colour in (("simulated", "#1f77b4"), ("live", "#d62728")):
            points = [(float(t), float(c)) for t, c in row[key]]
            xs = [t / unit for t, _ in points] + [until / unit]
            ys = [c for _, c in points] + [points[-1][1]]
            ax.step(xs, ys, where="post", color=colour, linewidth=1.4, label=key)
        ax.set_title(
            f"{row['replay']}: mean |error| {row['mean_abs_count_error']},"
            f" alloc-hours {float(row['allocation_hours_error']):+.1%}",
            fontsize=9,
        )
        ax.set_xlabel(unit_name)
        ax.set_ylabel("allocations")
        ax.set_xlim(0, until / unit)
        ax.set_ylim(bottom=0)
    for ax in axes[len(rows) :]:
        ax.set_visible(False)
    factor = rows[0].get("time_factor", "?")
    figure.suptitle(f"{doc.get('name', '')}: live count against simulated ({factor}x real time)")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8)
    return figure
